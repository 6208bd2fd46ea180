"""float16/bfloat16 add, sub, mul and div in one compiled pass each, where numba is installed.

The NumPy path widens both operands to float32 (two passes and two arrays),
applies the ufunc (a third) and rounds (a fourth).  :mod:`._lowp_numba` does
the three steps per element in one loop; for a (1024, 1024) bfloat16 add it
took 0.54 ms against 2.48 (float16: 2.3 against 3.1; best of 30, one thread,
2-core Xeon).

The numbers are the NumPy path's, with one exception: a NaN result.  Which NaN
an operation on NaN inputs returns (its sign and payload) is not specified by
IEEE 754 and depends on the instruction sequence (NumPy's own SIMD and scalar
loops can differ); both paths give a NaN wherever the other does, and every
non-NaN result has the same bits (``tests/test_cpu_compiled.py``, every
float16 and bfloat16 value against a sample of operands).

Operands it takes: the first a C-contiguous array of a 2-byte float dtype with
at least :data:`MIN_ELEMENTS` elements; the second a C-contiguous array of the
same dtype of the first's shape, its trailing dimensions (a bias), a channel
column (a conv bias (C, 1, 1) against (N, C, H, W)) or a single element, or a
Python float (converted to float32, as NumPy does with a scalar beside a
float32 array; ``_lowp_scalar_numba``).  Anything else, and every call without
numba, returns None and the caller takes the NumPy path.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from . import compiled

OPS = ("add", "sub", "mul", "div")
MIN_ELEMENTS = 1 << 12  # below this the NumPy path's fixed cost is as low as the call into the loop
_F16 = np.dtype(np.float16)


@functools.cache
def _engine() -> Any:
    """:mod:`._lowp_numba` on the compiled path, else None."""
    return compiled.load("_lowp_numba")


@functools.cache
def _scalar_engine() -> Any:
    """:mod:`._lowp_scalar_numba` on the compiled path, else None."""
    return compiled.load("_lowp_scalar_numba")


def _operand_shapes(a: np.ndarray, b: np.ndarray) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """2-D shapes for ``a`` and ``b`` that broadcast ``b`` as the loop does, or None."""
    if b.shape == a.shape:
        cols = a.shape[-1]
        return (a.size // cols, cols), (a.size // cols, cols)
    if b.size == 1 and b.ndim <= a.ndim:
        return (a.size, 1), (1, 1)
    trailing = b.shape
    while trailing and trailing[0] == 1:
        trailing = trailing[1:]
    if 0 < len(trailing) < a.ndim and a.shape[-len(trailing) :] == trailing and b.ndim <= a.ndim:
        return (a.size // b.size, b.size), (1, b.size)
    # A channel column, (C, 1, ..., 1) against (..., C, H, ..., W): a's rows (..., C) take b's row r % C.
    if 1 < len(trailing) <= a.ndim and b.ndim <= a.ndim and trailing[0] == a.shape[-len(trailing)] > 0:
        if all(n == 1 for n in trailing[1:]):
            cols = math.prod(a.shape[a.ndim - len(trailing) + 1 :])
            return (a.size // cols, cols), (trailing[0], 1)
    return None


def _binary_scalar(name: str, a: np.ndarray, b: float) -> np.ndarray | None:
    loops = _scalar_engine()
    if loops is None:
        return None
    out = np.empty(a.shape, a.dtype)
    bits = np.uint16
    lowp = _engine()
    loops.binary_scalar(
        lowp.OPS[name], a.reshape(-1).view(bits), np.float32(b), out.reshape(-1).view(bits), a.dtype == _F16
    )
    return out


def binary(name: str, a: Any, b: Any) -> np.ndarray | None:
    """``a <name> b`` rounded once to their 2-byte dtype, or None where the compiled loop does not apply."""
    loops = _engine()
    if loops is None or a.size < MIN_ELEMENTS or not a.flags.c_contiguous:
        return None
    if type(b) is float:  # not a NumPy scalar: a float64 one would make the NumPy path compute in float64
        return _binary_scalar(name, a, b)
    if not isinstance(b, np.ndarray) or b.dtype != a.dtype or not b.flags.c_contiguous:
        return None
    shapes = _operand_shapes(a, b)
    if shapes is None:
        return None
    out = np.empty(a.shape, a.dtype)
    bits = np.uint16
    loops.binary(
        loops.OPS[name],
        a.reshape(shapes[0]).view(bits),
        b.reshape(shapes[1]).view(bits),
        out.reshape(shapes[0]).view(bits),
        a.dtype == _F16,
    )
    return out
