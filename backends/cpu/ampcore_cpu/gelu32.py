"""The exact-erf GELU and its backward on the compiled path through :mod:`._gelu32_numba` (vectorized): the same
bits as the kernel they wrap (:mod:`._gelu_numba`'s libm loops, their float64 value rounded once to the dtype).

:func:`float32_first` wraps the fused kernel the backend had.  float32 inputs
(``approximate="none"``, at least :data:`MIN_ELEMENTS`) take the vectorized
loops, which write float32 directly.  float16/bfloat16 inputs take
:mod:`._gelu16_numba`'s tables of all 65536 inputs, made once per dtype by the
libm loops: a gather forward, one float64 product per element backward, 16-bit
values in and out (whole-array float32 copies of the inputs and a float64
result had taken 18 MiB at the transformer's GELU backward, more than the
float32 step holds at its peak).  Everything else (the tanh form, small arrays,
mixed dtypes, the NumPy fallback) runs the wrapped kernel.

1M float32 values of N(0, 4), against :mod:`._gelu_numba`: forward 40 -> 10
ms, backward 53 -> 14 ms (2-core Xeon with AVX-512 under a load average of 3-6,
the two interleaved in one process).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import compiled
from .kernels import LOW

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


@functools.cache
def _tables(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every value of the 16-bit ``dtype``, by its bits: its GELU, the libm loop's float64 value rounded once to
    ``dtype`` (the bits of the kernel this replaces, :func:`float32_first`'s ``fallback``), and the float64 factor
    ``Phi(x) + x phi(x)`` that loop's backward multiplies ``gy`` by (its value at ``gy = 1``, exactly)."""
    libm = compiled.load("_gelu_numba")
    assert libm is not None  # only on the compiled path
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype).astype(_F32)  # exact
    value, slope = np.empty(x.size, np.float64), np.empty(x.size, np.float64)
    libm.gelu(x, value)
    libm.gelu_backward(x, np.ones(x.size, _F32), slope)
    return value.astype(dtype).view(np.uint16), slope


def _tabled_16bit(name: str, arrays: list[np.ndarray]) -> np.ndarray | None:
    """The 16-bit result by :mod:`._gelu16_numba`'s tables: 16-bit operands in, the 16-bit result out, no wider
    copy (``tests/test_cpu_gelu32.py`` holds the kernel to its output and one byte per element)."""
    loops = compiled.load("_gelu16_numba")
    if loops is None:
        return None
    x = arrays[0]
    value, slope = _tables(x.dtype)
    bits = [f.view(np.uint16) for f in _flats(arrays)]
    out = np.empty(x.shape, x.dtype)
    if name == "gelu":
        compiled.load("_select_numba").gather(bits[0], value, out.reshape(-1).view(np.uint16))
    else:
        backward = loops.backward_f16 if x.dtype == np.float16 else loops.backward_bf16
        backward(bits[0], bits[1], slope, out.reshape(-1).view(np.uint16))
    return out


def float32_first(name: str, fallback: Callable[..., Any]) -> Callable[..., Any]:
    """The fused kernel ``name`` ("gelu" or "gelu_backward"): the vectorized float32 loop or the 16-bit tables
    where they apply, else ``fallback`` (the kernel it replaces, which gives the same bits)."""

    def kernel(*args: Any) -> Any:
        *arrays, approximate = args
        x = arrays[0]
        dtype = getattr(x, "dtype", None)
        out = None
        if approximate == "none" and x.size >= MIN_ELEMENTS and all(getattr(a, "dtype", None) == dtype for a in arrays):
            if dtype == _F32:
                out = _float32(name, arrays)
            elif dtype in LOW:
                out = _tabled_16bit(name, arrays)
        return fallback(*args) if out is None else out

    kernel.__name__ = name
    return kernel
