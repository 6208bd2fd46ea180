"""``RawKernel`` of the simulated CuPy: the kernel's own CUDA C, built by :mod:`.build`, run on the CPU.

Arguments are checked against the kernel's C signature the way the GPU would need them: an array for each
pointer (of the pointee's size: 16-bit floats travel as ``unsigned short``), and for each scalar a NumPy
scalar of exactly that C type (a Python int is an int64 and a float a float64, as CuPy passes them).  A
mismatch that a GPU would silently misread is an error here.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import build as _build
from . import capture
from .arrays import ndarray

__all__ = ["RawKernel", "LaunchError"]

_SCALARS = {
    "float": np.float32,
    "double": np.float64,
    "int": np.int32,
    "unsigned int": np.uint32,
    "long long": np.int64,
    "unsigned long long": np.uint64,
    "short": np.int16,
    "unsigned short": np.uint16,
    "bool": np.bool_,
    "char": np.int8,
    "unsigned char": np.uint8,
}
_POINTEES = {
    "float": (np.float32,),
    "double": (np.float64,),
    "int": (np.int32,),
    "unsigned int": (np.uint32,),
    "long long": (np.int64,),
    "unsigned long long": (np.uint64,),
    "bool": (np.bool_,),
    "unsigned short": (np.uint16, np.float16),
    "short": (np.int16,),
    "char": (np.int8,),
    "unsigned char": (np.uint8,),
    "void": None,
}
_FIBERED = re.compile(r"\b(__syncthreads\w*|__shfl\w*)\b")
_MAX_BLOCK = 1024


class LaunchError(RuntimeError):
    """A launch the GPU would refuse or misread, or a kernel that failed while it ran (barrier misuse)."""


class RawKernel:
    """``cupy.RawKernel(code, name, options)``: built on first launch, cached by source hash."""

    def __init__(self, code: str, name: str, options: Sequence[str] = (), **_: Any):
        self.code, self.name, self.options = code, name, tuple(options)
        self._sig = _build.signature(code, name)
        self._lib: Any = None
        self._fibered = bool(_FIBERED.search(code))

    def _library(self) -> Any:
        if self._lib is None:
            lib = ctypes.CDLL(str(_build.build(self.code, self.name)))
            fn = lib.ampsim_launch
            fn.restype = ctypes.c_int
            fn.argtypes = [
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.POINTER(ctypes.c_uint),
                ctypes.POINTER(ctypes.c_uint),
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_int,
            ]
            self._lib = (lib, fn)
        return self._lib[1]

    def __call__(self, grid: Sequence[int], block: Sequence[int], args: Sequence[Any], **_: Any) -> None:
        capture.run(self._launch, (grid, block, tuple(args)), {}, writes=True)

    def _launch(self, grid: Sequence[int], block: Sequence[int], args: Sequence[Any]) -> None:
        grid3, block3 = _dims(grid, "grid"), _dims(block, "block")
        threads = block3[0] * block3[1] * block3[2]
        bound = self._sig.max_threads or _MAX_BLOCK
        if threads > bound:
            raise LaunchError(f"{self.name}: a block of {threads} threads exceeds its launch bound of {bound}")
        if len(args) != len(self._sig.params):
            raise LaunchError(
                f"{self.name} takes {len(self._sig.params)} arguments "
                f"({', '.join(p.name for p in self._sig.params)}), got {len(args)}"
            )
        keep = [_marshal(self.name, i, p, a) for i, (p, a) in enumerate(zip(self._sig.params, args))]
        pointers = (ctypes.c_void_p * max(len(keep), 1))(*[ctypes.addressof(k) for k in keep])
        if 0 in grid3 or threads == 0:
            raise LaunchError(
                f"{self.name}: an empty grid {tuple(grid3)} or block {tuple(block3)} (cudaErrorInvalidConfiguration)"
            )
        err = ctypes.create_string_buffer(512)
        rc = self._library()(
            pointers, (ctypes.c_uint * 3)(*grid3), (ctypes.c_uint * 3)(*block3), int(self._fibered), err, len(err)
        )
        if rc:
            raise LaunchError(f"{self.name}: {err.value.decode(errors='replace')}")


def _dims(value: Sequence[int], what: str) -> list[int]:
    dims = [int(v) for v in (value if isinstance(value, (tuple, list)) else (value,))]
    if not 1 <= len(dims) <= 3 or any(d < 0 for d in dims):
        raise LaunchError(f"{what} must be 1 to 3 non-negative sizes, got {value!r}")
    return dims + [1] * (3 - len(dims))


def _marshal(kernel: str, i: int, param: _build.Param, arg: Any) -> Any:
    """The ctypes object holding argument ``i`` as the kernel reads it; LaunchError when its type is wrong."""
    where = f"{kernel} argument {i} ({param.name}: {param.ctype}{' *' if param.pointer else ''})"
    if param.pointer:
        if not isinstance(arg, ndarray):
            raise LaunchError(f"{where} needs a device array, got {type(arg).__name__}")
        allowed = _POINTEES.get(param.ctype, ())
        if allowed is not None and arg.dtype.type not in allowed:
            raise LaunchError(f"{where} got a {arg.dtype} array; the kernel reads {param.ctype} elements")
        return ctypes.c_void_p(arg.data.ptr)
    want = _SCALARS.get(param.ctype)
    if want is None:
        raise LaunchError(f"{where}: the simulator does not pass parameters of type {param.ctype!r}")
    if isinstance(arg, bool):
        arg = np.bool_(arg)
    elif isinstance(arg, int):
        arg = np.int64(arg)
    elif isinstance(arg, float):
        arg = np.float64(arg)
    if not isinstance(arg, np.generic) or arg.dtype.type is not want:
        raise LaunchError(f"{where} got {arg!r} ({type(arg).__name__}); pass np.{np.dtype(want).name}(...)")
    return ctypes.create_string_buffer(np.asarray(arg).tobytes(), np.dtype(want).itemsize)
