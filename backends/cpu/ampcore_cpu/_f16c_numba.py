"""float16 <-> float32 on the x86 F16C instructions, bit for bit NumPy's (importing this imports numba).

The integer rounding of :func:`._halfconv_numba.f16_bits` is ~20 operations per element: 0.80 ms per
million float32 on a 2-core Xeon (Emerald Rapids), a compute-bound pass where a copy takes 0.26.  LLVM
lowers ``fptrunc float -> half`` to ``vcvtps2ph`` where the target has F16C: 0.22 ms, the speed of memory.
``vcvtps2ph`` rounds to nearest even through subnormals and overflows to inf as NumPy does (MXCSR's FTZ
does not apply to it, and a float32 subnormal rounds to a signed zero either way); it differs from NumPy
only on NaN, which it quiets.  So a NaN takes NumPy's payload rule in a select, and the element is
NumPy's bits on every input (all 2**32: ``benchmarks/check_float16_exhaustive.py``).  Widening
(``vcvtph2ps``, 0.21 against the table lookup's 0.31 ms per million) quiets a NaN too, fixed the same way.

:data:`F16C` says whether the compile target has the instructions (the host, or ``NUMBA_CPU_NAME`` /
``NUMBA_CPU_FEATURES`` where the user chose a portable target).  Without them LLVM would lower the
conversions to calls into a runtime library that numba does not link, so callers pick the integer form
at import time (``f16_bits = narrow_f16c if F16C else ...``) and these bodies are never compiled.
"""

from __future__ import annotations

from typing import Any

import llvmlite.binding as llvm
import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from ._u32_numba import and32, or32, shl32, shr32

u16, u32 = np.uint16, np.uint32


def _target_has_f16c() -> bool:
    if numba.config.CPU_NAME:  # a target the user chose for portable caches: only the features it names
        return "+f16c" in (numba.config.CPU_FEATURES or "")
    return "+f16c" in llvm.get_host_cpu_features().flatten().split(",")


F16C = _target_has_f16c()


@intrinsic
def _fptrunc_half(typingctx: Any, bits: Any) -> Any:  # pragma: no cover - compiled
    """float32 bits -> float16 bits by LLVM's ``fptrunc`` (``vcvtps2ph``, round to nearest even)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        value = builder.bitcast(args[0], ir.FloatType())
        return builder.bitcast(builder.fptrunc(value, ir.HalfType()), ir.IntType(16))

    return types.uint16(types.uint32), codegen


@intrinsic
def _fpext_half(typingctx: Any, bits: Any) -> Any:  # pragma: no cover - compiled
    """float16 bits -> float32 bits by LLVM's ``fpext`` (``vcvtph2ps``, exact)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        value = builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
        return builder.bitcast(value, ir.IntType(32))

    return types.uint32(types.uint16), codegen


@intrinsic
def _round_trip_half(typingctx: Any, value: Any) -> Any:  # pragma: no cover - compiled
    """A float32 rounded to float16 and back, by ``fptrunc`` then ``fpext`` (``vcvtps2ph`` + ``vcvtph2ps``)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.fpext(builder.fptrunc(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.float32), codegen


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def narrow_f16c(x: Any) -> Any:  # pragma: no cover - compiled
    """float32 bits ``x`` -> float16 bits, NumPy's: the instruction's, NaN payloads as NumPy keeps them."""
    a = and32(x, 0x7FFFFFFF)
    nan = or32(0x7C00, shr32(and32(a, 0x7FFFFF), 13))
    nan = or32(nan, u32(nan == u32(0x7C00)))  # a payload only in the dropped bits stays a NaN, as NumPy's
    nan = or32(nan, and32(shr32(x, 16), 0x8000))
    return u16(nan) if a > u32(0x7F800000) else _fptrunc_half(x)


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def widen_f16c(h: Any) -> Any:  # pragma: no cover - compiled
    """float16 bits ``h`` -> float32 bits, NumPy's: the instruction's, a NaN's payload not quieted."""
    x = u32(h)
    nan = or32(or32(0x7F800000, shl32(and32(x, 0x3FF), 13)), shl32(and32(x, 0x8000), 16))
    return nan if and32(x, 0x7FFF) > u32(0x7C00) else _fpext_half(h)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def down(w: Any, out: Any) -> None:  # pragma: no cover - compiled
    """float32 bits ``w`` -> float16 bits ``out`` (both flat, one length)."""
    for i in range(w.size):
        out[i] = narrow_f16c(w[i])


@numba.njit(nogil=True, cache=True, error_model="numpy")
def up(h: Any, out: Any) -> None:  # pragma: no cover - compiled
    """float16 bits ``h`` -> float32 bits ``out`` (both flat, one length)."""
    for i in range(h.size):
        out[i] = widen_f16c(h[i])
