"""Reductions: sum, mean, max (all-reduce and per-axis with indices), argmax, cumsum."""

from __future__ import annotations

import builtins
from collections import namedtuple
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import dtypes as dt
from ..dispatch import call, primitive
from .base import Op
from .elementwise import cast

if TYPE_CHECKING:
    from ..autograd import Context
    from ..kernels import KernelTable

MaxResult = namedtuple("MaxResult", ["values", "indices"])


def normalize_axes(dim: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Axes as sorted non-negative ints; None means all. IndexError names the bad axis."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"dimension must be an int, got {d!r}")
        if not -builtins.max(ndim, 1) <= d < builtins.max(ndim, 1):
            raise IndexError(f"dimension {d} is out of range for a tensor with {ndim} dimension(s)")
        out.append(d % builtins.max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"dimension {dim!r} repeats an axis")
    return tuple(sorted(out)) if ndim else ()


def _kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    if len(axes) == len(shape):  # every axis reduced (a loss's .sum()): no generator on the hot path
        return (1,) * len(shape)
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


class Sum(Op):
    name = "sum"

    def forward(self, ctx: Context, k: KernelTable, x: Any, *, axes: tuple[int, ...], keepdims: bool) -> Any:
        ctx.shape, ctx.axes = k.shape_of(x), axes
        return k.sum(x, axes, keepdims)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        g = k.reshape(g, _kept_shape(ctx.shape, ctx.axes))
        return (k.broadcast_to(g, ctx.shape),)


class Amax(Op):
    """Max over axes; the gradient is shared evenly between tied maxima (torch's amax rule)."""

    name = "max"

    def forward(self, ctx: Context, k: KernelTable, x: Any, *, axes: tuple[int, ...], keepdims: bool) -> Any:
        y = k.max(x, axes, True)
        ctx.x, ctx.y, ctx.axes = x, y, axes
        return y if keepdims else k.reshape(y, tuple(n for i, n in enumerate(k.shape_of(y)) if i not in axes))

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        shape = k.shape_of(ctx.x)
        mask = k.cast(k.eq(ctx.x, ctx.y), k.dtype_of(ctx.x))
        count = k.sum(mask, ctx.axes, True)
        g = k.reshape(g, _kept_shape(shape, ctx.axes))
        return (k.mul(mask, k.div(g, count)),)


class MaxAlong(Op):
    """Max along one axis that routes the gradient to the first maximum (torch's ``max(dim)``)."""

    name = "max"

    def forward(self, ctx: Context, k: KernelTable, x: Any, idx: Any, *, axis: int, keepdims: bool) -> Any:
        ctx.shape, ctx.axis, ctx.idx = k.shape_of(x), axis, idx
        return k.max(x, (axis,), keepdims)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        return (_scatter_along(k, ctx, g), None)


def _scatter_along(k: KernelTable, ctx: Context, g: Any) -> Any:
    """Zeros of ``ctx.shape`` with ``g`` placed at index ``ctx.idx`` along ``ctx.axis``."""
    shape, axis = ctx.shape, ctx.axis
    n = shape[axis]
    rest = [s for i, s in enumerate(shape) if i != axis]
    rows = 1
    for s in rest:
        rows *= s
    # Move ``axis`` last and flatten: the element for row r is at r * n + idx[r].
    perm = tuple(i for i in range(len(shape)) if i != axis) + (axis,)
    flat_idx = k.add(k.mul(k.arange(0, rows, 1, dt.int64, ctx.device_index), n), k.reshape(ctx.idx, (rows,)))
    flat = k.scatter_add(k.reshape(g, (rows,)), flat_idx, 0, rows * n)
    moved = k.reshape(flat, tuple(rest) + (n,))
    inverse = tuple(sorted(range(len(shape)), key=lambda i: perm[i]))
    return k.transpose(moved, inverse)


class ArgMax(Op):
    name = "argmax"
    differentiable = False

    def forward(self, ctx: Context, k: KernelTable, x: Any, *, axis: int) -> Any:
        return k.argmax(x, axis)


class CumSum(Op):
    name = "cumsum"

    def forward(self, ctx: Context, k: KernelTable, x: Any, *, axis: int) -> Any:
        ctx.axis, ctx.ndim = axis, len(k.shape_of(x))
        return k.cumsum(x, axis)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        flip = (slice(None),) * ctx.axis + (slice(None, None, -1),)
        return (k.slice(k.cumsum(k.slice(g, flip), ctx.axis), flip),)


SUM, AMAX, MAX_ALONG, ARGMAX, CUMSUM = Sum(), Amax(), MaxAlong(), ArgMax(), CumSum()


@primitive("sum")
def sum(x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:  # noqa: A001 - torch name
    """Sum over ``dim`` (all axes if None), accumulated in float32 or better."""
    if dtype is not None:
        x = cast(x, dt.as_dtype(dtype))
    return call(SUM, x, axes=normalize_axes(dim, x.ndim), keepdims=bool(keepdim))


@primitive("mean")
def mean(x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    """Mean over ``dim`` (in ``dtype`` where given, as torch's); integer input raises as in torch (cast to a float
    dtype first, or pass ``dtype``).

    float16/bfloat16 are summed and divided in float32 and rounded once: a
    float16 sum of 1e5 ones would overflow (65504) before the division.
    """
    if dtype is not None:
        x = cast(x, dt.as_dtype(dtype))
    if not x.dtype.is_floating_point:
        raise TypeError(f"mean() needs a floating tensor, got {x.dtype.name}; call .float() first")
    axes = normalize_axes(dim, x.ndim)
    count = 1
    for a in axes:
        count *= x.shape[a]
    low = x.dtype in dt.LOW_PRECISION_DTYPES
    total = sum(x, axes, keepdim, dtype=dt.float32 if low else None)
    out = total / float(count) if count else total * float("nan")
    return cast(out, x.dtype) if low else out


@primitive("amax")
def amax(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """Maximum over ``dim`` (all axes if None); ties share the gradient."""
    axes = normalize_axes(dim, x.ndim)
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"max() of an empty dimension (shape {x.shape}) has no identity")
    return call(AMAX, x, axes=axes, keepdims=bool(keepdim))


@primitive("max")
def max(x: Any, dim: int | None = None, keepdim: bool = False) -> Any:  # noqa: A001 - torch name
    """``max()`` -> the maximum; ``max(dim)`` -> (values, indices) like torch."""
    if dim is None:
        return amax(x)
    (axis,) = normalize_axes(dim, x.ndim)
    if x.shape[axis] == 0:
        raise ValueError(f"max() of an empty dimension (shape {x.shape}) has no identity")
    idx = argmax(x, axis, keepdim=False)
    values = call(MAX_ALONG, x, idx, axis=axis, keepdims=bool(keepdim))
    return MaxResult(values, idx.reshape(values.shape) if keepdim else idx)


@primitive("argmax")
def argmax(x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    """Index of the first maximum along ``dim`` (of the flattened tensor if None)."""
    if dim is None:
        return argmax(x.reshape(-1), 0)
    (axis,) = normalize_axes(dim, x.ndim)
    out = call(ARGMAX, x, axis=axis)
    if keepdim:
        out = out.reshape(tuple(1 if i == axis else n for i, n in enumerate(x.shape)))
    return out


@primitive("cumsum")
def cumsum(x: Any, dim: int) -> Any:
    """Inclusive prefix sum along ``dim``."""
    (axis,) = normalize_axes(dim, x.ndim)
    return call(CUMSUM, x, axis=axis)
