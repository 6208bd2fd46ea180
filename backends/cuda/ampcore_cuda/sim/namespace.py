"""The simulated ``cupy`` and ``cupyx`` modules: exactly the part of CuPy the cuda backend uses, over NumPy.

Array functions are NumPy's, returning device arrays and refusing host arrays as CuPy does (``asarray`` and
``array`` copy host data in).  Random numbers come from NumPy's generator, so they are not CuPy's numbers;
the backend promises only determinism in the seed.
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from . import capture, streams
from . import cublas as _cublas
from .arrays import FTZ_EXEMPT, POOL, MemoryPointer, check_no_host_arrays, flush_float32, ndarray, to_device
from .build import SimulatorBuildError
from .devices import Device, MemoryPool, Profile, Runtime
from .kernel import RawKernel
from .nvrtc import Module, Nvrtc

__all__ = ["make_cupy", "make_cupyx"]

_HOST_IN = frozenset({"asarray", "array"})
_NOT_ARRAY_FUNCTIONS = frozenset(
    {
        "dtype",
        "float16",
        "float32",
        "float64",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "uint64",
        "bool_",
        "int8",
        "uint8",
        "int16",
        "newaxis",
        "pi",
        "inf",
        "nan",
        "e",
    }
)


# Reductions CuPy runs as its own (flushing) kernels; ufuncs flush too, but for FTZ_EXEMPT.
_FLUSHING_REDUCTIONS = frozenset(
    {
        "sum",
        "max",
        "min",
        "amax",
        "amin",
        "cumsum",
        "mean",
        "prod",
        "argmax",
        "argmin",
        "nansum",
        "nanmax",
        "nanmin",
        "var",
        "std",
    }
)


def _device_function(name: str) -> Callable[..., Any]:
    fn = getattr(np, name)
    flush = (isinstance(fn, np.ufunc) and name not in FTZ_EXEMPT) or name in _FLUSHING_REDUCTIONS

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if name in _HOST_IN and not all(isinstance(a, ndarray) for a in args[:1]):
            capture.refuse(f"cupy.{name} of host data (a copy from pageable host memory)")
        if name == "matmul":
            capture.refuse("cupy.matmul (CuPy's cuBLAS wrapper raises NotImplementedError in a capture)")
        return capture.run(compute, args, kwargs, writes="out" in kwargs)

    def compute(*args: Any, **kwargs: Any) -> Any:
        if name not in _HOST_IN:
            check_no_host_arrays(args, f"cupy.{name}")
            check_no_host_arrays(kwargs.values(), f"cupy.{name}")
        plain = [
            a.view(np.ndarray)
            if isinstance(a, ndarray)
            else [x.view(np.ndarray) if isinstance(x, ndarray) else x for x in a]
            if isinstance(a, (list, tuple))
            else a
            for a in args
        ]
        if flush:  # CuPy's kernels are built with -ftz=true: float32 subnormals read and written as zeros
            plain = [flush_float32(a) for a in plain]
        with np.errstate(all="ignore"):  # a GPU raises no floating-point warnings
            result = fn(*plain, **kwargs)
        if flush:
            result = flush_float32(result, copy=False) if isinstance(result, np.ndarray) else flush_float32(result)
        if name in _HOST_IN and any(r is result and not isinstance(a, ndarray) for r, a in zip(plain, args)):
            result = result.copy()  # host -> device is always a copy; a device array passes through
        return to_device(result)

    return wrapper


def _ascontiguousarray(a: Any, dtype: Any = None) -> ndarray:
    """CuPy 14's: C-contiguous and, like NumPy's, at least 1-d (a 0-d array comes back with shape (1,); CuPy 13
    kept it 0-d, and the backend relied on that until it ran on CuPy 14)."""
    check_no_host_arrays((a,), "cupy.ascontiguousarray")
    plain = a.view(np.ndarray) if isinstance(a, ndarray) else a
    return capture.run(lambda: to_device(np.ascontiguousarray(plain, dtype=dtype)), (), {}, reads=(a,))


class _Module(types.ModuleType):
    """A module whose unknown attributes are NumPy's array functions, made device functions."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or not hasattr(np, name):
            raise AttributeError(f"the simulated cupy has no attribute {name!r}")
        value = getattr(np, name)
        if name in _NOT_ARRAY_FUNCTIONS or not callable(value) or isinstance(value, type):
            return value
        wrapped = _device_function(name)
        setattr(self, name, wrapped)
        return wrapped


