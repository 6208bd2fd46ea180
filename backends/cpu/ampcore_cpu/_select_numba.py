"""The compiled loops of :mod:`.select` (importing this module imports numba; ImportError without it), and the
table lookup the conversions share (:func:`gather`).

``where`` on the values' bits (unsigned integers of their width): a select moves a value exactly, NaN payloads
and -0.0 included, and the branch-free body vectorises (a random mask, as the ReLU backward's, mispredicts).
"""

from __future__ import annotations

from typing import Any

import numba

_OPTS = {"nogil": True, "cache": True, "error_model": "numpy"}


@numba.njit(**_OPTS)
def select(cond: Any, a: Any, b: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``out[i] = a[i] if cond[i] else b[i]`` (all flat, one length; ``cond`` as uint8)."""
    for i in range(out.size):
        out[i] = a[i] if cond[i] else b[i]


@numba.njit(**_OPTS)
def select_scalar(cond: Any, a: Any, b: Any, a_first: bool, out: Any) -> None:  # pragma: no cover - compiled
    """``out[i] = a[i] if cond[i] else b`` where ``a_first``, else ``b if cond[i] else a[i]`` (``b``: one value's
    bits)."""
    if a_first:
        for i in range(out.size):
            out[i] = a[i] if cond[i] else b
    else:
        for i in range(out.size):
            out[i] = b if cond[i] else a[i]


@numba.njit(**_OPTS)
def gather(codes: Any, table: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``out[i] = table[codes[i]]`` (all flat): values looked up by their codes, numba compiling one loop per
    width: float16 bits to float32 bits (:mod:`.halfconv`), float8 codes to scaled float32 (:mod:`.float8`),
    16-bit GELU results by their inputs (:mod:`.gelu32`)."""
    for i in range(codes.size):
        out[i] = table[codes[i]]
