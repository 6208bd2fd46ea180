"""Scale math for the float8 recipes, on float32 NumPy values: the reference of the device rules.

Training computes these on the device (:mod:`ampcore.float8.device_scaling`, the same bits); these NumPy
forms are what the tests and the conformance suite's float64 emulation hold it to.

A *scale* here is what the cast multiplies by (``q = float8(x * scale)``);
``scaled_mm`` takes its reciprocal, the dequantisation scale.  All
arithmetic is float32, as torchao's and Transformer Engine's is.

- current scaling (torchao ``amax_to_scale``)::

      scale = fp8_max / max(amax, 1e-12)           # 1.0 where amax is inf or NaN
      scale = 2 ** floor(log2(scale))              # with round_scales_to_power_of_2

- delayed scaling (TE ``DelayedScaling``)::

      amax  = max(history) or history[-1]
      scale = (fp8_max / amax) / 2 ** margin      # previous scale kept where amax is 0, inf or NaN

- MX block scaling (OCP MX v1.0, e8m0)::

      scale = 2 ** -(floor(log2(amax_block)) - emax)   # 1.0 where the block is all zero or not finite
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import numpy as np

__all__ = [
    "FP8_MAX",
    "EMAX",
    "AMAX_EPS",
    "current_scale",
    "delayed_scale",
    "mx_scale",
]

# The largest finite value of each float8 format (OCP FP8: e4m3fn has no inf, its 0x7E is 448).
FP8_MAX: dict[str, float] = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
# The exponent of the largest power of two each format holds (OCP MX's emax_elem).
EMAX: dict[str, int] = {"float8_e4m3fn": 8, "float8_e5m2": 15}
# torchao's floor on amax before dividing (float8_utils.EPS).
AMAX_EPS = np.float32(1e-12)


def _fp8_max(dtype_name: str) -> np.float32:
    try:
        return np.float32(FP8_MAX[dtype_name])
    except KeyError:
        raise ValueError(f"{dtype_name!r} is not a float8 format; use one of {sorted(FP8_MAX)}") from None


def _round_down_pow2(scale: np.ndarray) -> np.ndarray:
    """2 ** floor(log2(scale)), exactly (frexp reads the exponent; no log rounding); inf and NaN as they are."""
    _, exponent = np.frexp(scale)
    return np.where(np.isfinite(scale), np.ldexp(np.float32(1.0), exponent - 1), scale).astype(np.float32)


def current_scale(amax: np.ndarray | float, dtype_name: str, round_to_pow2: bool = False) -> np.ndarray:
    """The scale that maps ``amax`` onto the format's max (float32; same shape as ``amax``)."""
    a = np.asarray(amax, dtype=np.float32)
    finite = np.isfinite(a)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        scale = _fp8_max(dtype_name) / np.maximum(np.where(finite, a, np.float32(1.0)), AMAX_EPS)
    scale = np.where(finite, scale, np.float32(1.0)).astype(np.float32)
    return _round_down_pow2(scale) if round_to_pow2 else scale


def delayed_scale(
    history: Iterable[float],
    dtype_name: str,
    previous: float,
    *,
    algo: Literal["max", "most_recent"] = "max",
    margin: int = 0,
    round_to_pow2: bool = False,
) -> np.float32:
    """Transformer Engine's delayed scale from an amax history; ``previous`` where the amax is 0, inf or NaN."""
    values = np.asarray(list(history), dtype=np.float32)
    if values.size == 0:
        return np.float32(previous)
    amax = np.float32(values.max() if algo == "max" else values[-1])
    if algo == "max" and np.isnan(values).any():
        amax = np.float32(np.nan)
    if not (np.isfinite(amax) and amax > 0):
        return np.float32(previous)
    with np.errstate(over="ignore"):  # a tiny amax: the scale is inf, as on the device
        scale = np.float32(np.float32(_fp8_max(dtype_name) / amax) / np.float32(2.0**margin))
    return np.float32(_round_down_pow2(np.asarray(scale))) if round_to_pow2 else scale


def mx_scale(amax: np.ndarray, dtype_name: str) -> np.ndarray:
    """Per-block multipliers ``2 ** -(floor(log2(amax)) - emax)``, exponent clamped to e8m0's [-127, 127]."""
    _fp8_max(dtype_name)
    a = np.asarray(amax, dtype=np.float32)
    ok = np.isfinite(a) & (a > 0)
    _, exponent = np.frexp(np.where(ok, a, np.float32(1.0)))
    shared = np.clip((exponent - 1) - EMAX[dtype_name], -127, 127)
    return np.where(ok, np.ldexp(np.float32(1.0), -shared), np.float32(1.0)).astype(np.float32)
