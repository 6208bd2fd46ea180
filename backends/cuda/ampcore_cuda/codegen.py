"""How each ampcore dtype lives in a CuPy array and how kernel sources load and store it.

CuPy has no bfloat16 dtype, so bfloat16 is stored as uint16 words; float16 is
stored as CuPy float16 (so cuBLAS and CuPy's own copies can use it) but every
kernel here reads both 16-bit types as ``unsigned short`` and converts by
integer arithmetic, the same bit-exact conversions as the opencl backend:

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
        """A C expression: element ``index`` of ``ptr`` in the compute type."""
        if self.tag == "f16":
            return f"half_to_float({ptr}[{index}])"
        if self.tag == "bf16":
            return f"bf16_to_float({ptr}[{index}])"
        if self.tag == "b8":
            return f"(int)({ptr}[{index}] != 0)"
        return f"{ptr}[{index}]"

    def store(self, ptr: str, index: str, value: str) -> str:
        """A C statement writing ``value`` (float for the 16-bit types) rounded once to this dtype."""
        if self.tag == "f16":
            return f"{ptr}[{index}] = float_to_half({value});"
        if self.tag == "bf16":
            return f"{ptr}[{index}] = float_to_bf16({value});"
        if self.tag == "b8":
            return f"{ptr}[{index}] = (({value}) != 0);"
        return f"{ptr}[{index}] = ({self.storage})({value});"


_TABLE = {
    dt.float32: CType(dt.float32, "float", "float", "f32", np.dtype(np.float32)),
    dt.float64: CType(dt.float64, "double", "double", "f64", np.dtype(np.float64)),
    dt.float16: CType(dt.float16, "unsigned short", "float", "f16", np.dtype(np.float16)),
    dt.bfloat16: CType(dt.bfloat16, "unsigned short", "float", "bf16", np.dtype(np.uint16)),
    dt.int32: CType(dt.int32, "int", "int", "i32", np.dtype(np.int32)),
    dt.int64: CType(dt.int64, "long long", "long long", "i64", np.dtype(np.int64)),
    dt.bool_: CType(dt.bool_, "bool", "int", "b8", np.dtype(np.bool_)),
}

FLOAT_CTYPES = tuple(_TABLE[d] for d in (dt.float32, dt.float64, dt.float16, dt.bfloat16))


def ctype(dtype: dt.DType) -> CType:
    """The CType of ``dtype``; TypeError naming it when the backend cannot store it."""
    try:
        return _TABLE[dtype]
    except KeyError:
        raise TypeError(f"the cuda backend cannot store {dtype!r}; it stores "
                        f"{', '.join(d.name for d in _TABLE)}") from None


# The opencl backend's conversions (codegen.py there), in CUDA spelling.  float -> bfloat16 rounds to nearest
# even on the bit pattern: add 0x7fff plus the lowest kept bit, then truncate; NaN stays NaN instead of
# rounding into inf.  float -> float16 handles subnormals by letting the float adder round (x + 0.5 puts the
# half subnormal's bits at the bottom of the mantissa).
PRELUDE = r"""
#define AMP_DEVICE __device__ __forceinline__
AMP_DEVICE float half_to_float(unsigned short h) {
    unsigned int e = h & 0x7fffu;
    float f = e < 0x400u ? (float)e * 5.9604644775390625e-8f : __uint_as_float((e << 13) + 0x38000000u);
    if (e >= 0x7c00u) f = __uint_as_float((e << 13) | 0x7f800000u);
    return __uint_as_float(__float_as_uint(f) | ((unsigned int)(h & 0x8000u) << 16));
}
AMP_DEVICE unsigned short float_to_half(float f) {
    unsigned int x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
    if (a >= 0x38800000u) {
        unsigned int r = a - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return (unsigned short)(sign | (r >> 13));
    }
    return (unsigned short)(sign | (__float_as_uint(__fadd_rn(__uint_as_float(a), 0.5f)) - 0x3f000000u));
}
AMP_DEVICE float bf16_to_float(unsigned short u) { return __uint_as_float(((unsigned int)u) << 16); }
AMP_DEVICE unsigned short float_to_bf16(float f) {
    unsigned int b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x40u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (unsigned short)(b >> 16);
}
/* double -> float rounded to odd, so a later rounding to 16 bits is the only one (a double result). */
AMP_DEVICE float double_to_float_odd(double d) {
    float f = __double2float_rz(d);
    if (d == d && (double)f != d) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f;
}
"""
