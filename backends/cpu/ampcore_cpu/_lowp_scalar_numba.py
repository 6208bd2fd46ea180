"""Compiled float16/bfloat16 arithmetic with a Python scalar operand (importing this imports numba).

``a op s`` for a 2-byte array ``a`` and a Python float ``s``: the NumPy path widens ``a`` to float32, applies
the ufunc with ``s`` converted to float32 (NEP 50: a Python scalar takes the array's dtype) and rounds once,
three passes and two temporaries; here one loop with :mod:`._lowp_numba`'s elements, the same numbers.
"""

from __future__ import annotations

from typing import Any

import numba

from ._lowp_numba import _apply, narrow_bf16, narrow_f16, widen_bf16, widen_f16


@numba.njit(nogil=True, cache=True, error_model="numpy")
def binary_scalar(op: int, a: Any, y: Any, out: Any, f16: bool) -> None:  # pragma: no cover - compiled
    """``out = round(widen(a) op y)`` on flat 2-byte bits ``a`` and ``out``, ``y`` a float32.  ``f16``: float16,
    else bfloat16."""
    if f16:
        for i in range(a.size):
            out[i] = narrow_f16(_apply(op, widen_f16(a[i]), y))
    else:
        for i in range(a.size):
            out[i] = narrow_bf16(_apply(op, widen_bf16(a[i]), y))
