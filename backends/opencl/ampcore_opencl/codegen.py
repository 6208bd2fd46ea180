"""How each ampcore dtype lives in an OpenCL buffer and how kernel sources load and store it.

Kernel sources are templates filled per dtype: ``ctype(dtype).load("x", "i")``
is a C expression giving element ``i`` of buffer ``x`` in the dtype's compute
type, ``ctype(dtype).store("y", "i", "v")`` a statement writing ``v`` back,
rounded to nearest-even.

- float16: 16-bit words converted to and from float32 on load and store by
  one of two exact (round-to-nearest-even) implementations, chosen per device
  by a measured probe (:data:`HALF_CONVERSIONS`,
  :func:`.probe.choose_half_convert`): ``integer`` arithmetic, which any
  device runs (and PoCL vectorises well), or the ``half`` type's conversions
  where the device has ``cl_khr_fp16`` (F16C instructions on Intel's CPU
  runtime: 2-4x faster there).  The prelude holds both; the device's build
  options select one (:data:`HALF_TYPE_DEFINE`).  Arithmetic in float32, or in
  ``half`` on devices whose probe passed (``compute_native``).
- bfloat16: 16-bit words; a load is a shift, a store rounds to nearest-even
  in integer arithmetic, keeping inf and NaN.
- float64 where the device has ``cl_khr_fp64``; bool as one byte.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ampcore import dtypes as dt

__all__ = ["CType", "ctype", "prelude", "INDEX_HELPERS", "HALF_CONVERSIONS", "HALF_TYPE_DEFINE",
           "half_conversions"]


@dataclass(frozen=True)
class CType:
    """One dtype's buffer element type, compute type and load/store code."""

    dtype: dt.DType
    storage: str  # C type of the buffer elements
    compute: str  # C type arithmetic runs in (float for float16/bfloat16)
    tag: str  # short name for kernel names and cache keys
    host: np.dtype  # NumPy dtype of the buffer's raw elements (uint16 for float16/bfloat16)

    @property
    def itemsize(self) -> int:
        return self.host.itemsize

    @property
    def is_float(self) -> bool:
        return self.dtype.is_floating_point

    def load(self, ptr: str, index: str) -> str:
        if self.tag == "f16":
            return f"half_to_float({ptr}[{index}])"
        if self.tag == "bf16":
            return f"bf16_to_float({ptr}[{index}])"
        if self.tag == "b8":
            return f"(int)({ptr}[{index}] != 0)"
        return f"{ptr}[{index}]"

    def store(self, ptr: str, index: str, value: str, value_type: str = "") -> str:
        """A statement writing ``value`` rounded once to this dtype; say ``value_type="double"`` when the value
        is a double, so bfloat16 is rounded once from it rather than through float."""
        if self.tag == "bf16" and value_type == "double":
            return f"{ptr}[{index}] = double_to_bf16({value});"
        if self.tag == "f16" and value_type == "double":  # round-to-odd float keeps it one rounding
            return f"{ptr}[{index}] = float_to_half(double_to_float_odd({value}));"
        if self.tag == "f16":
            return f"{ptr}[{index}] = float_to_half({value});"
        if self.tag == "bf16":
            return f"{ptr}[{index}] = float_to_bf16({value});"
        if self.tag == "b8":
            return f"{ptr}[{index}] = (uchar)(({value}) != 0);"
        return f"{ptr}[{index}] = ({self.storage})({value});"

    def compute_native(self, native_half: bool) -> str:
        """The arithmetic type when the device may do half natively (float16 on a device whose probe passed)."""
        return "half" if self.tag == "f16" and native_half else self.compute


_TABLE = {
    dt.float32: CType(dt.float32, "float", "float", "f32", np.dtype(np.float32)),
    dt.float64: CType(dt.float64, "double", "double", "f64", np.dtype(np.float64)),
    dt.float16: CType(dt.float16, "ushort", "float", "f16", np.dtype(np.uint16)),
    dt.bfloat16: CType(dt.bfloat16, "ushort", "float", "bf16", np.dtype(np.uint16)),
    dt.int32: CType(dt.int32, "int", "int", "i32", np.dtype(np.int32)),
    dt.int64: CType(dt.int64, "long", "long", "i64", np.dtype(np.int64)),
    dt.bool_: CType(dt.bool_, "uchar", "int", "b8", np.dtype(np.uint8)),
}


