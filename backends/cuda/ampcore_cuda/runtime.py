"""Finding CuPy, the driver and the devices, and turning a device's properties into :class:`ampcore.Capabilities`.

Everything here works without CuPy: CuPy is imported on first use, and each
way it can be missing (not installed, failing to import, no driver, a driver
too old for CuPy's CUDA, no device, a device CuPy's CUDA no longer supports)
becomes one sentence naming the cause and the command that fixes it.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any

import ampcore
from ampcore import dtypes as dt

__all__ = [
    "INSTALL_HINT",
    "import_cupy",
    "import_cupy_module",
    "resolve_module",
    "simulated",
    "probe",
    "device_count",
    "properties",
    "capabilities_from_properties",
    "GEMM_OPS",
    "MIN_CC_BY_CUDA_MAJOR",
]

INSTALL_HINT = "pip install 'ampcore-cuda[cuda12]' (CUDA 12 driver) or 'ampcore-cuda[cuda13]' (CUDA 13 driver)"
# What installing either extra costs, and what works without a GPU: said where CuPy is missing.
DOWNLOAD_NOTE = "either extra brings CuPy and about 10 large NVIDIA packages (NVRTC, cuBLAS, ...) from PyPI"
SIMULATOR_NOTE = "No GPU? AMPCORE_CUDA_SIMULATOR=h100 (or t4) runs this backend on its CPU simulator (needs g++)"

# cudaError_t values CuPy reports in CUDARuntimeError.status (driver_types.h).
_INSUFFICIENT_DRIVER, _STUB_LIBRARY, _NO_DEVICE = 35, 34, 100

# CUDA 13 dropped Maxwell, Pascal and Volta (sm_50 .. sm_72): CuPy's cuda13 wheel cannot run kernels there.
MIN_CC_BY_CUDA_MAJOR = {12: (5, 0), 13: (7, 5)}

# The ops autocast runs in float32 when the device has no tensor cores for the dtype (cuBLAS has no bfloat16
# GEMM before compute capability 8.0; the backend would widen to float32 anyway, so say so in the trace).
GEMM_OPS = frozenset(
    {
        "matmul",
        "mm",
        "bmm",
        "addmm",
        "addbmm",
        "baddbmm",
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    }
)


def import_cupy() -> Any:
    """The ``cupy`` module (imported on first call), or the simulated one when :func:`simulated` names a
    profile; raises what the import raises, ValueError for an unknown ``AMPCORE_CUDA_SIMULATOR``."""
    return import_cupy_module("cupy")


def import_cupy_module(name: str) -> Any:
    """``cupy`` or one of its modules the backend uses (``cupy.cuda.cublas``, ``cupyx``,
    ``cupyx.scipy.special``): the real one, or the simulator's when it is on (see :func:`resolve_module`)."""
    profile, _ = _simulator(os.environ.get(_SIM_ENV, ""))
    if profile is not None:
        from . import sim

        return resolve_module(name, lambda n: sim.module(n, profile))
    return resolve_module(name, importlib.import_module)


def resolve_module(name: str, import_module: Callable[[str], Any]) -> Any:
    """Module ``name`` through ``import_module``, else the attribute of its parent module of that name.

    CuPy 14 no longer has ``cupy.cuda.cublas`` (nor ``nvrtc``, ``cusolver``, ...) as an importable submodule:
    ``cupy/cuda/__init__.py`` hands it out through a module ``__getattr__`` (it is
    ``cupy_backends.cuda.libs.cublas``), so ``import_module`` raises ModuleNotFoundError where CuPy 13 imported
    it.  Any other ModuleNotFoundError (CuPy itself missing) propagates unchanged.
    """
    try:
        return import_module(name)
    except ModuleNotFoundError as exc:
        parent, _, attr = name.rpartition(".")
        if not parent or exc.name != name:
            raise
        try:
            return getattr(resolve_module(parent, import_module), attr)
        except AttributeError:
            raise exc from None


_SIM_ENV = "AMPCORE_CUDA_SIMULATOR"


