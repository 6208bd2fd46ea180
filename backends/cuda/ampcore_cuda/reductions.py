"""Reductions through CuPy: ``sum`` and ``cumsum`` accumulate in float32 (float64 for float64, int64 for
bool/int), ``max`` propagates NaN, ``argmax`` gives the first maximum.  16-bit inputs are widened exactly
and the result rounded once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CuArray
from .convert import down, up
from .runtime import import_cupy

__all__ = ["kernels"]


def _accumulator(dtype: dt.DType) -> tuple[Any, dt.DType]:
    """(CuPy accumulation dtype, result dtype)."""
    if not dtype.is_floating_point:
        return np.int64, dt.int64
    return (np.float64 if dtype == dt.float64 else np.float32), dtype


def sum_(x: CuArray, axes: Sequence[int], keepdims: bool = False) -> CuArray:
    """Sum over ``axes``; bool/int -> int64."""
    cp = import_cupy()
    acc, result = _accumulator(x.dtype)
    with cp.cuda.Device(x.device_index):
        return down(cp.asarray(cp.sum(up(x), axis=tuple(axes), dtype=acc, keepdims=keepdims)), result)


def max_(x: CuArray, axes: Sequence[int], keepdims: bool = False) -> CuArray:
    """Maximum over ``axes`` (NaN propagates)."""
    cp = import_cupy()
    with cp.cuda.Device(x.device_index):
        return down(cp.asarray(cp.max(up(x), axis=tuple(axes), keepdims=keepdims)), x.dtype)


def argmax(x: CuArray, axis: int) -> CuArray:
    """int64 index of the first maximum along ``axis``."""
    cp = import_cupy()
    with cp.cuda.Device(x.device_index):
        return CuArray(cp.asarray(cp.argmax(up(x), axis=axis)).astype(np.int64, copy=False), dt.int64)


def cumsum(x: CuArray, axis: int) -> CuArray:
    """Inclusive prefix sum along ``axis`` (float32+ accumulation)."""
    cp = import_cupy()
    acc, result = _accumulator(x.dtype)
    with cp.cuda.Device(x.device_index):
        return down(cp.cumsum(up(x), axis=axis, dtype=acc), result)


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    return {"sum": sum_, "max": max_, "argmax": argmax, "cumsum": cumsum}
