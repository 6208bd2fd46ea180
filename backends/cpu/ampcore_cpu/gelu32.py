"""The exact-erf GELU and its backward on the compiled path through :mod:`._gelu32_numba` (vectorized): the same
bits as the kernel they wrap (:mod:`._gelu_numba`'s libm loops, their float64 value rounded once to the dtype).

:func:`float32_first` wraps the fused kernel the backend had.  float32 inputs
(``approximate="none"``, at least :data:`MIN_ELEMENTS`) take the vectorized
loops, which write float32 directly.  float16/bfloat16 inputs take them block
by block (float16 through ``gelu16``, which keeps float16 midpoints apart):
whole-array float32 copies of the inputs and a float64 result took 18 MiB at
the transformer's GELU backward, more than the float32 step now holds at its
peak.  Everything else (the tanh form, small arrays, mixed dtypes, the NumPy
fallback) runs the wrapped kernel.

1M float32 values of N(0, 4), against :mod:`._gelu_numba`: forward 40 -> 10
ms, backward 53 -> 14 ms; 2M float16 / bfloat16 backward, rounding included,
79 -> 20 / 62 -> 18 ms (2-core Xeon with AVX-512 under a load average of 3-6,
the two interleaved in one process).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import compiled
from .kernels import CHUNK, LOW, _down, _up

MIN_ELEMENTS = 1024  # below this the wrapped kernel's fixed cost is no worse
_F32 = np.dtype(np.float32)


@functools.cache
def _loops() -> Any:
    """:mod:`._gelu32_numba` on the compiled path, else None (:mod:`.compiled`)."""
    return compiled.load("_gelu32_numba")


def _flats(arrays: list[np.ndarray]) -> list[np.ndarray]:
    x = arrays[0]
    return [np.ascontiguousarray(np.broadcast_to(a, x.shape)).reshape(-1) for a in arrays]


def _float32(name: str, arrays: list[np.ndarray]) -> np.ndarray | None:
    loops = _loops()
    if loops is None:
        return None
    out = np.empty(arrays[0].shape, _F32)
    getattr(loops, name)(*_flats(arrays), out.reshape(-1), np.empty(out.size, np.bool_))
    return out


def _blocked_16bit(name: str, arrays: list[np.ndarray]) -> np.ndarray | None:
    """The 16-bit rounding of the libm loops' float64 value, :data:`~.kernels.CHUNK` elements at a time: float16
    through the loops that keep float16 midpoints apart (``gelu16``), bfloat16 through the float32 loops (ml_dtypes
    casts float64 to bfloat16 through float32), each block's float32 result rounded by :func:`~.kernels._down`."""
    loops = _loops()
    if loops is None:
        return None
    x = arrays[0]
    loop = getattr(loops, name.replace("gelu", "gelu16") if x.dtype == np.float16 else name)
    flats = _flats(arrays)
    out = np.empty(x.size, x.dtype)
    block, ok = np.empty(min(CHUNK, x.size), _F32), np.empty(min(CHUNK, x.size), np.bool_)
    for start in range(0, x.size, CHUNK):
        parts = [_up(f[start : start + CHUNK]) for f in flats]
        n = parts[0].size
        loop(*parts, block[:n], ok[:n])
        out[start : start + n] = _down(block[:n], x.dtype)
    return out.reshape(x.shape)


def float32_first(name: str, fallback: Callable[..., Any]) -> Callable[..., Any]:
    """The fused kernel ``name`` ("gelu" or "gelu_backward"): the vectorized float32 loop or the blocked
    16-bit one where it applies, else ``fallback`` (the kernel it replaces, which gives the same bits)."""

    def kernel(*args: Any) -> Any:
        *arrays, approximate = args
        x = arrays[0]
        dtype = getattr(x, "dtype", None)
        out = None
        if approximate == "none" and x.size >= MIN_ELEMENTS and all(getattr(a, "dtype", None) == dtype for a in arrays):
            if dtype == _F32:
                out = _float32(name, arrays)
            elif dtype in LOW:
                out = _blocked_16bit(name, arrays)
        return fallback(*args) if out is None else out

    kernel.__name__ = name
    return kernel
