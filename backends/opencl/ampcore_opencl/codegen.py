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

What this backend shares with the cuda backend (the integer conversions, the
element load/store code, the type names) is :mod:`ampcore.cgen`'s, rendered
for OpenCL C; the ``half`` path is OpenCL's own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt

__all__ = ["CType", "ctype", "prelude", "INDEX_HELPERS", "HALF_CONVERSIONS", "HALF_TYPE_DEFINE", "half_conversions"]


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
        """A C expression: element ``index`` of ``ptr`` in the compute type (:func:`ampcore.cgen.load`)."""
        return cgen.load(self.tag, ptr, index)

    def store(self, ptr: str, index: str, value: str, value_type: str = "") -> str:
        """A statement writing ``value`` rounded once to this dtype; say ``value_type="double"`` when the value
        is a double, so bfloat16 is rounded once from it rather than through float."""
        return cgen.store(self.tag, self.storage, ptr, index, value, value_type)

    def compute_native(self, native_half: bool) -> str:
        """The arithmetic type when the device may do half natively (float16 on a device whose probe passed)."""
        return "half" if self.tag == "f16" and native_half else self.compute


# NumPy dtypes of the raw buffer elements where they are not the dtype's own: 16-bit words, bytes for bool
_RAW = {dt.float16: np.uint16, dt.bfloat16: np.uint16, dt.bool_: np.uint8, **dict.fromkeys(dt.FLOAT8_DTYPES, np.uint8)}


def _make(dtype: dt.DType) -> CType:
    tag = cgen.TAGS[dtype.name]
    storage, compute = cgen.element_type(cgen.OPENCL, tag), cgen.compute_type(cgen.OPENCL, tag)
    return CType(dtype, storage, compute, tag, np.dtype(_RAW.get(dtype, dtype.numpy)))


_TABLE = {
    d: _make(d)
    for d in (dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int32, dt.int64, dt.bool_, *dt.FLOAT8_DTYPES)
}


def ctype(dtype: dt.DType) -> CType:
    """The CType of ``dtype``; TypeError naming it when OpenCL buffers cannot hold it."""
    try:
        return _TABLE[dtype]
    except KeyError:
        raise TypeError(
            f"the opencl backend cannot store {dtype!r}; it stores {', '.join(d.name for d in _TABLE)}"
        ) from None


# float16 <-> float32, two implementations with one interface (``half_to_float(ushort)``,
# ``float_to_half(float)``) and the same bits: exact loads, round-to-nearest-even stores (subnormals,
# overflow to inf, -0.0, NaN kept NaN with its sign).  float -> float16 from a double goes through
# ``double_to_float_odd`` (ampcore.cgen), so it is rounded once either way.  bfloat16 and double conversions
# are ampcore.cgen's, rendered for OpenCL C.
HALF_CONVERSIONS = {
    # Integer arithmetic, without relying on float denormals: fast wherever integer code vectorises.
    "integer": cgen.half_conversions(cgen.OPENCL),
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
    return f"#ifdef {HALF_TYPE_DEFINE}\n{HALF_CONVERSIONS['half']}#else\n{HALF_CONVERSIONS['integer']}#endif\n"


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
    parts.append(cgen.bfloat16_conversions(cgen.OPENCL))
    parts.append(cgen.float8_conversions(cgen.OPENCL))  # float8 as bytes: OpenCL C has no float8 type
    if fp64:
        parts.append(cgen.double_conversions(cgen.OPENCL))
    parts.append(INDEX_HELPERS)
    return "".join(parts)
