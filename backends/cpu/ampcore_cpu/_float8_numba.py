"""The compiled loops of :mod:`.float8` (importing this module imports numba; ImportError without it).

float32 bits -> float8 codes rounded to nearest even, the same rule as ``ampcore.cgen.float8_conversions``
and ml_dtypes' bits.  The bit arithmetic is 32-bit (:mod:`._u32_numba`) and each entry point branches once
on the format (``e4m3``), so every loop body sees the format's constants (immediate shifts) and vectorizes in
32-bit lanes: a (64, 128) float32 current-scaling cast 5.2 -> 2.5 µs (2-core AMD EPYC Zen 5).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from ._lowp_numba import widen
from ._u32_numba import add32, and32, bits_from_f32, f32_from_bits, max32, or32, shl32, shr32, sub32

u8, u32, f32 = np.uint8, np.uint32, np.float32
# A format's constants: mantissa bits, exponent bias, largest finite code, overflow code (non-saturating),
# NaN code, and the largest finite value's float32 bits.
E4M3 = (3, 7, 0x7E, 0x7F, 0x7F, 0x43E00000)
E5M2 = (2, 15, 0x7B, 0x7C, 0x7E, 0x47600000)


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _code_and_value(x: Any, fmt: Any, sat: bool) -> Any:  # pragma: no cover - compiled
    """One float32's bits ``x`` -> its float8 code (``sat`` clamps to +-top first) and that code's value as
    float32 (NaN as ml_dtypes widens it: the quiet NaN of the code's sign), without branches, so that the loops
    calling it vectorize: every candidate is computed and the right one selected.

    A normal result rounds the float32 bits (rebiased) to ``mbits`` mantissa bits, to nearest even; a subnormal
    one is the float32 sum of ``|x|`` and ``magic``, a power of two whose ulp is the target's subnormal step, so
    the hardware's own rounding to nearest even picks the step count (the float32 -> float16 technique of
    Giesen's ``float_to_half_fast3``).  The value undoes each: the rebias, or the exact ``sum - magic``.
    ``fmt`` is :data:`E4M3` or :data:`E5M2`, a constant where the loops inline this."""
    mbits, bias, top, over, nan, top_bits = fmt
    shift = 23 - mbits
    sign = and32(shr32(x, 24), 0x80)
    a = and32(x, 0x7FFFFFFF)
    rebias = (127 - bias) << 23
    r = sub32(a, rebias)
    normal = shr32(add32(add32(r, (1 << (22 - mbits)) - 1), and32(shr32(r, shift), 1)), shift)
    magic = f32_from_bits(u32((151 - bias - mbits) << 23))  # 2**(24 - bias - mbits): ulp the subnormal step
    rounded = f32_from_bits(a) + magic
    is_normal = a >= u32((128 - bias) << 23)
    code = normal if is_normal else sub32(bits_from_f32(rounded), bits_from_f32(magic))
    value = add32(shl32(normal, shift), rebias) if is_normal else bits_from_f32(rounded - magic)
    code, value = (u32(over), u32(0x7FC00000)) if code > u32(top) else (code, value)  # non-saturating only
    code, value = (u32(top), u32(top_bits)) if sat and a >= u32(top_bits) else (code, value)
    code, value = (u32(nan), u32(0x7FC00000)) if a > u32(0x7F800000) else (code, value)
    return u8(or32(sign, code)), f32_from_bits(or32(value, shl32(sign, 24)))


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _round_all(y: Any, out: Any, fmt: Any, sat: bool) -> None:  # pragma: no cover - compiled
    for i in range(y.size):
        out[i] = _code_and_value(y[i], fmt, sat)[0]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def round_codes(y: Any, out: Any, e4m3: bool, sat: bool) -> None:  # pragma: no cover - compiled
    """float32 bits ``y`` -> float8 codes ``out`` (both flat, one length) of e4m3 (else e5m2); ``sat`` clamps
    to +-max first."""
    if e4m3:
        _round_all(y, out, E4M3, sat)
    else:
        _round_all(y, out, E5M2, sat)


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _pow2_floor(s: Any) -> Any:  # pragma: no cover - compiled
    """NumPy's ``ldexp(float32(0.5), frexp(s)[1])`` for a positive float32 ``s`` that is normal or inf (the
    current-scaling rule's scales are, with a float32 maximum over a float32 amax): 2 ** floor(log2 s), and
    0.5 for inf (frexp(inf) has exponent 0)."""
    b = bits_from_f32(s)
    return f32(0.5) if b >= u32(0x7F800000) else f32_from_bits(and32(b, 0x7F800000))


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _scales(x: Any, r0: int, r1: int, fmax: Any, eps: Any, pow2: bool) -> Any:
    """Rows ``r0:r1``'s (amax, scale, 1 / scale): amax the largest ``|x|`` by its float32 bits (a NaN's bits
    exceed inf's, and NumPy's max propagates NaN too); scale ``fmax / max(amax, eps)`` in float32 where amax is
    finite, else 1 (rounded down to a power of two with ``pow2``)."""
    m = u32(0)
    for r in range(r0, r1):
        for j in range(x.shape[1]):
            m = max32(m, and32(bits_from_f32(widen(x[r, j])), 0x7FFFFFFF))
    amax = f32_from_bits(m)
    s = fmax / (eps if eps > amax else amax) if m < u32(0x7F800000) else f32(1.0)
    s = _pow2_floor(s) if pow2 else s
    return amax, s, f32(1.0) / s


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _quantize_rows(  # pragma: no cover - compiled
    x: Any, out: Any, r0: int, r1: int, s: Any, inv: Any, fmt: Any, dequantized: Any
) -> None:
    for r in range(r0, r1):
        for j in range(x.shape[1]):
            code, value = _code_and_value(bits_from_f32(widen(x[r, j]) * s), fmt, True)
            out[r, j] = code
            if dequantized is not None:
                dequantized[r, j] = value * inv


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _quantize(  # pragma: no cover - compiled
    x: Any, out: Any, scales: Any, fmax: Any, eps: Any, pow2: bool, rowwise: bool, fmt: Any, dequantized: Any
) -> None:
    if rowwise:
        for r in range(x.shape[0]):
            amax, s, inv = _scales(x, r, r + 1, fmax, eps, pow2)
            scales[0, r], scales[1, r], scales[2, r] = s, inv, amax
            _quantize_rows(x, out, r, r + 1, s, inv, fmt, dequantized)
    else:
        amax, s, inv = _scales(x, 0, x.shape[0], fmax, eps, pow2)
        scales[0, 0], scales[1, 0], scales[2, 0] = s, inv, amax
        _quantize_rows(x, out, 0, x.shape[0], s, inv, fmt, dequantized)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def quantize_current(  # pragma: no cover - compiled
    x: Any, out: Any, scales: Any, fmax: Any, eps: Any, pow2: bool, e4m3: bool, rowwise: bool, dequantized: Any
) -> None:
    """float8's cast with current scaling to e4m3 (else e5m2) of the C-contiguous ``x`` (rows, cols; float32,
    or bfloat16 as uint16 bits), per row with ``rowwise``, else per tensor: ``scales[:, r]`` gets row ``r``'s
    (or the tensor's, in column 0) scale, 1 / scale and amax (:func:`_scales`), and ``out`` the saturated codes
    of ``float32(x) * scale``.  Unless ``dequantized`` is None (numba compiles that case without the branch), it
    also gets ``value(code) * (1 / scale)`` in float32: what ``scaled_mm``'s widened path computes from the
    codes and the dequantization scale, made in the same pass."""
    if e4m3:
        _quantize(x, out, scales, fmax, eps, pow2, rowwise, E4M3, dequantized)
    else:
        _quantize(x, out, scales, fmax, eps, pow2, rowwise, E5M2, dequantized)
