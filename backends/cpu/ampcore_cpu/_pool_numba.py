"""The compiled loops of :mod:`.pool`: max-pooling over windows that tile the input (importing this module imports
numba; ImportError without it).

Each window is read once.  The forward keeps NumPy's ``np.max`` rule across the taps (a running
``m = m if (m > t or isnan(m)) else t``: the first NaN wins, and of tied zeros the last one's sign, the first
one's in float16, whose loop keeps ``m`` on ties), so its bits are the reference's; the backward's tap is the
first maximum (the first NaN), as ``argmax`` gives it.
float16/bfloat16 come as their uint16 bits and are compared through an order-preserving integer key (-0 and +0
share one), so nothing is widened or rounded: both loops only move values.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import types
from numba.extending import overload

_OPTS = {"nogil": True, "cache": True, "error_model": "numpy"}
i32 = np.int32


def _key(v: Any, nan_above: int) -> Any:  # pragma: no cover - replaced by its overload when compiled
    """(order key, is NaN) of a value: floats are their own key; 16-bit float bits (uint16) a signed
    magnitude, NaN above ``nan_above`` (0x7C00 for float16, 0x7F80 for bfloat16)."""
    raise NotImplementedError


@overload(_key, jit_options={"error_model": "numpy"})
def _key_impl(v: Any, nan_above: Any) -> Any:
    # The implementations' annotations must match this function's: numba compares the signatures.
    def float_key(v: Any, nan_above: Any) -> Any:  # pragma: no cover - compiled
        return v, v != v

    def bits_key(v: Any, nan_above: Any) -> Any:  # pragma: no cover - compiled
        mag = i32(v & 0x7FFF)
        return (-mag if v & 0x8000 else mag), mag > nan_above

    return float_key if isinstance(v, types.Float) else bits_key


@numba.njit(inline="always", **_OPTS)
def _later(b: Any, v: Any, nan_above: int, ties_first: bool) -> Any:  # pragma: no cover - compiled
    """np.maximum(b, v)'s pick: ``b`` if it is NaN or greater, else ``v``; of tied zeros, ``b`` where
    ``ties_first`` (NumPy's float16 loop), else ``v`` (its float32, float64 and bfloat16 loops)."""
    bk, bnan = _key(b, nan_above)
    vk, _ = _key(v, nan_above)
    return b if bnan | (bk > vk) | (ties_first & (bk == vk)) else v


@numba.njit(**_OPTS)
def forward2x2(x: Any, nan_above: int, ties_first: bool, out: Any) -> None:  # pragma: no cover - compiled
    """(P, H, W) ``x`` -> (P, H // 2, W // 2) ``out``: each 2x2 window's maximum by ``np.max``'s rule over its taps
    in order (row-major), one select per tap."""
    for p in range(out.shape[0]):
        for r in range(out.shape[1]):
            top, bottom = x[p, 2 * r], x[p, 2 * r + 1]
            row = out[p, r]
            for c in range(row.size):
                m = _later(top[2 * c], top[2 * c + 1], nan_above, ties_first)
                m = _later(m, bottom[2 * c], nan_above, ties_first)
                row[c] = _later(m, bottom[2 * c + 1], nan_above, ties_first)


@numba.njit(inline="always", **_OPTS)
def _marked(v: Any, m: Any, nan_above: int) -> Any:  # pragma: no cover - compiled
    """Whether ``v`` is a window's maximum ``m`` (-0 and +0 alike) or a NaN: argmax's candidates."""
    vk, vnan = _key(v, nan_above)
    mk, _ = _key(m, nan_above)
    return vnan | (vk == mk)


@numba.njit(**_OPTS)
def backward2x2(x: Any, g: Any, nan_above: int, out: Any) -> None:  # pragma: no cover - compiled
    """(P, H, W) ``x``, (P, Ho, Wo) ``g`` -> zeroed (P, H, W) ``out``: ``g`` stored at each 2x2 window's first
    maximum (its first NaN).

    The window's maximum is NaN when any tap is (``_later``; the sign of a zero maximum does not matter
    here), so the first marked tap is argmax's; selects, not branches (a random maximum mispredicts).  One
    store per window into memory the caller zeroed (NumPy's memset): writing all four taps with selects
    took 1.8x as long (2-core Xeon).
    """
    for p in range(g.shape[0]):
        for r in range(g.shape[1]):
            top, bottom, grow = x[p, 2 * r], x[p, 2 * r + 1], g[p, r]
            for c in range(grow.size):
                a, b, d, e = top[2 * c], top[2 * c + 1], bottom[2 * c], bottom[2 * c + 1]
                m = _later(_later(a, b, nan_above, False), _later(d, e, nan_above, False), nan_above, False)
                t = 3
                t = 2 if _marked(d, m, nan_above) else t
                t = 1 if _marked(b, m, nan_above) else t
                t = 0 if _marked(a, m, nan_above) else t
                out[p, 2 * r + (t >> 1), 2 * c + (t & 1)] = grow[c]
