"""float16 max over one axis in one compiled pass (:mod:`._lowp_max_numba`), where numba is installed.

Bit for bit NumPy's ``np.max`` on float16 (its module says why); the NumPy path stays for every other case
and without numba.  Takes a C-contiguous float16 array of at least :data:`MIN_ELEMENTS` elements reduced over
one axis (max-pool's tap axis); anything else returns None and the caller takes NumPy's reduction.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from . import compiled

MIN_ELEMENTS = 1 << 12  # below this NumPy's fixed cost is as low as the call into the loop
_F16 = np.dtype(np.float16)


@functools.cache
def _engine() -> Any:
    """:mod:`._lowp_max_numba` on the compiled path, else None."""
    return compiled.load("_lowp_max_numba")


def max_f16(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray | None:
    """``np.max(x, axis=axes, keepdims=keepdims)`` for a float16 ``x`` over one axis, or None where the compiled
    loop does not apply."""
    if x.dtype != _F16 or len(axes) != 1 or x.size < MIN_ELEMENTS or not x.flags.c_contiguous:
        return None
    loops = _engine()
    if loops is None:
        return None
    axis = axes[0] % x.ndim
    outer, taps, inner = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1 :])
    out = np.empty((outer, inner), _F16)
    bits = np.uint16
    loops.max_along(x.reshape(outer, taps, inner).view(bits), out.view(bits))
    kept = x.shape[:axis] + ((1,) if keepdims else ()) + x.shape[axis + 1 :]
    return out.reshape(kept)
