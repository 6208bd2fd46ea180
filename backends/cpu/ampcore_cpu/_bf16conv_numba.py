"""The compiled loop of :mod:`.bf16conv` (importing this module imports numba; ImportError without it).

Integer-only, branch-free body (a select, not a jump) in 32-bit operations (:mod:`._u32_numba`), so LLVM
vectorises it in 32-bit lanes.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from ._u32_numba import add32, and32, or32, shr32

u16, u32 = np.uint16, np.uint32


@numba.njit(nogil=True, cache=True, inline="always")
def bf16_bits(x: Any) -> Any:  # pragma: no cover - compiled
    """float32 bits ``x`` -> bfloat16 bits, rounded to nearest even (also inlined by :mod:`._lowp_numba`).

    A NaN becomes the quiet NaN 0x7FC0 with its sign (ml_dtypes' bits: the payload is not kept).
    """
    high = shr32(x, 16)
    rounded = shr32(add32(add32(x, 0x7FFF), and32(high, 1)), 16)
    return u16(or32(and32(high, 0x8000), 0x7FC0) if and32(x, 0x7FFFFFFF) > u32(0x7F800000) else rounded)


@numba.njit(nogil=True, cache=True)
def down(w: Any, out: Any) -> None:  # pragma: no cover - compiled
    """float32 bits ``w`` -> bfloat16 bits ``out``, rounded to nearest even (both flat, one length)."""
    for i in range(w.size):
        out[i] = bf16_bits(w[i])
