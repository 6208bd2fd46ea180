"""The compiled loop of :mod:`.float8` (importing this module imports numba; ImportError without it).

Integer-only: float32 bits -> float8 codes rounded to nearest even (subnormals by a shifted integer
rounding), the same rule as ``ampcore.cgen.float8_conversions`` and ml_dtypes' bits.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from ._lowp_numba import _bits_from_f32, _f32_from_bits

u8, u32, f32 = np.uint8, np.uint32, np.float32


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _code_and_value(  # pragma: no cover - compiled
    x: Any, mbits: int, bias: int, top: int, over: int, nan: int, top_bits: int, sat: bool
) -> Any:
    """One float32's bits ``x`` -> its float8 code (``sat`` clamps to +-top first) and that code's value as
    float32 (NaN as ml_dtypes widens it: the quiet NaN of the code's sign), without branches, so that the loops
    calling it vectorize: every candidate is computed and the right one selected.

    A normal result rounds the float32 bits (rebiased) to ``mbits`` mantissa bits, to nearest even; a subnormal
    one is the float32 sum of ``|x|`` and ``magic``, a power of two whose ulp is the target's subnormal step, so
    the hardware's own rounding to nearest even picks the step count (the float32 -> float16 technique of
    Giesen's ``float_to_half_fast3``).  The value undoes each: the rebias, or the exact ``sum - magic``."""
    shift = u32(23 - mbits)
    sign = (x >> u32(24)) & u32(0x80)
    a = x & u32(0x7FFFFFFF)
    rebias = u32((127 - bias) << 23)
    r = a - rebias
    normal = (r + u32((1 << (23 - mbits - 1)) - 1) + ((r >> shift) & u32(1))) >> shift
    magic = _f32_from_bits(u32((127 - bias + 24 - mbits) << 23))  # 2**(24 - bias - mbits): ulp the subnormal step
    rounded = _f32_from_bits(a) + magic
    is_normal = a >= u32((128 - bias) << 23)
    code = normal if is_normal else _bits_from_f32(rounded) - _bits_from_f32(magic)
    value = (normal << shift) + rebias if is_normal else _bits_from_f32(rounded - magic)
    code, value = (u32(over), u32(0x7FC00000)) if code > u32(top) else (code, value)  # non-saturating only
    code, value = (u32(top), u32(top_bits)) if sat and a >= u32(top_bits) else (code, value)
    code, value = (u32(nan), u32(0x7FC00000)) if a > u32(0x7F800000) else (code, value)
    return u8(sign | code), _f32_from_bits(value | (sign << u32(24)))


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _code(  # pragma: no cover - compiled
    x: Any, mbits: int, bias: int, top: int, over: int, nan: int, top_bits: int, sat: bool
) -> Any:
    """One float32's bits ``x`` -> its float8 code (:func:`_code_and_value`)."""
    return _code_and_value(x, mbits, bias, top, over, nan, top_bits, sat)[0]


@numba.njit(nogil=True, cache=True)
def round_codes(  # pragma: no cover - compiled
    y: Any, out: Any, mbits: int, bias: int, top: int, over: int, nan: int, top_bits: int, sat: bool
) -> None:
    """float32 bits ``y`` -> float8 codes ``out`` (both flat, one length); ``sat`` clamps to +-top first."""
    for i in range(y.size):
        out[i] = _code(y[i], mbits, bias, top, over, nan, top_bits, sat)


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _pow2_floor(s: Any) -> Any:  # pragma: no cover - compiled
    """NumPy's ``ldexp(float32(0.5), frexp(s)[1])`` for a positive float32 ``s`` that is normal or inf (the
    current-scaling rule's scales are, with a float32 maximum over a float32 amax): 2 ** floor(log2 s), and
    0.5 for inf (frexp(inf) has exponent 0)."""
    b = _bits_from_f32(s)
    return f32(0.5) if b >= u32(0x7F800000) else _f32_from_bits(b & u32(0x7F800000))


def _float32(value: Any) -> Any:  # pragma: no cover - compiled (its overload)
    """An input element as float32: a float32 as it is, a uint16 as the bfloat16 whose bits it holds."""


@overload(_float32, inline="always")
def _float32_overload(value):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    # unannotated: numba compares this signature with its implementations', which are lambdas
    if isinstance(value, types.Float):
        return lambda value: value
    if value == types.uint16:
        return lambda value: _f32_from_bits(u32(value) << u32(16))
    return None


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _row_scale(x: Any, r: int, fmax: Any, eps: Any, pow2: bool) -> Any:
    """Row ``r``'s (amax, scale, 1 / scale): amax the largest ``|x|`` by its float32 bits (a NaN's bits exceed
    inf's, and NumPy's max propagates NaN too); scale ``fmax / max(amax, eps)`` in float32 where amax is finite,
    else 1 (rounded down to a power of two with ``pow2``)."""
    m = u32(0)
    for j in range(x.shape[1]):
        m = max(m, _bits_from_f32(_float32(x[r, j])) & u32(0x7FFFFFFF))
    amax = _f32_from_bits(m)
    s = fmax / (eps if eps > amax else amax) if m < u32(0x7F800000) else f32(1.0)
    s = _pow2_floor(s) if pow2 else s
    return amax, s, f32(1.0) / s


@numba.njit(nogil=True, cache=True, error_model="numpy")
def quantize_current(  # pragma: no cover - compiled
    x: Any,
    out: Any,
    scales: Any,
    fmax: Any,
    eps: Any,
    pow2: bool,
    mbits: int,
    bias: int,
    top: int,
    over: int,
    nan: int,
    top_bits: int,
    dequantized: Any,
) -> None:
    """float8's cast with current scaling, one row of the C-contiguous ``x`` (rows, cols; float32, or bfloat16
    as uint16 bits) at a time: ``scales[:, r]`` gets the row's scale, 1 / scale and amax (:func:`_row_scale`),
    and ``out[r]`` the saturated codes of ``float32(x[r]) * scale``.  Unless ``dequantized`` is None (numba
    compiles that case without the branch), it also gets ``value(code) * (1 / scale)`` in float32: what
    ``scaled_mm``'s widened path computes from the codes and the dequantization scale, made in the same pass."""
    for r in range(x.shape[0]):
        amax, s, inv = _row_scale(x, r, fmax, eps, pow2)
        scales[0, r], scales[1, r], scales[2, r] = s, inv, amax
        for j in range(x.shape[1]):
            y = _bits_from_f32(_float32(x[r, j]) * s)
            code, value = _code_and_value(y, mbits, bias, top, over, nan, top_bits, True)
            out[r, j] = code
            if dequantized is not None:
                dequantized[r, j] = value * inv


@numba.njit(nogil=True, cache=True)
def gather_f32(codes: Any, table: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``out[i] = table[codes[i]]``: float8 codes (flat uint8) through a 256-entry float32 table."""
    for i in range(codes.size):
        out[i] = table[codes[i]]
