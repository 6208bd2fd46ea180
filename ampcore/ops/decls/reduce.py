"""Reductions built of the primitive ones: all and any, prod and cumprod, norm, amin, logsumexp and trace.

Products are multiplied pairwise (log2 n steps of one elementwise multiply over halves), so every backend runs
them and autograd differentiates them exactly, zeros included: no division by the input, no log of it.  Low
precision inputs are reduced in float32 and rounded once, as torch's kernels accumulate.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import dtypes as dt
from ...dispatch import guarded_kernels
from ...tensor_base import wrap
from ..declare import Domain, Example, Input, composite
from ..elementwise import binary, cast, compare, unary, where
from ..reduction import amax, normalize_axes, sum  # noqa: A004 - torch's op name, the reduction
from ..shape import cat, getitem, reshape
from .movement import diagonal

_ALL = slice(None)


def _full(x: Any, shape: tuple[int, ...], value: float) -> Any:
    k = guarded_kernels(x._backend, "full")
    return wrap(k.full(shape, value, x.dtype, x.device.index), x.device, x._backend)


def _opmath(x: Any) -> Any:
    """float16/bfloat16 in float32 (the accumulator the result is rounded from once), others as they are."""
    return cast(x, dt.float32) if x.dtype in dt.LOW_PRECISION_DTYPES else x


def _axes(dim: Any, ndim: int) -> tuple[int, ...]:
    return normalize_axes(dim, ndim)


# --------------------------------------------------------------------------- all, any
def _truth_count(x: Any, dim: Any, keepdim: bool, zero: bool) -> Any:
    """How many elements are zero (``zero``) or nonzero, over ``dim``: an int64 tensor."""
    hits = compare("eq" if zero else "ne", x, False if x.dtype is dt.bool_ else 0)
    return sum(hits, _axes(dim, x.ndim), keepdim)


@composite(
    "all",
    signature="all(input, dim=None, keepdim=False) -> Tensor",
    differentiable=False,
    example=Example((Input((3, 5), Domain(-1, 1, grid=0.5)),), {"dim": 1}),
    reference=lambda x, dim: np.all(x != 0, axis=dim),
)
def all(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001, A002 - torch's names
    """Whether every element over ``dim`` (all if None; an int or a tuple) is nonzero: a bool tensor."""
    return compare("eq", _truth_count(input, dim, keepdim, zero=True), 0)


@composite(
    "any",
    signature="any(input, dim=None, keepdim=False) -> Tensor",
    differentiable=False,
    example=Example((Input((3, 5), Domain(-1, 1, grid=0.5)),), {"dim": 0}),
    reference=lambda x, dim: np.any(x != 0, axis=dim),
)
def any(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001, A002 - torch's names
    """Whether any element over ``dim`` (all if None; an int or a tuple) is nonzero: a bool tensor."""
    return compare("gt", _truth_count(input, dim, keepdim, zero=False), 0)


# --------------------------------------------------------------------------- prod, cumprod
def _pairwise_product(x: Any, axis: int) -> Any:
    """The product along ``axis`` (kept, size 1): halves multiplied until one is left."""
    while x.shape[axis] > 1:
        n = x.shape[axis]
        lead = (_ALL,) * axis
        if n % 2:
            x = cat([x, _full(x, x.shape[:axis] + (1,) + x.shape[axis + 1 :], 1)], axis)
        x = binary("mul", getitem(x, lead + (slice(0, None, 2),)), getitem(x, lead + (slice(1, None, 2),)))
    if x.shape[axis] == 0:
        return _full(x, x.shape[:axis] + (1,) + x.shape[axis + 1 :], 1)
    return x


def _product_dtype(x: Any, dtype: Any) -> dt.DType:
    if dtype is not None:
        return dt.as_dtype(dtype)
    return x.dtype if x.dtype.is_floating_point else dt.int64  # torch: integer and bool products are int64


@composite(
    "prod",
    signature="prod(input, dim=None, keepdim=False, *, dtype=None) -> Tensor",
    example=Example((Input((4, 5), Domain(0.5, 1.5, signed=True)),), {"dim": 1}, n=5, n_grad=(5,)),
    reference=lambda x, dim: np.prod(x, axis=dim),
)
def prod(input: Any, dim: int | None = None, keepdim: bool = False, *, dtype: Any = None) -> Any:  # noqa: A002
    """The product of the elements over ``dim`` (all of them if None), in float32 for 16-bit inputs and rounded
    once (torch.prod); integer and bool inputs give int64."""
    target = _product_dtype(input, dtype)
    x = _opmath(cast(input, target))
    if dim is None:
        out = reshape(_pairwise_product(reshape(x, (-1,)), 0), ())
        out = reshape(out, (1,) * input.ndim) if keepdim else out
    else:
        (axis,) = normalize_axes(dim, x.ndim)
        out = _pairwise_product(x, axis)
        if not keepdim:
            out = reshape(out, x.shape[:axis] + x.shape[axis + 1 :])
    return cast(out, target)


@composite(
    "cumprod",
    signature="cumprod(input, dim, *, dtype=None) -> Tensor",
    example=Example((Input((3, 7), Domain(0.5, 1.5, signed=True)),), {"dim": 1}, n=7, n_grad=(7,)),
    reference=lambda x, dim: np.cumprod(x, axis=dim),
)
def cumprod(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002 - torch's argument name
    """Inclusive prefix products along ``dim`` (torch.cumprod), by doubling steps (Hillis and Steele), in
    float32 for 16-bit inputs and rounded once; differentiable through zeros."""
    target = _product_dtype(input, dtype)
    y = _opmath(cast(input, target))
    (axis,) = normalize_axes(dim, y.ndim)
    n, lead, step = y.shape[axis], (_ALL,) * axis, 1
    while step < n:
        head = getitem(y, lead + (slice(0, step),))
        tail = binary("mul", getitem(y, lead + (slice(step, n),)), getitem(y, lead + (slice(0, n - step),)))
        y = cat([head, tail], axis)
        step *= 2
    return cast(y, target)


# --------------------------------------------------------------------------- norm
def _safe_root(total: Any, p: float) -> Any:
    """``total ** (1/p)`` with a zero gradient where ``total`` is 0 (torch's norm backward: 0 at the origin)."""
    zero = compare("eq", total, 0.0)
    root = binary("pow", where(zero, 1.0, total), 1.0 / p) if p != 2 else unary("sqrt", where(zero, 1.0, total))
    return where(zero, 0.0, root)


def vector_norm(x: Any, p: float, axes: tuple[int, ...], keepdim: bool) -> Any:
    """The ``p``-norm of ``x`` over ``axes`` in ``x``'s dtype (callers pass float32 for 16-bit inputs)."""
    if p == 2:
        return _safe_root(sum(binary("mul", x, x), axes, keepdim), 2)
    a = unary("abs", x)
    if p == math.inf:
        return amax(a, axes, keepdim)
    if p == -math.inf:
        return unary("neg", amax(unary("neg", a), axes, keepdim))
    if p == 0:  # the count of nonzeros, kept in the graph (a zero gradient, as torch's) by the zeros' own branch
        return sum(where(compare("ne", a, 0.0), 1.0, binary("mul", a, 0.0)), axes, keepdim)
    if p == 1:
        return sum(a, axes, keepdim)
    zero = compare("eq", a, 0.0)
    powered = where(zero, 0.0, binary("pow", where(zero, 1.0, a), float(p)))
    return _safe_root(sum(powered, axes, keepdim), p)


def _norm_reference(x: np.ndarray, p: Any, dim: Any) -> np.ndarray:
    magnitude = np.where(np.real(x) < 0, -x, x)  # complex-step safe |x|
    return np.sum(magnitude**p, axis=dim) ** (1.0 / p) if p != 2 else np.sqrt(np.sum(x * x, axis=dim))


@composite(
    "norm",
    signature="norm(input, p='fro', dim=None, keepdim=False, dtype=None) -> Tensor",
    example=Example((Input((4, 6), Domain(0.25, 2, signed=True)),), {"p": 2, "dim": 1}, n=6, n_grad=(6,)),
    reference=_norm_reference,
)
def norm(input: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:  # noqa: A002
    """The ``p``-norm over ``dim`` (all elements if None): torch.norm's vector norms (``p`` a number, ``inf``,
    ``-inf``; ``'fro'`` is 2), computed in float32 for 16-bit inputs and rounded once; the gradient at a zero
    norm is 0, as torch's.  NotImplementedError for ``'nuc'``; TypeError for an integer input."""
    if p == "nuc":
        raise NotImplementedError("norm(p='nuc') needs singular values: not supported")
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise ValueError(f"norm(): unknown p {p!r}; use a number, inf, -inf or 'fro'")
    target = dt.as_dtype(dtype) if dtype is not None else input.dtype
    if not target.is_floating_point:
        raise TypeError(f"norm() needs a floating tensor, got {input.dtype.name}; call .float() first")
    x = _opmath(cast(input, target))
    return cast(vector_norm(x, float(p), _axes(dim, x.ndim), bool(keepdim)), target)


# --------------------------------------------------------------------------- amin, logsumexp, trace
@composite(
    "amin",
    signature="amin(input, dim=(), keepdim=False) -> Tensor",
    example=Example((Input((4, 7), Domain(-4, 4, grid=0.25)),), {"dim": 1}, rule="exact"),
    reference=lambda x, dim: np.min(x, axis=dim),
)
def amin(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002 - torch's argument name
    """The minimum over ``dim`` (all if None or ``()``); ties share the gradient (torch.amin)."""
    return unary("neg", amax(unary("neg", input), None if dim == () else dim, keepdim))


@composite(
    "logsumexp",
    signature="logsumexp(input, dim, keepdim=False) -> Tensor",
    example=Example((Input((3, 6), Domain(-4, 4)),), {"dim": 1}, n=6, n_grad=(6,)),
    reference=lambda x, dim: np.log(np.sum(np.exp(x), axis=dim)),
)
def logsumexp(input: Any, dim: Any, keepdim: bool = False) -> Any:  # noqa: A002 - torch's argument name
    """``log(sum(exp(input)))`` over ``dim`` without overflow (the maximum subtracted first; torch.logsumexp), in
    float32 for 16-bit inputs and rounded once."""
    x = _opmath(input if input.dtype.is_floating_point else cast(input, dt.float32))
    axes = _axes(dim, x.ndim)
    top = amax(x, axes, True).detach()  # a constant shift: the gradient is softmax's either way
    top = where(compare("eq", unary("abs", top), math.inf), 0.0, top)
    total = sum(unary("exp", binary("sub", x, top)), axes, True)
    out = binary("add", unary("log", total), top)
    if not keepdim:
        out = reshape(out, tuple(n for i, n in enumerate(x.shape) if i not in axes))
    return cast(out, input.dtype) if input.dtype.is_floating_point else out


@composite(
    "trace",
    signature="trace(input) -> Tensor",
    example=Example((Input((4, 5)),), n=4),
    reference=lambda x: np.trace(x),
)
def trace(input: Any) -> Any:  # noqa: A002 - torch's argument name
    """The sum of the main diagonal of a 2-D ``input`` (torch.trace)."""
    if input.ndim != 2:
        raise ValueError(f"trace() needs a 2-D tensor, got shape {input.shape}")
    return sum(diagonal(input))
