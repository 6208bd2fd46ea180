"""The cuda backend without a GPU: every way it can be unavailable, with the reason and the fix, and the
capabilities each compute capability gets.  A fake ``cupy`` module stands in for CuPy, so these run
everywhere; nothing here launches a kernel (tests/test_cuda_kernels_compile.py compiles them).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType, SimpleNamespace

import pytest

from ampcore import dtypes as dt
from ampcore_cuda import runtime
from ampcore_cuda.plugin import CUDABackend


class CUDARuntimeError(RuntimeError):
    """CuPy's exception: the cudaError_t value is ``status``."""

    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(message)


def _props(major: int, minor: int, name: bytes = b"Fake GPU") -> dict:
    return {"name": name, "major": major, "minor": minor, "totalGlobalMem": 80 << 30, "multiProcessorCount": 108}


def _fake_cupy(monkeypatch, *, count=1, error=None, driver=12040, rt=13000, cc=(9, 0), nvrtc_error=None) -> ModuleType:
    def get_device_count() -> int:
        if error is not None:
            raise error
        return count

    def nvrtc_version() -> tuple[int, int]:
        if nvrtc_error is not None:
            raise nvrtc_error
        return divmod(rt // 10, 100)

    fake = ModuleType("cupy")
    fake.cuda = SimpleNamespace(
        runtime=SimpleNamespace(
            getDeviceCount=get_device_count,
            driverGetVersion=lambda: driver,
            runtimeGetVersion=lambda: rt,
            getDeviceProperties=lambda i: _props(*cc),
            CUDARuntimeError=CUDARuntimeError,
        ),
        nvrtc=SimpleNamespace(getVersion=nvrtc_version),
        cublas=SimpleNamespace(),
    )
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def test_without_cupy_the_backend_is_unavailable_and_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` raise ModuleNotFoundError
    status = CUDABackend().availability()
    assert not status.ok
    assert status.reason.startswith("CuPy is not installed")
    assert "ampcore-cuda[cuda12]" in status.reason and "ampcore-cuda[cuda13]" in status.reason
    assert CUDABackend().device_count() == 0


class _FailingImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name == "cupy" else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise ImportError("libnvrtc.so.13: cannot open shared object file: No such file or directory")


def test_a_cupy_that_fails_to_import_is_reported_with_its_error_and_the_reinstall_command(monkeypatch):
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_FailingImport(), *sys.meta_path])
    status = CUDABackend().availability()
    assert not status.ok
    assert "fails to import (ImportError: libnvrtc.so.13: cannot open shared object file" in status.reason
    assert "pip uninstall -y cupy-cuda12x cupy-cuda13x" in status.reason


def test_no_driver_is_told_apart_from_an_old_driver(monkeypatch):
    error = CUDARuntimeError(
        35, "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"
    )
    _fake_cupy(monkeypatch, error=error, driver=0)
    status = CUDABackend().availability()
    assert not status.ok
    assert status.reason.startswith("no NVIDIA driver is loaded (cudaErrorInsufficientDriver")
    assert "nvidia-smi" in status.reason


def test_a_driver_too_old_for_cupys_cuda_names_both_versions_and_the_other_wheel(monkeypatch):
    error = CUDARuntimeError(35, "cudaErrorInsufficientDriver: CUDA driver version is insufficient")
    _fake_cupy(monkeypatch, error=error, driver=12040, rt=13000)
    reason = CUDABackend().availability().reason
    assert "the NVIDIA driver supports CUDA 12.4 but cupy-cuda13x needs CUDA 13.0" in reason
    assert "pip uninstall cupy-cuda13x && pip install 'ampcore-cuda[cuda12]'" in reason


def test_no_device_reports_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    _fake_cupy(monkeypatch, error=CUDARuntimeError(100, "cudaErrorNoDevice: no CUDA-capable device is detected"))
    reason = CUDABackend().availability().reason
    assert reason.startswith("no CUDA-capable device is detected (cudaErrorNoDevice")
    assert "CUDA_VISIBLE_DEVICES=''" in reason


def test_the_toolkit_stub_driver_is_named(monkeypatch):
    _fake_cupy(monkeypatch, error=CUDARuntimeError(34, "cudaErrorStubLibrary: CUDA driver is a stub library"))
    assert "LD_LIBRARY_PATH" in CUDABackend().availability().reason


def test_an_unknown_runtime_error_is_passed_through(monkeypatch):
    _fake_cupy(monkeypatch, error=CUDARuntimeError(999, "cudaErrorUnknown: unknown error"))
    reason = CUDABackend().availability().reason
    assert "cudaErrorUnknown: unknown error" in reason and "nvidia-smi" in reason


def test_a_volta_gpu_under_cuda13_is_unavailable_and_pointed_at_cuda12(monkeypatch):
    _fake_cupy(monkeypatch, rt=13000, cc=(7, 0))
    reason = CUDABackend().availability().reason
    assert "compute capability 7.0, which CUDA 13.0 (cupy-cuda13x) no longer supports" in reason
    assert "'ampcore-cuda[cuda12]'" in reason


def test_a_volta_gpu_under_cuda12_is_available(monkeypatch):
    _fake_cupy(monkeypatch, rt=12080, cc=(7, 0))
    assert CUDABackend().availability().ok
    assert CUDABackend().device_count() == 1


class DynamicLibNotFoundError(RuntimeError):
    """What CuPy 14 (cuda-pathfinder) raises when a CUDA library is on neither the PyPI packages nor the system."""


def test_a_gpu_without_nvrtc_is_unavailable_and_pointed_at_the_ctk_extra(monkeypatch):
    missing = DynamicLibNotFoundError('Failure finding "libnvrtc.so.13 or libnvrtc.so.12"')
    _fake_cupy(monkeypatch, rt=13000, cc=(9, 0), nvrtc_error=missing)
    reason = CUDABackend().availability().reason
    assert reason.startswith('CuPy cannot load NVRTC (DynamicLibNotFoundError: Failure finding "libnvrtc.so.13')
    assert "pip install 'cupy-cuda13x[ctk]'" in reason and "CUDA Toolkit 13" in reason


def _cupy14_importer(missing: str = ""):
    """``importlib.import_module`` over a CuPy 14 layout: ``cupy.cuda.cublas`` is an attribute, not a module."""
    cublas = ModuleType("cupy_backends.cuda.libs.cublas")
    cuda = SimpleNamespace(cublas=cublas)
    modules = {"cupy": SimpleNamespace(cuda=cuda), "cupy.cuda": cuda}

    def import_module(name: str):
        parts = name.split(".")
        for first in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):  # parents first, as Python does
            if first not in modules or first == missing:
                raise ModuleNotFoundError(f"No module named {first!r}", name=first)
        return modules[name]

    return import_module, cublas


def test_cupy14s_cublas_is_found_as_an_attribute_of_cupy_cuda():
    import_module, cublas = _cupy14_importer()
    assert runtime.resolve_module("cupy.cuda.cublas", import_module) is cublas
    with pytest.raises(ModuleNotFoundError, match="cupy.cuda.nvrtc"):
        runtime.resolve_module("cupy.cuda.nvrtc", import_module)  # no such attribute either: the original error


def test_a_missing_cupy_is_reported_as_cupy_not_as_the_submodule():
    import_module, _ = _cupy14_importer(missing="cupy")
    with pytest.raises(ModuleNotFoundError) as err:
        runtime.resolve_module("cupy.cuda.cublas", import_module)
    assert err.value.name == "cupy"


def test_the_simulator_imports_submodules_as_cupy14_does(monkeypatch):
    from ampcore_cuda import sim
    from ampcore_cuda.sim import cublas

    with pytest.raises(ModuleNotFoundError):
        sim.module("cupy.cuda.cublas", sim.PROFILES["h100"])  # a bare import_module("cupy.cuda.cublas") fails
    monkeypatch.setenv("AMPCORE_CUDA_SIMULATOR", "h100")
    monkeypatch.setattr(runtime, "_simulator", lambda value: (sim.PROFILES["h100"], ""))
    assert runtime.import_cupy_module("cupy.cuda.cublas") is cublas


def test_availability_on_this_machine_never_raises():
    status = CUDABackend().availability()  # the real CuPy, if installed: no GPU in CI, so a reason
    assert status.ok or status.reason


# --------------------------------------------------------------------------- capabilities
def test_ampere_has_bfloat16_tensor_cores_and_autocasts_to_bfloat16():
    caps = runtime.capabilities_from_properties(_props(8, 0, b"NVIDIA A100-SXM4-80GB"), 13000)
    assert caps.device_name == "NVIDIA A100-SXM4-80GB"
    assert caps.autocast_dtype == dt.bfloat16 and caps.policy == "cuda"
    assert {dt.float16, dt.bfloat16} <= caps.native and not caps.emulated
    assert caps.fallback_ops == {}
    assert caps.memory_bytes == 80 << 30
    assert caps.extra["tensor_cores"] == ["float16", "bfloat16"] and caps.extra["compute_capability"] == "8.0"
    assert caps.extra["cuda_runtime"] == "13.0"


def test_volta_has_float16_tensor_cores_only_and_runs_bfloat16_gemms_in_float32():
    caps = runtime.capabilities_from_properties(_props(7, 0))
    assert caps.autocast_dtype == dt.float16
    assert dt.float16 in caps.native and caps.emulated == {dt.bfloat16}
    assert dt.bfloat16 in caps.storable
    assert {"matmul", "linear", "conv2d"} <= caps.fallback_ops[dt.bfloat16]
    assert caps.extra["tensor_cores"] == ["float16"]


def test_pascal_has_no_tensor_cores_emulates_both_16_bit_dtypes_but_still_autocasts_to_float16():
    caps = runtime.capabilities_from_properties(_props(6, 1))
    assert caps.extra["tensor_cores"] == []
    assert caps.emulated == {dt.float16, dt.bfloat16}
    assert caps.autocast_dtype == dt.float16  # memory and bandwidth halve even without tensor cores
    assert dt.float16 not in caps.fallback_ops and dt.bfloat16 in caps.fallback_ops


def test_capabilities_come_from_cupys_device_properties(monkeypatch):
    _fake_cupy(monkeypatch, rt=12080, cc=(8, 6))
    caps = CUDABackend().capabilities(0)
    assert caps.extra["compute_capability"] == "8.6" and caps.autocast_dtype == dt.bfloat16
    with pytest.raises(ValueError, match=r"no device cuda:3; this machine has cuda:0 .. cuda:0"):
        CUDABackend().capabilities(3)


def test_importing_the_backend_does_not_import_cupy(run_python):
    proc = run_python("import sys, ampcore_cuda.plugin, ampcore_cuda.kernels; print('cupy' in sys.modules)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


# --------------------------------------------------------------------------- the kernel table and launch plans
def test_the_kernel_table_has_every_primitive_and_every_fused_kernel_of_the_contract():
    from ampcore.kernels import FUSED, PRIMITIVES

    names = set(CUDABackend().kernel_functions())
    assert PRIMITIVES <= names
    # The core's reference compositions run on cuda for the tiled max-pool pair (issue 28 fused them for the cpu
    # backend's cnn; cuda pools through the composition's reshape and max).
    assert names - PRIMITIVES == FUSED - {"max_pool2d_tiled", "max_pool2d_tiled_backward", "quantize_float8_current"}


def test_the_installed_backend_is_listed_unavailable_with_its_reason_and_not_broken(run_python):
    import json

    proc = run_python("", args=("-m", "ampcore", "info", "--json"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    cuda = next(b for b in report["backends"] if b["name"] == "cuda")
    status = CUDABackend().availability()
    assert cuda["available"] is status.ok
    assert status.ok or cuda["reason"] == status.reason
    assert "cuda" not in json.dumps(report["broken_plugins"])


class _FakeArray(SimpleNamespace):
    pass


def _fake_array(size: int, ptr: int) -> _FakeArray:
    return _FakeArray(size=size, data=SimpleNamespace(ptr=ptr))


def test_multi_tensor_meta_lays_out_first_blocks_sizes_and_pointers_and_is_cached(monkeypatch):
    import numpy as np

    from ampcore_cuda import launch

    uploads = []

    def asarray(host):
        uploads.append(host)
        return host

    fake = _fake_cupy(monkeypatch)
    fake.asarray = asarray
    fake.cuda.Device = _NullDevice
    monkeypatch.setattr(launch, "_metas", launch.OrderedDict())
    tile = launch.TILE
    groups = [
        (_fake_array(1, 0x1000), _fake_array(1, 0x2000)),
        (_fake_array(tile, 0x3000), _fake_array(tile, 0x4000)),
        (_fake_array(tile + 1, 0x5000), _fake_array(tile + 1, 0x6000)),
    ]
    meta, blocks = launch.multi_tensor_meta(0, groups)
    assert blocks == 4
    assert meta.dtype == np.int64
    assert meta.tolist() == [0, 1, 2, 4, 1, tile, tile + 1, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000]
    again, _ = launch.multi_tensor_meta(0, groups)
    assert again is meta and len(uploads) == 1  # same tensors next step: nothing uploaded


class _NullDevice:
    def __init__(self, index: int):
        self.index = index

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def test_row_blocks_shrink_to_the_row_but_stay_a_whole_warp():
    from ampcore_cuda.rows import ROW_BLOCK, row_block, row_geometry

    assert row_block(10_000) == ROW_BLOCK
    assert row_block(100) == 128
    assert row_block(3) == 32
    assert row_geometry((2, 3, 4), 1) == (8, 3, 4)
    assert row_geometry((2, 0, 4), 1) == (0, 0, 4)


# --------------------------------------------------------------------------- peak memory
class _FakePool:
    """CuPy's MemoryPool as peak_memory sees it: total_bytes() counts held blocks, freed or not."""

    def __init__(self, held: int):
        self.held, self.calls = held, []

    def free_all_blocks(self) -> None:
        self.calls.append("free_all_blocks")
        self.held = 0

    def total_bytes(self) -> int:
        self.calls.append("total_bytes")
        return self.held


def test_peak_memory_is_the_pools_growth_measured_on_the_requested_device(monkeypatch):
    fake = _fake_cupy(monkeypatch)
    pool, entered, synced = _FakePool(held=4096), [], []

    class Device(_NullDevice):
        def __enter__(self):
            entered.append(self.index)
            return self

        def synchronize(self):
            synced.append(self.index)

    fake.cuda.Device = Device
    fake.get_default_memory_pool = lambda: pool

    def fn():
        pool.held += 3 << 20  # the pool keeps what fn freed, so this is its high-water mark
        return "ignored"

    assert CUDABackend().peak_memory(fn, 1) == 3 << 20
    assert entered == [1] and synced == [1]
    assert pool.calls[:2] == ["free_all_blocks", "total_bytes"]  # cached blocks from before are not counted
