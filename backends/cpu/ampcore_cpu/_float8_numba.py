"""The compiled loop of :mod:`.float8` (importing this module imports numba; ImportError without it).

Integer-only: float32 bits -> float8 codes rounded to nearest even (subnormals by a shifted integer
rounding), the same rule as ``ampcore.cgen.float8_conversions`` and ml_dtypes' bits.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

u8, u32 = np.uint8, np.uint32


@numba.njit(nogil=True, cache=True)
def round_codes(  # pragma: no cover - compiled
    y: Any, out: Any, mbits: int, bias: int, top: int, over: int, nan: int, top_bits: int, sat: bool
) -> None:
    """float32 bits ``y`` -> float8 codes ``out`` (both flat, one length); ``sat`` clamps to +-top first."""
    shift = u32(23 - mbits)
    rebias = u32((127 - bias) << 23)
    min_normal = u32((128 - bias) << 23)
    half = u32((1 << (23 - mbits - 1)) - 1)
    for i in range(y.size):
        x = y[i]
        sign = (x >> u32(24)) & u32(0x80)
        a = x & u32(0x7FFFFFFF)
        if a > u32(0x7F800000):
            code = u32(nan)
        elif sat and a >= u32(top_bits):
            code = u32(top)
        elif a >= min_normal:
            r = a - rebias
            r = (r + half + ((r >> shift) & u32(1))) >> shift
            code = r if r <= u32(top) else u32(over)
        else:
            e = a >> u32(23)
            mant = (a & u32(0x7FFFFF)) | (u32(0x800000) if e > 0 else u32(0))
            s = u32(151 - bias - mbits) - (e if e > 0 else u32(1))  # the code is mant / 2**s, rounded
            if s > u32(25):
                code = u32(0)
            else:
                code = (mant + (u32(1) << (s - u32(1))) - u32(1) + ((mant >> s) & u32(1))) >> s
        out[i] = u8(sign | code)


@numba.njit(nogil=True, cache=True)
def gather_f32(codes: Any, table: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``out[i] = table[codes[i]]``: float8 codes (flat uint8) through a 256-entry float32 table."""
    for i in range(codes.size):
        out[i] = table[codes[i]]
