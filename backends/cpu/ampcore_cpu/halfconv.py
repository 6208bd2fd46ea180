"""float32 <-> float16 conversion, bit for bit NumPy's, compiled with numba where it is installed.

NumPy converts float16 one element at a time in C (its wheels are built for
x86-64 without F16C): 3.5 ms per million elements down and 2.2 up on a 2-core
Zen 3, against 0.18 for a copy.  Written with NumPy's own integer ops the
rounding takes ~17 whole-array passes and is slower still (7 ms chunked, 25
unchunked).  numba compiles the same integer algorithm into one loop (LLVM
vectorises it): 4-5x faster down, 7-9x up (``benchmarks/bench_float16_cast.py``).

numba is a dependency of ampcore-cpu where it has wheels; on the NumPy
fallback path (:mod:`.compiled`) both directions are NumPy's ``astype``.  Either way the bits are NumPy's:
round to nearest even, subnormals, overflow to inf, and NaN payloads (the top
10 payload bits kept, sign kept, a payload that would vanish becomes 1),
checked on every float16 value and a structured float32 sample by
``tests/test_cpu_halfconv.py`` and on all 2**32 float32 inputs by
``benchmarks/check_float16_exhaustive.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import compiled

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)


def _numba_kernels() -> tuple[Callable[..., None], Callable[..., None]] | None:
    """The compiled (down, up) loops, or None on the NumPy fallback path.

    ``up(h, out)``: F16C's widening (:mod:`._f16c_numba`) where the target has it, else a lookup in the table of
    every float16's float32 bits (:func:`._select_numba.gather`).
    """
    loops = compiled.load("_halfconv_numba")
    if loops is None:
        return None
    f16c = compiled.load("_f16c_numba")
    if f16c is not None and f16c.F16C:
        return loops.down, f16c.up
    table, gather = _table(), compiled.load("_select_numba").gather
    return loops.down, lambda h, out: gather(h, table, out)


@functools.cache
def _engine() -> tuple[Callable[..., None], Callable[..., None]] | None:
    return _numba_kernels()


@functools.cache
def _table() -> np.ndarray:
    """float32 bits of every float16 bit pattern, from NumPy itself (so NaN payloads are NumPy's)."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(F16).astype(F32).view(np.uint32)


def engine() -> str:
    """Which conversion runs: ``"numba"`` or ``"numpy"`` (the fallback path, :mod:`.compiled` says why)."""
    return "numba" if _engine() is not None else "numpy"


def convert_bits(
    a: np.ndarray, out_dtype: np.dtype, in_bits: Any, out_bits: Any, run: Callable[[np.ndarray, np.ndarray], None]
) -> np.ndarray:
    """Run ``run(flat_in_bits, flat_out_bits)`` in ``a``'s memory order (C, or F as a transpose).

    Shared by the compiled float16 and bfloat16 conversions (:mod:`.bf16conv`).
    """
    if a.flags.f_contiguous and not a.flags.c_contiguous:
        return convert_bits(a.T, out_dtype, in_bits, out_bits, run).T
    src = np.ascontiguousarray(a)
    out = np.empty(src.shape, out_dtype)
    run(src.reshape(-1).view(in_bits), out.reshape(-1).view(out_bits))
    return out


# Below these sizes NumPy's own cast beats the compiled loop's call and array setup (about 1.3 us), each way.
# Rounding down, NumPy pays about 63 ns for each subnormal result (it raises the underflow flag element by
# element), against 4 ns for a normal one: 640 scaled float16 AMP gradients of size 1e-6 took 41 us, against
# 1.4 us compiled (2-core AMD EPYC Zen 5).  GradScaler's gradients are often that small, so down the compiled
# loop takes over at 32 elements, where NumPy's worst case is 2 us.
SMALL_DOWN = 32
SMALL_UP = 1024


def to_float16(a: np.ndarray) -> np.ndarray:
    """A float32 array rounded to float16 (a new array), exactly as ``a.astype(np.float16)``."""
    kernels = _engine()
    if kernels is None or a.dtype != F32 or a.size < SMALL_DOWN:
        return a.astype(F16)
    return convert_bits(a, F16, np.uint32, np.uint16, kernels[0])


def to_float32(a: np.ndarray) -> np.ndarray:
    """A float16 array widened to float32 (a new array), exactly as ``a.astype(np.float32)``."""
    kernels = _engine()
    if kernels is None or a.dtype != F16 or a.size < SMALL_UP:
        return a.astype(F32)
    return convert_bits(a, F32, np.uint16, np.uint32, kernels[1])