class _Generator:
    """``cupy.random.default_rng(seed)``: NumPy's PCG64, on the device."""

    def __init__(self, seed: Any):
        self._rng = np.random.default_rng(seed)

    def random(self, shape: Any, dtype: Any = np.float64) -> ndarray:
        return self._draw(self._rng.random(shape, dtype=dtype))

    def standard_normal(self, shape: Any, dtype: Any = np.float64) -> ndarray:
        return self._draw(self._rng.standard_normal(shape, dtype=dtype))

    @staticmethod
    def _draw(values: np.ndarray) -> ndarray:
        """The drawn values on the device; a capture's launches write the same values again, as cuRAND's
        offset is fixed in a graph."""
        return capture.run(lambda: to_device(values.copy()), (), {})


def _cupy_raw_kernel(code: str, name: str, options: Any = (), **_: Any) -> RawKernel:
    """``cupy.RawKernel``, refused: CuPy compiles every RawKernel with ``-ftz=true``, flushing float32
    subnormals, which the simulator's IEEE arithmetic cannot reproduce, so a kernel built this way would pass
    here and fail on a GPU."""
    raise SimulatorBuildError(
        f"cupy.RawKernel({name!r}) compiles with -ftz=true (CuPy appends it to every NVRTC compile), flushing "
        "float32 subnormals, which the CUDA simulator cannot model: build kernels with "
        "ampcore_cuda.launch.raw_kernel (NVRTC directly, --ftz=false)"
    )


def make_cupy(profile: Profile) -> types.ModuleType:
    """A fresh simulated ``cupy`` for ``profile``."""
    runtime = Runtime(profile)
    cuda = types.ModuleType("cupy.cuda")
    cuda.runtime = runtime
    cuda.Device = functools.partial(Device, runtime=runtime)
    cuda.cublas = _cublas
    cuda.device = types.SimpleNamespace(get_cublas_handle=_cublas.get_cublas_handle)
    cuda.nvrtc = Nvrtc(profile.major * 10 + profile.minor)
    cuda.function = types.SimpleNamespace(Module=Module)
    cuda.MemoryPointer = MemoryPointer
    cuda.get_current_stream = streams.get_current_stream  # kernels run when launched: streams order only captures
    cuda.Stream = streams.Stream
    cuda.Graph = streams.Graph
    cuda.alloc_pinned_memory = streams.alloc_pinned_memory
    cuda.using_allocator = streams.using_allocator
    cuda.MemoryPool = MemoryPool
    module = _Module("cupy", "simulated CuPy (ampcore_cuda.sim): NumPy arrays, kernels run on the CPU")
    module.cuda = cuda
    module.ndarray = ndarray
    module.ascontiguousarray = _ascontiguousarray
    module.RawKernel = _cupy_raw_kernel
    module.get_default_memory_pool = lambda: POOL
    module.random = types.SimpleNamespace(default_rng=_Generator)
    module.simulated_profile = profile
    return module


def _erf(x: Any) -> ndarray:
    check_no_host_arrays((x,), "cupyx.scipy.special.erf")
    return capture.run(_erf_values, (x,), {})


def _erf_values(x: Any) -> ndarray:
    host = np.asarray(x)
    with np.errstate(all="ignore"):
        return to_device(np.vectorize(math.erf, otypes=[np.float64])(host).astype(host.dtype, copy=False))


def _scatter_add(out: ndarray, indices: Any, values: ndarray) -> None:
    check_no_host_arrays((out, indices, values), "cupyx.scatter_add")
    capture.run(_add_at, (out, indices, values), {}, writes=True)


def _add_at(out: ndarray, indices: Any, values: ndarray) -> None:
    np.add.at(out.view(np.ndarray), np.asarray(indices).view(np.ndarray), np.asarray(values).view(np.ndarray))


def make_cupyx() -> types.ModuleType:
    """The simulated ``cupyx``: ``scatter_add`` and ``scipy.special.erf``."""
    module = types.ModuleType("cupyx")
    module.scatter_add = _scatter_add
    special = types.SimpleNamespace(erf=_erf)
    module.scipy = types.SimpleNamespace(special=special)
    return module
