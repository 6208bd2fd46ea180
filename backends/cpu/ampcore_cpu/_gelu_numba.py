"""GELU (exact erf form) and its backward as compiled loops (importing this imports numba; ImportError without it).

One pass per element instead of NumPy's ~15 whole-array passes of a polynomial
erf.  The forward repeats the NumPy kernel's arithmetic (``x / sqrt 2`` and
``x / 2`` in float32, erfc and the product in float64), so its float32 and
float16/bfloat16 results are the same bits; erfc itself is libm's (within two
ulps of float64), as ``erfc(-x / sqrt 2)``, not ``1 + erf(x / sqrt 2)``,
which cancels for x << 0.  The backward is more accurate than the NumPy kernel's and not
its bits: the normal density in float64 (NumPy's: float32 ``exp``) and the
cdf as ``erfc(-x / sqrt 2) / 2``, which keeps its digits in the left tail where
``1 + erf`` cancels.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

_F32 = np.float32
_INV_SQRT2 = _F32(1.0 / math.sqrt(2.0))
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@numba.njit(nogil=True, cache=True)
def gelu(x: Any, out: Any) -> None:  # pragma: no cover - compiled
    """float32 ``x`` -> float64 ``out`` (both flat, one length): 0.5 x erfc(-x / sqrt 2)."""
    for i in range(x.size):
        v = x[i]
        out[i] = np.float64(_F32(0.5) * v) * math.erfc(-np.float64(v * _INV_SQRT2))


@numba.njit(nogil=True, cache=True)
def gelu_backward(x: Any, gy: Any, out: Any) -> None:  # pragma: no cover - compiled
    """float32 ``x``, ``gy`` -> float64 ``out``: gy (Phi(x) + x phi(x))."""
    for i in range(x.size):
        v = x[i]
        w = np.float64(v)
        cdf = 0.5 * math.erfc(-np.float64(v * _INV_SQRT2))  # no cancellation in 1 + erf for x << 0
        out[i] = np.float64(gy[i]) * (cdf + w * (_INV_SQRT_2PI * math.exp(-0.5 * w * w)))
