"""The exact-erf GELU and its backward on the compiled path: float32 through :mod:`._gelu32_numba` (vectorized),
float16/bfloat16 block by block; the same bits as the kernel they wrap.

:func:`float32_first` wraps the fused kernel the backend had.  float32 inputs
(``approximate="none"``, at least :data:`MIN_ELEMENTS`) take the vectorized
loops, which write float32 directly.  float16/bfloat16 inputs take
:mod:`._gelu_numba`'s loops as before (their float64 value is rounded once to
the 16-bit dtype, which the float32 loops' result cannot be), but block by
block: whole-array float32 copies of the inputs and a float64 result took 18
MiB at the transformer's GELU backward, more than the float32 step now holds
at its peak.  Everything else (the tanh form, small arrays, mixed dtypes, the
NumPy fallback) runs the wrapped kernel.  1M float32 values of N(0, 4), against :mod:`._gelu_numba`:
forward 40 -> 10 ms, backward 53 -> 14 ms (2-core Xeon with AVX-512 under a
load average of 6, the two interleaved in one process).
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


@functools.cache
def _libm_loops() -> Any:
    """:mod:`._gelu_numba` (the float64 libm loops) on the compiled path, else None."""
    return compiled.load("_gelu_numba")


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
    """What ``_lowp`` over the libm loop gives (widen to float32, float64 result, one rounding to the dtype),
    :data:`~.kernels.CHUNK` elements at a time."""
    loops = _libm_loops()
    if loops is None:
        return None
    x = arrays[0]
    flats, loop = _flats(arrays), getattr(loops, name)
    out = np.empty(x.size, x.dtype)
    wide = np.empty(min(CHUNK, x.size), np.float64)
    for start in range(0, x.size, CHUNK):
        parts = [_up(f[start : start + CHUNK]) for f in flats]
        block = wide[: parts[0].size]
        loop(*parts, block)
        out[start : start + CHUNK] = _down(block, x.dtype)
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
