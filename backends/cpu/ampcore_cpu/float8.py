"""Float8 kernels of the CPU backend: exact through ml_dtypes and a float32 BLAS GEMM.

``quantize_float8`` is one NumPy pass per step (scale, clamp, ml_dtypes' cast,
the amax); ``scaled_mm`` scales the float8 operands in float32 (a float8 value
times a float32 scale, rounded once), multiplies them with sgemm (float32
accumulation, as torch's CPU ``_scaled_mm``), adds the bias and rounds once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .kernels import F32, _down, _gemm, _quiet, _up

_MAX = {d.numpy: np.float32(dt.finfo(d).max) for d in (dt.float8_e4m3fn, dt.float8_e5m2)}


def quantize_float8(x: np.ndarray, scale: np.ndarray, dtype: Any, saturate: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(cast(x * scale, dtype), max|x|)``; see the kernel contract in ``ampcore.kernels``."""
    target = dtype.numpy
    x32 = _up(x) if x.dtype != F32 else x
    y = np.multiply(x32, scale, dtype=F32)
    if saturate:
        m = _MAX[target]
        np.clip(y, -m, m, out=y)  # NaN stays NaN
    amax = np.abs(x32).max() if x32.size else np.float32(0)
    return y.astype(target), np.asarray(amax, dtype=F32)


def scaled_mm(
    a: np.ndarray,
    b: np.ndarray,
    scale_a: np.ndarray,
    scale_b: np.ndarray,
    out_dtype: Any,
    bias: np.ndarray | None,
    use_fast_accum: bool,
) -> np.ndarray:
    """``(a * scale_a) @ (b * scale_b) + bias`` in float32, rounded once to ``out_dtype``."""
    a32 = np.multiply(a.astype(F32), scale_a, dtype=F32)
    b32 = np.multiply(b.astype(F32), scale_b, dtype=F32)
    out = _gemm(a32, b32)
    if bias is not None:
        out += _up(bias) if bias.dtype != F32 else bias
    return _down(out, out_dtype.numpy)


def float8_table() -> dict[str, Callable[..., Any]]:
    """The float8 kernels, quiet (IEEE inf/NaN without NumPy warnings)."""
    return {"quantize_float8": _quiet(quantize_float8), "scaled_mm": _quiet(scaled_mm)}
