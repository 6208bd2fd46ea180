"""How each ampcore dtype lives in a CuPy array and how kernel sources load and store it.

CuPy has no bfloat16 dtype, so bfloat16 is stored as uint16 words; float16 is
stored as CuPy float16 (so cuBLAS and CuPy's own copies can use it) but every
kernel here reads both 16-bit types as ``unsigned short`` and converts by
integer arithmetic, the same bit-exact conversions as the opencl backend (one
source for both: :mod:`ampcore.cgen`, rendered for CUDA C):

- load: float16 -> float exactly (subnormals, inf, NaN); bfloat16 is a shift;
- store: float -> 16 bits rounded to nearest-even once, overflow to inf,
  NaN kept NaN (quiet, sign kept).

No ``cuda_fp16.h``/``cuda_bf16.h``: the sources compile with NVRTC and nvcc
without include paths, and their bits do not depend on the header's version.
Arithmetic on 16-bit values is float32; float64 stays double.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt

__all__ = ["CType", "ctype", "PRELUDE", "NO_CONTRACT_NOTE"]

NO_CONTRACT_NOTE = "compile with --fmad=false: every operation rounded on its own, like the cpu backend"


@dataclass(frozen=True)
class CType:
    """One dtype's element type in kernels, its compute type and its load/store code."""

    dtype: dt.DType
    storage: str  # C type of the array elements as kernels see them
    compute: str  # C type arithmetic runs in
    tag: str  # short name for kernel names and cache keys
    cupy_dtype: np.dtype  # dtype of the CuPy array holding it

    @property
    def itemsize(self) -> int:
        return self.cupy_dtype.itemsize

    def load(self, ptr: str, index: str) -> str:
        """A C expression: element ``index`` of ``ptr`` in the compute type (:func:`ampcore.cgen.load`)."""
        return cgen.load(self.tag, ptr, index)

    def store(self, ptr: str, index: str, value: str) -> str:
        """A C statement writing ``value`` (float for the 16-bit types) rounded once to this dtype."""
        return cgen.store(self.tag, self.storage, ptr, index, value)


# The CuPy dtype holding each dtype where it is not its own: CuPy has no bfloat16
_RAW = {dt.bfloat16: np.uint16, **dict.fromkeys(dt.FLOAT8_DTYPES, np.uint8)}  # nor float8: bytes


def _make(dtype: dt.DType) -> CType:
    tag = cgen.TAGS[dtype.name]
    storage, compute = cgen.element_type(cgen.CUDA, tag), cgen.compute_type(cgen.CUDA, tag)
    return CType(dtype, storage, compute, tag, np.dtype(_RAW.get(dtype, dtype.numpy)))


_TABLE = {
    d: _make(d)
    for d in (dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int32, dt.int64, dt.bool_, *dt.FLOAT8_DTYPES)
}

FLOAT_CTYPES = tuple(_TABLE[d] for d in (dt.float32, dt.float64, dt.float16, dt.bfloat16))


def ctype(dtype: dt.DType) -> CType:
    """The CType of ``dtype``; TypeError naming it when the backend cannot store it."""
    try:
        return _TABLE[dtype]
    except KeyError:
        raise TypeError(
            f"the cuda backend cannot store {dtype!r}; it stores {', '.join(d.name for d in _TABLE)}"
        ) from None


# The conversions every kernel loads and stores through: ampcore.cgen's, the opencl backend's bits, rendered
# for CUDA C.
PRELUDE = cgen.conversions(cgen.CUDA)