@functools.cache
def _simulator(value: str) -> tuple[Any, str]:
    """(the simulator profile to use or None, a note for ``ampcore info``) for ``AMPCORE_CUDA_SIMULATOR=value``.

    Never the simulator when real CuPy sees a GPU: then the variable is ignored, and the note says so.
    """
    from . import sim

    profile = sim.requested_profile(value)  # ValueError for an unknown value, naming the valid ones
    if profile is None:
        return None, ""
    try:
        if int(importlib.import_module("cupy").cuda.runtime.getDeviceCount()) > 0:
            return None, f"{_SIM_ENV}={value!r} ignored: CuPy and a GPU are present, so the GPU runs the kernels"
    except Exception:  # noqa: BLE001 - no CuPy or no GPU: the simulator stands in
        pass
    return profile, (
        f"simulated: {_SIM_ENV}={value!r} runs the CUDA kernels on the CPU with g++ (an "
        f"sm_{profile.major}{profile.minor} {profile.name}); no GPU, no speed figures"
    )


def simulated() -> bool:
    """Whether the backend runs on the CUDA simulator (``AMPCORE_CUDA_SIMULATOR`` set, no real GPU)."""
    try:
        return _simulator(os.environ.get(_SIM_ENV, ""))[0] is not None
    except ValueError:
        return False


def _wheel(runtime_version: int) -> str:
    return f"cupy-cuda{runtime_version // 1000}x"


