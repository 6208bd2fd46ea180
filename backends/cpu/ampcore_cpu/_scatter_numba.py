"""The compiled loop of the cpu backend's ``scatter_add`` (importing this module imports numba; ImportError
without it).

``np.add.at`` does its additions one element at a time through a generic indexing machine: ~8 ns an element on
the GPT port's embedding gradient, (512, 64) rows into the vocabulary (2-core AMD EPYC Zen 5).  This loop does
the same float additions in the same order (row by row, in the order of ``indices``, onto zeros), so the bits
are ``np.add.at``'s, repeated indices included, and vectorizes along each row.
"""

from __future__ import annotations

from typing import Any

import numba


@numba.njit(nogil=True, cache=True, error_model="numpy")
def add_rows(src: Any, indices: Any, out: Any) -> int:  # pragma: no cover - compiled
    """``out[indices[i]] += src[i]`` for each ``i`` in order (``src`` (n, w) and ``out`` (m, w) C-contiguous, one
    float dtype; ``indices`` (n,) integers, negative ones from the end).  Returns -1, or the position of the
    first index outside [-m, m) (nothing after it is added)."""
    m = out.shape[0]
    for i in range(indices.size):
        j = indices[i]
        if j < 0:
            j += m
        if j < 0 or j >= m:
            return i
        for c in range(src.shape[1]):
            out[j, c] += src[i, c]
    return -1
