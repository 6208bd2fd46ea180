"""The float16/bfloat16 element conversions the compiled loops inline (importing this module imports numba).

Each element is widened to float32 exactly and rounded back once: the
rounding repeats :mod:`._halfconv_numba` (NumPy's float16 bits) and
:mod:`._bf16conv_numba` (ml_dtypes' bfloat16 bits), so a loop that widens,
computes in float32 and narrows gives the NumPy path's bits.  The generated
program loops (:mod:`.loops`) and the fused kernels call them.

Loops run on the calling thread, vectorised (``error_model="numpy"``: no
zero-division check in the loop); a (256, 1024) float16 bias add took 0.43 ms
(1.12 with numba's default error model).  Not ``prange``: on the loaded
2-core host each parallel region waited a median 50 ms for its second thread
(see :mod:`._optim_numba`).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from ._bf16conv_numba import bf16_bits
from ._f16c_numba import F16C, _round_trip_half, widen_f16c
from ._halfconv_numba import f16_bits, f16_bits_int
from ._u32_numba import add32, and32, or32, shl32
from ._u32_numba import bits_from_f32 as _bits_from_f32
from ._u32_numba import f32_from_bits as _f32_from_bits

u16, u32, f32 = np.uint16, np.uint32, np.float32


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def widen_f16_int(h: Any) -> Any:  # pragma: no cover - compiled
    """float16 bits -> float32, as NumPy's conversion (NaN payloads kept, not quieted)."""
    x = u32(h)
    em = and32(x, 0x7FFF)
    sub = _bits_from_f32(f32(em) * f32(2.0**-24))  # subnormal: exact, the integer times 2**-24
    r = sub if em < u32(0x400) else add32(shl32(em, 13), 0x38000000)
    r = or32(0x7F800000, shl32(and32(em, 0x3FF), 13)) if em >= u32(0x7C00) else r
    return _f32_from_bits(or32(r, shl32(and32(x, 0x8000), 16)))


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def widen_f16_hw(h: Any) -> Any:  # pragma: no cover - compiled
    """:func:`widen_f16_int`'s value on F16C's vcvtph2ps (:mod:`._f16c_numba`)."""
    return _f32_from_bits(widen_f16c(h))


widen_f16 = widen_f16_hw if F16C else widen_f16_int


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def narrow_f16(value: Any) -> Any:  # pragma: no cover - compiled
    """float32 -> float16 bits, rounded to nearest even: :func:`._halfconv_numba.down`'s element."""
    return f16_bits(_bits_from_f32(value))


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def round_f16_int(value: Any) -> Any:  # pragma: no cover - compiled
    """A float32 rounded to float16's precision and range, still float32: ``widen_f16(narrow_f16(value))``."""
    return widen_f16_int(f16_bits_int(_bits_from_f32(value)))


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def round_f16_hw(value: Any) -> Any:  # pragma: no cover - compiled
    """:func:`round_f16_int`'s value on F16C, both conversions in one step, NaN payloads as NumPy's round trip
    keeps them (the top 10 bits; a payload only in the dropped bits becomes the lowest kept one).

    The two conversions of ``widen_f16(narrow_f16(x))``, each with its NaN select, kept a fused float16 chain
    (bias add, ReLU) from vectorising: 18.9 µs for a (64, 128) block, 7.3 with this (2-core AMD EPYC Zen 5).
    """
    x = _bits_from_f32(value)
    a = and32(x, 0x7FFFFFFF)
    payload = and32(a, 0x7FE000)
    payload = or32(payload, u32(0x2000) if payload == u32(0) else u32(0))
    nan = _f32_from_bits(or32(or32(and32(x, 0x80000000), 0x7F800000), payload))
    return nan if a > u32(0x7F800000) else _round_trip_half(value)


round_f16 = round_f16_hw if F16C else round_f16_int


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def widen_bf16(h: Any) -> Any:  # pragma: no cover - compiled
    return _f32_from_bits(shl32(h, 16))


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def narrow_bf16(value: Any) -> Any:  # pragma: no cover - compiled
    """float32 -> bfloat16 bits, rounded to nearest even: :func:`._bf16conv_numba.down`'s element."""
    return bf16_bits(_bits_from_f32(value))


def widen(value: Any) -> Any:  # pragma: no cover - compiled (its overload)
    """A loop's element as float32 by its type: a float32 as it is, uint16 bits as bfloat16, int16 bits as
    float16 (a loop takes a 16-bit array as its bits, the integer type saying the format)."""


@overload(widen)
def _widen_overload(value):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    # unannotated: numba compares this signature with its implementations', which are lambdas.  Not inlined in
    # numba's IR (its SSA check warned on the float16 form); LLVM inlines it.
    if value == types.float32:
        return lambda value: value
    if value == types.uint16:
        return lambda value: widen_bf16(value)
    if value == types.int16:
        return lambda value: widen_f16(np.uint16(value))
    return None
