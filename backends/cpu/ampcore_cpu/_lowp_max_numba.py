"""The compiled float16 max reduction of :mod:`.lowp_max` (importing this imports numba).

NumPy reduces float16 with its scalar half loop, ``acc = acc if (acc >= x or isnan(acc)) else x`` over the
reduced axis in order (the first NaN wins, and of equal values such as -0.0 and +0.0 the first): on the cnn's
max-pool taps, (32, 4, 32, 16, 16), it took ~9 times float32's SIMD reduction.  This loop runs the same
fold, comparing the exact float32 widenings (:mod:`._lowp_numba`), so it picks the same element: the result
is one of the inputs' bit patterns, nothing is rounded.
"""

from __future__ import annotations

from typing import Any

import numba

from ._lowp_numba import widen_f16


@numba.njit(nogil=True, cache=True, error_model="numpy")
def max_along(x: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``out[o, j]`` = NumPy's float16 maximum of ``x[o, :, j]`` folded in order; float16 bits, ``x`` (outer,
    taps, inner) with taps >= 1, ``out`` (outer, inner)."""
    for o in range(x.shape[0]):
        for j in range(x.shape[2]):
            out[o, j] = x[o, 0, j]
        for t in range(1, x.shape[1]):
            for j in range(x.shape[2]):
                acc, v = out[o, j], x[o, t, j]
                wa = widen_f16(acc)
                out[o, j] = acc if (wa >= widen_f16(v) or wa != wa) else v
