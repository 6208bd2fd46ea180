"""GELU (exact erf form) and its backward for float16 and bfloat16 inputs, by table (importing this imports numba).

A 16-bit input has 65536 possible values, so the kernel's whole answer fits in two tables, made once per dtype
by the libm loops themselves (:mod:`._gelu_numba`, see :mod:`.gelu32`): each input's GELU, already rounded to
the dtype, and the float64 factor ``Phi(x) + x phi(x)`` the backward multiplies ``gy`` by. The forward is a
gather (:func:`._select_numba.gather`); the backward one float64 product per element, rounded as the libm path's
float64 result is (NumPy's float64 -> float16 cast; ml_dtypes' float64 -> bfloat16, which goes through float32).
Same bits by construction, on every input, and no libm call per element: the GPT port's bfloat16 GELU, (16, 32,
256), 0.36 -> 0.04 ms forward and 0.48 -> 0.1 ms backward (2-core AMD EPYC Zen 5).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from ._lowp_numba import narrow_bf16, narrow_f16, widen_bf16, widen_f16
from ._u32_numba import add32, and32, bits_from_f32, f32_from_bits, sub32

_F32 = np.float32


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _product(gy: Any, slope: Any) -> Any:  # pragma: no cover - compiled
    """``gy * slope`` in float64, the slope's NaN where both are NaN (the libm loop's result keeps x's payload;
    a multiply alone returns either operand's, as the compiler orders them)."""
    return slope if slope != slope else np.float64(gy) * slope


@numba.njit(nogil=True, cache=True, error_model="numpy")
def backward_bf16(x: Any, gy: Any, slope: Any, out: Any) -> None:  # pragma: no cover - compiled
    """bfloat16 bits ``x``, ``gy`` -> bfloat16 bits ``out`` (flat, one length): ``gy * slope[x]`` in float64, rounded
    to float32 then bfloat16 (ml_dtypes' cast of the float64)."""
    for i in range(x.size):
        out[i] = narrow_bf16(_F32(_product(widen_bf16(gy[i]), slope[x[i]])))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def backward_f16(x: Any, gy: Any, slope: Any, out: Any) -> None:  # pragma: no cover - compiled
    """float16 bits ``x``, ``gy`` -> float16 bits ``out``: ``gy * slope[x]`` in float64, rounded once to float16
    (NumPy's cast of the float64), through a float32 that rounds to float16 as the float64 does."""
    for i in range(x.size):
        out[i] = narrow_f16(to_float16_way(_product(widen_f16(gy[i]), slope[x[i]])))


# A float64 R rounded once to float16, through float32.  Where float32(R) = y is not a float16 midpoint, rounding
# y to float16 gives the same value as rounding R: every float16 midpoint is a float32 number, and none lies
# between R and its nearest float32 y unless y is it.  A midpoint y that R is not equal to moves one float32 step
# toward R, so that the float32 -> float16 rounding goes R's way.


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _midpoint16(y: Any) -> Any:  # pragma: no cover - compiled
    """Whether the float32 ``y`` lies halfway between two neighbouring float16 values (branch-free)."""
    normal = and32(bits_from_f32(y), 0x1FFF) == np.uint32(0x1000)  # float16's normal range, and 65520
    t = abs(np.float64(y)) * 2.0**25  # float16 subnormals: the midpoints are the odd multiples of 2^-25
    k = np.floor(t)
    sub = (t == k) & (np.floor(k * 0.5) != k * 0.5)
    return normal if abs(np.float64(y)) >= 2.0**-14 else sub


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def to_float16_way(big: float) -> Any:  # pragma: no cover - compiled
    """A float32 whose float16 rounding is ``big``'s: float32(big), or a midpoint moved one step toward big."""
    y = _F32(big)
    if not _midpoint16(y) or np.float64(y) == big:
        return y
    bits = bits_from_f32(y)
    away = (np.float64(y) < big) == (y > 0)  # the step increases |y|
    return f32_from_bits(add32(bits, 1) if away else sub32(bits, 1))
