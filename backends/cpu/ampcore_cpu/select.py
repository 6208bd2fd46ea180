"""``where`` in one compiled pass (:mod:`._select_numba`) for the shapes the ReLU backward gives it.

``where(cond, a, b)`` with a boolean ``cond`` and arrays of its shape and of one dtype, or one of them a Python
scalar: the values are selected as their bits, so the result is the bits NumPy's ``np.where`` (and the
bitwise blend of :func:`.kernels._select_bits`) gives, one read of each operand and one write instead of
their five passes.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from . import compiled

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


@functools.cache
def _loops() -> Any:
    """:mod:`._select_numba` on the compiled path, else None (:mod:`.compiled`)."""
    return compiled.load("_select_numba")


def _flat_bits(v: np.ndarray, bits: Any) -> np.ndarray | None:
    return v.reshape(-1).view(bits) if v.flags.c_contiguous else None


def select(cond: np.ndarray, a: Any, b: Any, dtype: np.dtype) -> np.ndarray | None:
    """``np.where(cond, a, b)`` as ``dtype`` in one compiled pass, or None where this path does not apply (no
    numba, a dtype of another width, broadcasting, non-contiguous operands)."""
    bits = _UINT.get(dtype.itemsize)
    loops = _loops() if bits is not None and dtype.kind in "fV" else None
    if loops is None or cond.dtype != np.bool_ or not cond.flags.c_contiguous:
        return None
    arrays = [v for v in (a, b) if isinstance(v, np.ndarray)]
    if not arrays or any(v.shape != cond.shape or v.dtype != dtype for v in arrays):
        return None
    flats = [_flat_bits(v, bits) if isinstance(v, np.ndarray) else None for v in (a, b)]
    if any(f is None for f, v in zip(flats, (a, b)) if isinstance(v, np.ndarray)):
        return None
    out = np.empty(cond.shape, dtype)
    mask, out_bits = cond.reshape(-1).view(np.uint8), out.reshape(-1).view(bits)
    if len(arrays) == 2:
        loops.select(mask, flats[0], flats[1], out_bits)
        return out
    scalar = b if isinstance(a, np.ndarray) else a
    value = np.asarray(scalar, dtype=dtype)  # as kernels.where's np.where path converts it
    loops.select_scalar(
        mask, flats[0] if flats[0] is not None else flats[1], value.view(bits)[()], flats[0] is not None, out_bits
    )
    return out
