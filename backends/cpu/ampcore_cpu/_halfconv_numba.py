"""The compiled loops of :mod:`.halfconv` (importing this module imports numba; ImportError without it).

Integer-only, branch-free bodies (selects, not jumps) in 32-bit operations (:mod:`._u32_numba`), so LLVM
vectorises them in 32-bit lanes.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from ._f16c_numba import F16C, narrow_f16c
from ._u32_numba import add32, and32, max32, min32, or32, shl32, shr32, sub32

u16, u32 = np.uint16, np.uint32


@numba.njit(nogil=True, cache=True, inline="always")
def f16_bits_int(x: Any) -> Any:  # pragma: no cover - compiled
    """float32 bits ``x`` -> float16 bits, rounded to nearest even, in integer operations (any target)."""
    a = and32(x, 0x7FFFFFFF)
    # Normal half: rebias the exponent, add half an ulp minus one plus the kept lowest bit (ties go
    # to even), drop 13 bits.  A carry out of the mantissa bumps the exponent, as it should.
    normal = shr32(add32(add32(sub32(a, 0x38000000), 0xFFF), and32(shr32(a, 13), 1)), 13)
    # Subnormal half: the significand with its implicit bit, shifted right by 14..25 with the same
    # rounding (a shift of 25 leaves 0 for anything below half the smallest subnormal).
    shift = sub32(126, min32(max32(shr32(a, 23), 101), 112))
    m = or32(and32(a, 0x7FFFFF), 0x800000)
    sub = shr32(add32(sub32(add32(m, shl32(1, sub32(shift, 1))), 1), and32(shr32(m, shift), 1)), shift)
    nan = or32(0x7C00, shr32(and32(a, 0x7FFFFF), 13))
    nan = or32(nan, u32(nan == u32(0x7C00)))  # a payload only in the dropped bits stays a NaN, as NumPy's
    r = sub if a < u32(0x38800000) else normal
    r = u32(0x7C00) if a >= u32(0x477FF000) else r  # 65520 and up round to inf
    r = nan if a > u32(0x7F800000) else r
    return u16(or32(and32(shr32(x, 16), 0x8000), r))


# The element the loops inline (:mod:`._lowp_numba` too): the same bits, on F16C's vcvtps2ph where the target
# has it (3.6x faster; :mod:`._f16c_numba`).
f16_bits = narrow_f16c if F16C else f16_bits_int


@numba.njit(nogil=True, cache=True)
def down(w: Any, out: Any) -> None:  # pragma: no cover - compiled
    """float32 bits ``w`` -> float16 bits ``out``, rounded to nearest even (both flat, one length)."""
    for i in range(w.size):
        out[i] = f16_bits(w[i])
