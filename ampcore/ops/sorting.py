"""Sorting: sort, argsort and topk, with gradients through the values.

No primitive kernel sorts, so the reference composition reads the values on
the host once (a counted host sync, ``"sort"``), orders them there with NumPy's
stable sort, and gathers the values on the device with the resulting indices
(:func:`~.indexing.take_along_dim`, whose backward scatters the gradient back).

Ties: the order is always stable (equal elements keep their original order,
also with ``descending=True``), which is what torch guarantees for
``sort(stable=True)`` and one of the orders it allows otherwise; ``topk``
picks the lower index among equal values.  NaN sorts as the largest value
(last ascending, first descending), as in torch.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..dispatch import primitive
from ..syncs import to_host
from .indexing import take_along_dim
from .reduction import normalize_axes
from .shape import getitem, reshape

__all__ = ["SortResult", "TopKResult", "argsort", "sort", "topk"]

SortResult = namedtuple("SortResult", ["values", "indices"])
TopKResult = namedtuple("TopKResult", ["values", "indices"])


def _host_argsort(x: Any, axis: int, descending: bool) -> np.ndarray:
    """Stable int64 indices that order ``x`` along ``axis`` (one host read)."""
    a = to_host(x, "sort")
    if x.dtype in dt.LOW_PRECISION_DTYPES:
        a = a.astype(np.float32)  # exact: float16 and bfloat16 widen to float32 without rounding
    if not descending:
        return np.argsort(a, axis=axis, kind="stable").astype(np.int64)
    # Stable descending: a stable ascending sort of the reversed axis, read backwards, keeps equal
    # elements in their original order (negating would not: -0.0, integer minimum, NaN).
    n = a.shape[axis]
    rev = np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)
    return (n - 1 - rev).astype(np.int64)


def _check_dim(x: Any, dim: int) -> int:
    (axis,) = normalize_axes(dim, x.ndim) if x.ndim else normalize_axes(dim, 1)  # a 0-d tensor: dim 0 or -1
    return axis


@primitive("argsort")
def argsort(x: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
    """Indices (int64) that sort ``x`` along ``dim``; always stable (see the module docstring)."""
    axis = _check_dim(x, dim)
    if x.ndim == 0:
        return reshape(argsort(reshape(x, (1,))), ())
    return x._new_tensor(_host_argsort(x, axis, bool(descending)), dt.int64)


@primitive("sort")
def sort(x: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> SortResult:
    """torch.sort: ``(values, indices)`` along ``dim``; the gradient flows through the values."""
    axis = _check_dim(x, dim)
    if x.ndim == 0:
        values, indices = sort(reshape(x, (1,)))
        return SortResult(reshape(values, ()), reshape(indices, ()))
    indices = argsort(x, axis, descending)
    return SortResult(take_along_dim(x, indices, axis), indices)


@primitive("topk")
def topk(x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> TopKResult:  # noqa: A002
    """torch.topk: the ``k`` largest (``largest=False``: smallest) along ``dim`` as ``(values, indices)``,
    always in sorted order; ties keep the lower index first.  The gradient flows through the values."""
    axis = _check_dim(x, dim)
    n = x.shape[axis] if x.ndim else 1
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= n:
        raise ValueError(f"topk(): k must be an int in [0, {n}] for dimension {axis} of shape {x.shape}, got {k!r}")
    if x.ndim == 0:
        values, indices = topk(reshape(x, (1,)), k, 0, largest)
        shape = () if k else (0,)
        return TopKResult(reshape(values, shape), reshape(indices, shape))
    order = x._new_tensor(_host_argsort(x, axis, bool(largest)), dt.int64)
    indices = getitem(order, (slice(None),) * axis + (slice(0, k),))
    return TopKResult(take_along_dim(x, indices, axis), indices)
