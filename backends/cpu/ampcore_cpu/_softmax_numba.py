"""The compiled row loops of softmax, log_softmax and their backwards over the last axis (importing this imports
numba).

The NumPy kernels (:mod:`.fused_nn`) make six to eight whole-array passes, each with its own temporary: widen,
max, subtract, exp, sum, divide, round. These loops make the same float32 operations in two or three passes
around NumPy's own ``exp`` and ``log`` (whose bits they keep), and sum each row as NumPy's add-reduction of a
contiguous row does: its pairwise summation (eight running sums, combined as a tree, the rest added in order;
halves split at multiples of 8 past 128 elements) onto 0. So the results are the NumPy kernels' bits
(``tests/test_cpu_softmax.py``), but for the sign and payload of a NaN made where two NaNs meet (which of the
two a product or sum returns is the compiler's operand order; IEEE leaves it open). A bfloat16 (16, 4, 32, 32)
attention softmax: 0.16 -> 0.064 ms forward, 0.076 -> 0.036 ms backward (2-core AMD EPYC Zen 5).

The 16-bit arrays come as their bits, and the integer type says the format: bfloat16 as uint16, float16 as
int16 (:func:`_widen`, :func:`_store`).  Numba specializes each loop per dtype that way; passing the conversions
as function arguments instead made its on-disk cache miss in every new process.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from ._lowp_numba import narrow_bf16, narrow_f16, widen

_F32 = np.float32
_OPTS = {"nogil": True, "cache": True, "error_model": "numpy"}


def _store(out: Any, r: int, c: int, value: Any) -> None:  # pragma: no cover - compiled (its overload)
    """``out[r, c] = value`` rounded to ``out``'s format (float32, or bits: uint16 bfloat16, int16 float16)."""


@overload(_store)
def _store_overload(out, r, c, value):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    if out.dtype == types.float32:

        def store_f32(out, r, c, value):  # type: ignore[no-untyped-def]
            out[r, c] = value

        return store_f32
    if out.dtype == types.uint16:

        def store_bf16(out, r, c, value):  # type: ignore[no-untyped-def]
            out[r, c] = narrow_bf16(value)

        return store_bf16
    if out.dtype == types.int16:

        def store_f16(out, r, c, value):  # type: ignore[no-untyped-def]
            out[r, c] = np.int16(narrow_f16(value))

        return store_f16
    return None


@numba.njit(inline="always", **_OPTS)
def _block(a: Any, lo: int, n: int) -> Any:  # pragma: no cover - compiled
    """NumPy's pairwise sum of the float32 ``a[lo:lo + n]`` for n <= 128: in order below 8 elements, else eight
    running sums combined as a tree, then the rest in order."""
    if n < 8:
        res = _F32(0.0)
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = lo + 8
    end = lo + n - n % 8
    while i < end:
        r0, r1, r2, r3 = r0 + a[i], r1 + a[i + 1], r2 + a[i + 2], r3 + a[i + 3]
        r4, r5, r6, r7 = r4 + a[i + 4], r5 + a[i + 5], r6 + a[i + 6], r7 + a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        res += a[i]
        i += 1
    return res


@numba.njit(inline="always", **_OPTS)
def _half(n: int) -> int:  # pragma: no cover - compiled
    """Where NumPy's pairwise sum splits ``n`` elements past 128: half, rounded down to a multiple of 8."""
    return n // 2 - (n // 2) % 8