def _cuda_version(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


def _runtime_error_reason(exc: Exception, runtime: Any) -> str:
    """The sentence for a CUDARuntimeError from ``getDeviceCount``."""
    status = getattr(exc, "status", None)
    rt_version = _safe(runtime.runtimeGetVersion, 0)
    if status == _INSUFFICIENT_DRIVER:
        driver = _safe(runtime.driverGetVersion, 0)
        if not driver:
            return (
                f"no NVIDIA driver is loaded ({exc}): install the NVIDIA driver and check that "
                "`nvidia-smi` lists the GPU"
            )
        other = "cuda12" if rt_version >= 13000 else "cuda13"
        return (
            f"the NVIDIA driver supports CUDA {_cuda_version(driver)} but {_wheel(rt_version)} needs CUDA "
            f"{_cuda_version(rt_version)} ({exc}): upgrade the driver, or pip uninstall {_wheel(rt_version)} "
            f"&& pip install 'ampcore-cuda[{other}]'"
        )
    if status == _NO_DEVICE:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return (
            f"no CUDA-capable device is detected ({exc}; CUDA_VISIBLE_DEVICES={visible!r}): check that "
            "`nvidia-smi` lists a GPU and that CUDA_VISIBLE_DEVICES is unset or names one"
        )
    if status == _STUB_LIBRARY:
        return (
            f"the CUDA driver library found is the toolkit's stub ({exc}): remove the stubs directory from "
            "LD_LIBRARY_PATH so the real libcuda.so from the NVIDIA driver loads"
        )
    return f"the CUDA runtime failed to list devices ({type(exc).__name__}: {exc}): check that `nvidia-smi` works"


def _safe(fn: Any, default: Any) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - a probe must not raise; the caller reports the default
        return default


def probe() -> ampcore.Availability:
    """Whether CuPy, a driver and a supported device are present; the reason and the fix if not.  Never raises.

    On the simulator: available, with a reason saying so (``ampcore info`` prints it in the status line).
    """
    try:
        profile, note = _simulator(os.environ.get(_SIM_ENV, ""))
    except ValueError as exc:
        return ampcore.Availability(False, str(exc))
    if profile is not None:
        return _probe_simulator(note)
    status = _probe_cupy()
    if note and status.ok:  # the variable was set but a real GPU won: say so
        return ampcore.Availability(True, note)
    return status


def _probe_simulator(note: str) -> ampcore.Availability:
    from .sim import build

    try:
        build.compiler()
    except build.SimulatorBuildError as exc:
        return ampcore.Availability(False, str(exc))
    return ampcore.Availability(True, note)


def _probe_cupy() -> ampcore.Availability:
    try:
        cupy = import_cupy()
    except ModuleNotFoundError as exc:
        if exc.name == "cupy" or exc.name is None:
            return ampcore.Availability(
                False, f"CuPy is not installed: {INSTALL_HINT}; {DOWNLOAD_NOTE}. {SIMULATOR_NOTE}"
            )
        return _broken_cupy(exc)
    except Exception as exc:  # noqa: BLE001 - a CuPy wheel for another CUDA, a missing shared library, ...
        return _broken_cupy(exc)
    try:
        runtime = cupy.cuda.runtime
        count = runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - availability() reports a failed query, never raises
        if type(exc).__name__ == "CUDARuntimeError":
            return ampcore.Availability(False, _runtime_error_reason(exc, cupy.cuda.runtime))
        return ampcore.Availability(
            False, f"CuPy could not query the CUDA runtime ({type(exc).__name__}: {exc}): check that `nvidia-smi` works"
        )
    if count == 0:
        return ampcore.Availability(False, "the CUDA runtime reports 0 devices: check that `nvidia-smi` lists a GPU")
    supported = _check_supported(runtime, count)
    return _check_libraries(cupy) if supported else supported


def _broken_cupy(exc: BaseException) -> ampcore.Availability:
    return ampcore.Availability(
        False,
        (
            f"CuPy is installed but fails to import ({type(exc).__name__}: {exc}): install exactly one CuPy wheel, the "
            f"one for your driver's CUDA major version: pip uninstall -y cupy-cuda12x cupy-cuda13x && {INSTALL_HINT}"
        ),
    )


def _check_supported(runtime: Any, count: int) -> ampcore.Availability:
    rt_version = _safe(runtime.runtimeGetVersion, 0)
    need = MIN_CC_BY_CUDA_MAJOR.get(rt_version // 1000)
    for index in range(count):
        props = runtime.getDeviceProperties(index)
        cc = (int(props["major"]), int(props["minor"]))
        if need is not None and cc < need:
            return ampcore.Availability(
                False,
                (
                    f"device {index} ({_name(props)!r}) has compute capability {cc[0]}.{cc[1]}, which CUDA "
                    f"{_cuda_version(rt_version)} ({_wheel(rt_version)}) no longer supports "
                    f"(it needs {need[0]}.{need[1]}+): pip uninstall -y {_wheel(rt_version)} && "
                    "pip install 'ampcore-cuda[cuda12]', or hide the device with CUDA_VISIBLE_DEVICES"
                ),
            )
    return ampcore.Availability(True)


def _check_libraries(cupy: Any) -> ampcore.Availability:
    """Whether CuPy finds NVRTC (every RawKernel compiles through it) and cuBLAS (the 16-bit GEMMs).

    CuPy loads both on first use, from a CUDA Toolkit or from the PyPI packages its ``[ctk]`` extra installs;
    CuPy 14 wheels ship neither, so a driver-only machine imports CuPy, sees the GPU, and fails at the first
    kernel unless this says so first.
    """
    rt_version = _safe(cupy.cuda.runtime.runtimeGetVersion, 0)
    for library, load in (("NVRTC", lambda: cupy.cuda.nvrtc.getVersion()), ("cuBLAS", lambda: cupy.cuda.cublas)):
        try:
            load()
        except Exception as exc:  # noqa: BLE001 - DynamicLibNotFoundError (CuPy 14), ImportError, OSError, ...
            return ampcore.Availability(
                False,
                (
                    f"CuPy cannot load {library} ({type(exc).__name__}: {exc}): "
                    f"pip install '{_wheel(rt_version)}[ctk]' "
                    f"(the CUDA libraries from PyPI), or install the CUDA Toolkit {rt_version // 1000}"
                ),
            )
    return ampcore.Availability(True)


def device_count() -> int:
    """The number of CUDA devices (0 when CuPy or the driver is missing)."""
    try:
        return int(import_cupy().cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - unavailable: availability() says why
        return 0


def properties(index: int) -> Mapping[str, Any]:
    """``cudaGetDeviceProperties`` of device ``index`` as CuPy returns it (a dict)."""
    cupy = import_cupy()
    count = cupy.cuda.runtime.getDeviceCount()
    if not 0 <= index < count:
        raise ValueError(f"no device cuda:{index}; this machine has cuda:0 .. cuda:{count - 1}")
    return cupy.cuda.runtime.getDeviceProperties(index)


def _name(props: Mapping[str, Any]) -> str:
    name = props.get("name", b"")
    return (name.decode(errors="replace") if isinstance(name, bytes) else str(name)).strip("\x00 ")


FLOAT8_CC = (8, 9)  # Ada (sm_89) and Hopper (sm_90): float8 tensor cores


def capabilities_from_properties(
    props: Mapping[str, Any], runtime_version: int = 0, float8_gemm: Any = None
) -> ampcore.Capabilities:
    """What a device of compute capability ``major.minor`` does in this backend.

    Every kernel of this backend computes float16/bfloat16 in float32 and rounds
    once, so every floating dtype is storable everywhere.  "native" means the
    GEMMs run on tensor cores in that dtype (accumulating in float32):

    - cc >= 8.0 (Ampere+): float16 and bfloat16 tensor cores; autocast bfloat16
      (float32's range: no loss scaling needed).
    - 7.0 <= cc < 8.0 (Volta, Turing): float16 tensor cores only; autocast
      float16; bfloat16 is emulated and its GEMMs are listed in
      ``fallback_ops`` (autocast runs them in float32 and says why).
    - cc < 7.0 (Pascal and older): no tensor cores.  Autocast still defaults to
      float16: it halves activation memory and bandwidth, though GEMMs gain no
      speed; both 16-bit dtypes are emulated and bfloat16 GEMMs fall back.

    float8 needs cc >= 8.9 (Ada, Hopper, Blackwell: float8 tensor cores); there
    the float8 dtypes are storable.  ``float8`` is ``"native"`` where
    ``float8_gemm`` (:func:`ampcore_cuda.cublaslt.support`) says cuBLASLt runs
    float8 GEMMs on this device (nvmath-python installed), and
    ``"emulated"`` otherwise: the float8 operands are then widened exactly to
    float16 for the tensor cores (:mod:`ampcore_cuda.float8`).  Either way the
    conversions are integer bit arithmetic (:func:`ampcore.cgen.float8_conversions`,
    bit-exact ml_dtypes), and ``float8_reason`` says which GEMMs run how.
    Below 8.9 ``float8`` is ``"none"`` with the reason: no float8 hardware, so
    a float8 recipe would only be slower than the 16-bit one; rehearse it on the
    cpu backend.
    """
    cc = (int(props["major"]), int(props["minor"]))
    ints = {dt.float64, dt.float32, dt.int32, dt.int64, dt.bool_}
    storable = frozenset(ints | {dt.float16, dt.bfloat16})
    tensor_cores = [d for d, need in ((dt.float16, (7, 0)), (dt.bfloat16, (8, 0))) if cc >= need]
    native = frozenset(ints | set(tensor_cores))
    fallback = {} if dt.bfloat16 in tensor_cores else {dt.bfloat16: GEMM_OPS}
    float8 = cc >= FLOAT8_CC
    if float8:
        storable |= frozenset(dt.FLOAT8_DTYPES)
    return ampcore.Capabilities(
        device_name=_name(props),
        storable=storable,
        native=native,
        emulated=storable - native - frozenset(dt.FLOAT8_DTYPES),
        autocast_dtype=dt.bfloat16 if dt.bfloat16 in tensor_cores else dt.float16,
        policy="cuda",
        memory_bytes=int(props.get("totalGlobalMem", 0)) or None,
        fallback_ops=fallback,
        extra={
            "compute_capability": f"{cc[0]}.{cc[1]}",
            "tensor_cores": [d.name for d in tensor_cores],
            "multiprocessors": int(props.get("multiProcessorCount", 0)),
            "cuda_runtime": _cuda_version(runtime_version) if runtime_version else None,
            **({"simulated": f"{_SIM_ENV}={os.environ.get(_SIM_ENV, '')}"} if simulated() else {}),
        },
        float8=("native" if float8_gemm is not None and float8_gemm.tensorwise else "emulated") if float8 else "none",
        float8_reason=(
            (float8_gemm.summary if float8_gemm is not None else "")
            if float8
            else f"float8 needs compute capability {FLOAT8_CC[0]}.{FLOAT8_CC[1]}+ (float8 tensor cores); "
            f"{_name(props)} has {cc[0]}.{cc[1]}: train in 16 bits here, or rehearse float8 on the cpu backend"
        ),
    )
