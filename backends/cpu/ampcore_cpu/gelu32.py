"""The exact-erf GELU and its backward on float32 arrays through :mod:`._gelu32_numba` (vectorized, same bits).

:func:`float32_first` wraps the fused kernel the backend had: float32 inputs
(``approximate="none"``, at least :data:`MIN_ELEMENTS`) on the compiled path
take the vectorized loops, which write float32 directly; everything else
(float16/bfloat16 inputs, whose float64 value :mod:`.fused_nn` rounds once to
their own dtype, the tanh form, small arrays, the NumPy fallback) runs the
wrapped kernel.  1M float32 values of N(0, 4), against :mod:`._gelu_numba`:
forward 40 -> 10 ms, backward 53 -> 14 ms (2-core Xeon with AVX-512 under a
load average of 6, the two interleaved in one process).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import compiled

MIN_ELEMENTS = 1024  # below this the wrapped kernel's fixed cost is no worse
_F32 = np.dtype(np.float32)


@functools.cache
def _loops() -> Any:
    """:mod:`._gelu32_numba` on the compiled path, else None (:mod:`.compiled`)."""
    return compiled.load("_gelu32_numba")


def float32_first(name: str, fallback: Callable[..., Any]) -> Callable[..., Any]:
    """The fused kernel ``name`` ("gelu" or "gelu_backward"): the vectorized float32 loop where it applies,
    else ``fallback`` (the kernel it replaces, which gives the same bits)."""

    def kernel(*args: Any) -> Any:
        *arrays, approximate = args
        x = arrays[0]
        if approximate != "none" or x.size < MIN_ELEMENTS or any(getattr(a, "dtype", None) != _F32 for a in arrays):
            return fallback(*args)
        loops = _loops()
        if loops is None:
            return fallback(*args)
        flats = [np.ascontiguousarray(np.broadcast_to(a, x.shape)).reshape(-1) for a in arrays]
        out = np.empty(x.shape, _F32)
        getattr(loops, name)(*flats, out.reshape(-1), np.empty(x.size, np.bool_))
        return out

    kernel.__name__ = name
    return kernel