@numba.njit(**_OPTS)
def _pairwise(a: Any, n: int) -> Any:  # pragma: no cover - compiled
    """NumPy's pairwise sum of the float32 ``a[:n]``: blocks of at most 128 (:func:`_block`), each split's two
    halves added, the recursion unrolled onto a stack (numba's cache cannot load a recursive function)."""
    if n <= 128:
        return _block(a, 0, n)
    los, ns = np.empty(64, np.int64), np.empty(64, np.int64)
    lefts, have_left = np.empty(64, _F32), np.zeros(64, np.bool_)
    sp = 0
    los[0], ns[0] = 0, n
    while True:
        if ns[sp] > 128:  # split: the left half first
            h = _half(ns[sp])
            los[sp + 1], ns[sp + 1], have_left[sp + 1] = los[sp], h, False
            sp += 1
            continue
        v = _block(a, los[sp], ns[sp])
        while True:  # hand v up: a left half waits for its right one, a right half completes its parent
            if sp == 0:
                return v
            sp -= 1
            if not have_left[sp]:
                lefts[sp], have_left[sp] = v, True
                h = _half(ns[sp])
                los[sp + 1], ns[sp + 1], have_left[sp + 1] = los[sp] + h, ns[sp] - h, False
                sp += 1
                break
            v = lefts[sp] + v


@numba.njit(inline="always", **_OPTS)
def row_sum(a: Any) -> Any:  # pragma: no cover - compiled
    """``a.sum()`` of a contiguous float32 row, NumPy's bits: its pairwise sum added onto 0."""
    return _F32(0.0) + (_block(a, 0, a.size) if a.size <= 128 else _pairwise(a, a.size))


@numba.njit(**_OPTS)
def shifted(x: Any, z: Any) -> None:  # pragma: no cover - compiled
    """``z[r] = x[r] - max(x[r])`` per row of the 2-D ``x``, in float32 (the max NaN if any element is, as
    NumPy's; -inf for an empty row)."""
    for r in range(x.shape[0]):
        m = _F32(-np.inf)
        nan = False
        for c in range(x.shape[1]):
            v = widen(x[r, c])
            nan |= v != v
            m = max(m, v)
        m = _F32(np.nan) if nan else m
        for c in range(x.shape[1]):
            z[r, c] = widen(x[r, c]) - m


@numba.njit(**_OPTS)
def normalized(e: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``out[r] = e[r] / e[r].sum()`` per row (float32 ``e``), rounded to ``out``'s format."""
    for r in range(e.shape[0]):
        s = row_sum(e[r])
        for c in range(e.shape[1]):
            _store(out, r, c, e[r, c] / s)


@numba.njit(**_OPTS)
def backward(y: Any, gy: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``out[r] = y[r] * (gy[r] - (gy[r] * y[r]).sum())`` per row, in float32, rounded to ``out``'s format."""
    products = np.empty(y.shape[1], _F32)
    for r in range(y.shape[0]):
        for c in range(y.shape[1]):
            products[c] = widen(gy[r, c]) * widen(y[r, c])
        s = row_sum(products)
        for c in range(y.shape[1]):
            _store(out, r, c, widen(y[r, c]) * (widen(gy[r, c]) - s))


@numba.njit(**_OPTS)
def row_sums(e: Any, sums: Any) -> None:  # pragma: no cover - compiled
    """``sums[r] = e[r].sum()`` per row of the float32 ``e``, NumPy's bits."""
    for r in range(e.shape[0]):
        sums[r] = row_sum(e[r])


@numba.njit(**_OPTS)
def log_normalized(z: Any, logs: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``out[r] = z[r] - logs[r]`` per row, in float32, rounded to ``out``'s format."""
    for r in range(z.shape[0]):
        for c in range(z.shape[1]):
            _store(out, r, c, z[r, c] - logs[r])


@numba.njit(**_OPTS)
def log_backward(e: Any, gy: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``out[r] = gy[r] - e[r] * gy[r].sum()`` per row, in float32 (``e`` = exp(y), ``gy`` widened), rounded to
    ``out``'s format."""
    row = np.empty(gy.shape[1], _F32)
    for r in range(gy.shape[0]):
        for c in range(gy.shape[1]):
            row[c] = widen(gy[r, c])
        s = row_sum(row)
        for c in range(gy.shape[1]):
            _store(out, r, c, row[c] - e[r, c] * s)
