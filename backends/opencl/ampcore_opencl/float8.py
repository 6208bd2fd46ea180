"""Float8's ``quantize_float8`` kernel: scale, clamp, round and store, and the amax, in one pass.

OpenCL C has no float8 type: float8 arrays are bytes, converted with integer
arithmetic (:func:`ampcore.cgen.float8_conversions`, in every program's
prelude; bit-exact against ml_dtypes).  Each work-item rounds a run of
elements and folds their ``|x|`` into the amax with one ``atomic_max`` on its
bits (non-negative floats order as their bit patterns, and NaN's bits are
above inf's: a NaN anywhere gives NaN).  ``scaled_mm`` is the core's
composition (float8 operands cast to float32 and scaled, then this backend's
float32 GEMM).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CLArray, empty
from .codegen import ctype, prelude

__all__ = ["kernels"]

RUN = 64  # elements per work-item
_FORMAT = {dt.float8_e4m3fn: "e4m3", dt.float8_e5m2: "e5m2"}
_I64, _I32 = np.dtype(np.int64), np.dtype(np.int32)

_SOURCE = """
__kernel void quantize(__global const {t} *x, __global const float *scale, __global uchar *q,
                       __global volatile uint *amax_bits, long size, long inner, int mode, int saturate) {{
    long start = (long)get_global_id(0) * {run}, end = min(start + {run}, size);
    uint local_max = 0u;
    for (long i = start; i < end; ++i) {{
        float v = {load};
        float s = scale[mode == 0 ? 0 : mode == 1 ? i / inner : mode == 2 ? i % inner : i];
        q[i] = float_to_{fmt}(v * s, saturate);
        uint m = as_uint(v) & 0x7fffffffu;
        local_max = m > local_max ? m : local_max;
    }}
    atomic_max(amax_bits, local_max);
}}
"""


def _scales(scale: CLArray, shape: tuple[int, ...]) -> tuple[Any, int, int]:
    """(scale buffer, mode, inner): one scale, per row (leading axes), per column (last axis), or any other
    broadcast materialized per element (read back and uploaded: a rare path)."""
    inner = shape[-1] if shape else 1
    padded = (1,) * (len(shape) - len(scale.shape)) + tuple(scale.shape)
    if scale.size == 1:
        return scale.buffer, 0, inner
    if padded[:-1] == tuple(shape[:-1]) and padded[-1] == 1:
        return scale.buffer, 1, inner
    if all(n == 1 for n in padded[:-1]) and padded[-1] == inner:
        return scale.buffer, 2, inner
    host = np.empty(scale.shape, np.float32)
    full = empty(scale.state, shape, dt.float32)
    scale.state.download(host, scale.buffer)
    full._keepalive = scale.state.upload(
        full.buffer, np.ascontiguousarray(np.broadcast_to(host.reshape(padded), shape))
    )
    return full.buffer, 3, inner


def quantize_float8(x: CLArray, scale: CLArray, dtype: Any, saturate: bool) -> tuple[CLArray, CLArray]:
    """``(cast(x * scale, dtype), max|x|)``; see the kernel contract in ``ampcore.kernels``."""
    state, c, fmt = x.state, ctype(x.dtype), _FORMAT[dtype]
    q = empty(state, x.shape, dtype)
    amax = empty(state, (), dt.float32)
    state.fill(amax.buffer, np.zeros(1, np.uint32), 4)
    if x.size == 0:
        return q, amax
    buffer, mode, inner = _scales(scale, x.shape)

    def source() -> str:
        return prelude(state.fp64) + _SOURCE.format(t=c.storage, load=c.load("x", "i"), fmt=fmt, run=RUN)

    kernel = state.kernel(("quantize_float8", c.tag, fmt), source, "quantize", [None] * 4 + [_I64, _I64, _I32, _I32])
    groups = -(-x.size // RUN)
    state.launch(kernel, (groups,), None, x.buffer, buffer, q.buffer, amax.buffer, x.size, inner, mode, int(saturate))
    return q, amax


def kernels() -> dict[str, Callable[..., Any]]:
    return {"quantize_float8": quantize_float8}
