"""Conversions between the floating dtypes (and from them to bool), and the widen-compute-round pattern the
primitives use.

A float16/bfloat16 primitive widens its inputs to float32 (exact), computes in
float32, and rounds the result once to nearest-even with a kernel of this
module: CuPy's own float16 arithmetic rounds after every operation of a
composite function, and CuPy has no bfloat16 at all.  float64 -> 16 bits goes
through round-to-odd float, so it is rounded once too.  float32 <-> float64 and
float -> bool are kernels here as well, not ``astype``: CuPy's cast kernels
flush float32 subnormals to zero on a GPU (they compile with ``-ftz=true``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CuArray, contiguous
from .codegen import PRELUDE, ctype
from .launch import BLOCK, raw_kernel
from .runtime import import_cupy

__all__ = ["sources", "LOW", "convert", "up", "down", "scalar_storage"]

LOW = frozenset({dt.float16, dt.bfloat16})
FLOAT8 = frozenset(dt.FLOAT8_DTYPES)
FLOATS = frozenset({dt.float16, dt.bfloat16, dt.float32, dt.float64, *FLOAT8})
_PAIRS = (
    ("f16", "f32"),
    ("bf16", "f32"),
    ("f32", "f16"),
    ("f32", "bf16"),
    ("f64", "f16"),
    ("f64", "bf16"),
    ("f16", "bf16"),
    ("bf16", "f16"),
    ("f32", "f64"),
    ("f64", "f32"),
    ("f16", "f64"),
    ("bf16", "f64"),
    ("f16", "b8"),
    ("bf16", "b8"),
    ("f32", "b8"),
    ("f64", "b8"),
    # float8 (ampcore.cgen.float8_conversions): to and from every float, through float (exact) or round-to-odd
    *((w, f8) for f8 in ("f8e4m3", "f8e5m2", "f8e8m0") for w in ("f32", "f16", "bf16", "f64")),
    *((f8, w) for f8 in ("f8e4m3", "f8e5m2", "f8e8m0") for w in ("f32", "f16", "bf16", "f64")),
)
_TAGS = {
    "f16": dt.float16,
    "bf16": dt.bfloat16,
    "f32": dt.float32,
    "f64": dt.float64,
    "b8": dt.bool_,
    "f8e4m3": dt.float8_e4m3fn,
    "f8e5m2": dt.float8_e5m2,
    "f8e8m0": dt.float8_e8m0fnu,
}


def _source(src: str, dst: str) -> str:
    s, d = ctype(_TAGS[src]), ctype(_TAGS[dst])
    value = s.load("x", "i")
    if src == "f64" and dst in ("f16", "bf16", "f8e4m3", "f8e5m2", "f8e8m0"):
        value = f"double_to_float_odd({value})"
    return (
        PRELUDE
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
convert_{src}_{dst}(const {s.storage} *__restrict__ x, {d.storage} *__restrict__ out, long long size) {{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < size;
         i += (long long)gridDim.x * blockDim.x) {{
        {d.store("out", "i", value)}
    }}
}}
"""
    )


def sources() -> dict[str, str]:
    """Every kernel source of this family, by kernel name."""
    return {f"convert_{s}_{d}": _source(s, d) for s, d in _PAIRS}


def _run(data: Any, src: dt.DType, dst: dt.DType) -> Any:
    cupy = import_cupy()
    s, d = ctype(src).tag, ctype(dst).tag
    x = contiguous(data)
    out = cupy.empty(x.shape, dtype=ctype(dst).cupy_dtype)
    if x.size:
        kernel = raw_kernel(("convert", s, d), lambda: _source(s, d), f"convert_{s}_{d}")
        kernel((min(-(-x.size // BLOCK), 65535 * 8),), (BLOCK,), (x, out, np.int64(x.size)))
    return out


def convert(data: Any, src: dt.DType, dst: dt.DType) -> Any:
    """A new CuPy array (``dst``'s storage dtype) holding ``data`` (``src`` storage) converted, rounded once."""
    if src == dst:
        return data.copy()
    if src in FLOATS and (dst in FLOATS or dst == dt.bool_):
        return _run(data, src, dst)
    if src in LOW or src in FLOAT8:  # to an integer: float32 holds the value exactly, and truncating it flushes nothing
        return convert(_run(data, src, dt.float32), dt.float32, dst)
    if (
        dst in LOW or dst in FLOAT8
    ):  # int/bool -> 16 (or 8) bits: float64 holds int32 exactly (and int64 up to 2^53), then one rounding
        return _run(data.astype(np.float64), dt.float64, dst)
    if dst == dt.bool_:
        return data != 0
    return data.astype(ctype(dst).cupy_dtype, copy=True)


def up(x: CuArray) -> Any:
    """``x``'s values as a CuPy array to compute with: float16/bfloat16 widened to float32, others as stored."""
    return _run(x.data, x.dtype, dt.float32) if x.dtype in LOW else x.data


def down(data: Any, dtype: dt.DType) -> CuArray:
    """A CuPy result as a CuArray of ``dtype``: rounded once to a 16-bit dtype, cast for the others."""
    if dtype in LOW:
        src = dt.float64 if data.dtype == np.float64 else dt.float32
        return CuArray(_run(data.astype(np.float32, copy=False) if src == dt.float32 else data, src, dtype), dtype)
    want = ctype(dtype).cupy_dtype
    if data.dtype == want:
        return CuArray(data, dtype)
    if dtype in FLOATS and data.dtype in (np.float32, np.float64):  # float32 <-> float64: no flushing astype
        return CuArray(_run(data, dt.float64 if data.dtype == np.float64 else dt.float32, dtype), dtype)
    return CuArray(data.astype(want), dtype)


def scalar_storage(value: Any, dtype: dt.DType) -> np.generic:
    """``value`` as a NumPy scalar of ``dtype``'s storage (bfloat16 as its uint16 bits), rounded once on the host.

    A scalar, not a 0-d array: CuPy's ufuncs refuse NumPy arrays but take NumPy scalars.
    """
    return np.asarray(dt.convert(np.asarray(value), dtype)).view(ctype(dtype).cupy_dtype)[()]
