"""The device array of the cuda backend: a CuPy array plus the ampcore dtype it holds.

CuPy has no bfloat16, so a bfloat16 array is CuPy uint16 words; the wrapper
carries the ampcore dtype so kernels, ``dtype_of`` and ``to_numpy`` know
what the words mean.  Every dtype is wrapped, as in the opencl backend's
``CLArray``, so no kernel has to ask which kind of array it got.
"""

from __future__ import annotations

from typing import Any

from ampcore import dtypes as dt

from .codegen import ctype
from .runtime import import_cupy

__all__ = ["CuArray", "unwrap_all", "contiguous"]


class CuArray:
    """``data`` (a CuPy array in the storage dtype of :func:`ctype`) holding ``dtype`` values."""

    __slots__ = ("data", "dtype", "__weakref__")

    def __init__(self, data: Any, dtype: dt.DType):
        if data.dtype != ctype(dtype).cupy_dtype:
            raise TypeError(f"a {dtype.name} CuArray needs a CuPy {ctype(dtype).cupy_dtype} array, got {data.dtype}")
        self.data = data
        self.dtype = dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def size(self) -> int:
        return int(self.data.size)

    @property
    def ndim(self) -> int:
        return int(self.data.ndim)

    @property
    def nbytes(self) -> int:
        return int(self.data.size) * ctype(self.dtype).itemsize

    @property
    def device_index(self) -> int:
        return int(self.data.device.id)

    def __repr__(self) -> str:
        return f"CuArray(shape={self.shape}, dtype={self.dtype.name}, device=cuda:{self.device_index})"


def unwrap_all(arrays: Any, what: str) -> list[Any]:
    """The CuPy arrays of a sequence of CuArrays; TypeError naming the first that is not one."""
    out = []
    for i, a in enumerate(arrays):
        if not isinstance(a, CuArray):
            raise TypeError(f"{what}: argument {i} is a {type(a).__name__}, expected a cuda device array")
        out.append(a.data)
    return out


def contiguous(data: Any, dtype: Any = None) -> Any:
    """``data`` (a CuPy array) as a C-contiguous CuPy array of the same shape, ``dtype`` if given.

    Not ``cupy.ascontiguousarray`` alone: since CuPy 14 it follows NumPy and returns at least 1-d, so a 0-d
    array (a full reduction, a scalar cast) would come back as shape (1,).
    """
    out = import_cupy().ascontiguousarray(data, dtype=dtype)
    shape = getattr(data, "shape", out.shape)
    return out if out.shape == shape else out.reshape(shape)