def ctype(dtype: dt.DType) -> CType:
    """The CType of ``dtype``; TypeError naming it when OpenCL buffers cannot hold it."""
    try:
        return _TABLE[dtype]
    except KeyError:
        stored = ", ".join(d.name for d in _TABLE)
        raise TypeError(f"the opencl backend cannot store {dtype!r}; it stores {stored}") from None


# float16 <-> float32, two implementations with one interface (``half_to_float(ushort)``,
# ``float_to_half(float)``) and the same bits: exact loads, round-to-nearest-even stores (subnormals,
# overflow to inf, -0.0, NaN kept NaN with its sign).  float -> float16 from a double goes through
# ``double_to_float_odd`` (below), so it is rounded once either way.
HALF_CONVERSIONS = {
    # Integer arithmetic, without relying on float denormals: fast wherever integer code vectorises.
    "integer": """
inline float half_to_float(ushort h) {
    uint e = h & 0x7fffu;
    float f = e < 0x400u ? (float)e * 0x1p-24f : as_float((e << 13) + 0x38000000u);
    if (e >= 0x7c00u) f = as_float((e << 13) | 0x7f800000u);
    return as_float(as_uint(f) | ((uint)(h & 0x8000u) << 16));
}
inline ushort float_to_half(float f) {
    uint x = as_uint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (ushort)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (ushort)(sign | 0x7c00u);
    if (a >= 0x38800000u) {
        uint r = a - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return (ushort)(sign | (r >> 13));
    }
    return (ushort)(sign | (as_uint(as_float(a) + 0.5f) - 0x3f000000u));
}
""",
    # The half type's own conversions (cl_khr_fp16): an exact widening, and a narrowing cast, which rounds to
    # nearest-even (OpenCL C's default for conversions to floating point).  One F16C instruction each on
    # Intel's CPU runtime.  (vload_half/vstore_half_rte, which need no extension, were measured there too:
    # 0.4 ms per M values in some kernels and 30 ms in others, where the compiler calls a library routine.)
    "half": """
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
inline float half_to_float(ushort h) { return (float)as_half(h); }
inline ushort float_to_half(float f) { return as_ushort((half)f); }
""",
}
# Defined (``-D``) in a device's build options when its kernels take the ``half`` conversions.
HALF_TYPE_DEFINE = "AMPCORE_HALF_TYPE"


def half_conversions() -> str:
    """Both float16 conversion implementations, the one compiled chosen by :data:`HALF_TYPE_DEFINE`."""
    return (f"#ifdef {HALF_TYPE_DEFINE}\n{HALF_CONVERSIONS['half']}#else\n"
            f"{HALF_CONVERSIONS['integer']}#endif\n")


# bfloat16: float -> bfloat16 is round-to-nearest-even on the bit pattern: add 0x7fff plus the lowest kept
# bit, then truncate; NaN is kept NaN (quiet, sign kept) instead of rounding into inf.  double -> bfloat16
# goes through float with round-to-odd, so it is rounded once, exactly (rounding to float first and then to
# bfloat16 could round twice).
_CONVERSIONS = """
inline float bf16_to_float(ushort u) { return as_float(((uint)u) << 16); }
inline ushort float_to_bf16(float f) {
    uint b = as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (ushort)((b >> 16) | 0x40u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (ushort)(b >> 16);
}
"""

_DOUBLE_CONVERSIONS = """
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
inline float double_to_float_odd(double d) {
    float f = convert_float_rtz(d);
    if (!isnan(d) && (double)f != d) f = as_float(as_uint(f) | 1u);
    return f;
}
inline ushort double_to_bf16(double d) { return float_to_bf16(double_to_float_odd(d)); }
"""

INDEX_HELPERS = """
/* Offset of element i (row-major over shape[0..nd)) in an operand with the given element strides. */
inline long strided_offset(long i, int nd, __global const long *shape, __global const long *strides) {
    long off = 0;
    for (int d = nd - 1; d >= 0; --d) {
        long s = shape[d];
        long c = i % s;
        i /= s;
        off += c * strides[d];
    }
    return off;
}
"""


def prelude(fp64: bool, native_half: bool = False) -> str:
    """Common source for every kernel on a device: pragmas, float16/bfloat16 conversions and index helpers."""
    parts = []
    if native_half:
        parts.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n")
    parts.append(half_conversions())
    parts.append(_CONVERSIONS)
    if fp64:
        parts.append(_DOUBLE_CONVERSIONS)
    parts.append(INDEX_HELPERS)
    return "".join(parts)
