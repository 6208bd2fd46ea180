"""Similarity and normalisation: normalize and cosine_similarity, plus the vector norm they share.

float16/bfloat16 inputs are computed in float32 and rounded once on output,
as torch's float32-accumulating norm kernels do.  Norms follow torch's
``linalg.vector_norm``, including its gradient at a zero norm (0, not the
NaN a plain sqrt(sum x**2) would give).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ... import dtypes as dt
from ...dispatch import call, composite
from ...ops import broadcast_shapes
from ...ops import elementwise as ew
from ...ops.base import Op
from ...ops.reduction import normalize_axes
from ...tensor import Tensor
from ._utils import check_float, check_tensor, opmath

__all__ = ["normalize", "cosine_similarity"]


@composite("normalize")
def normalize(
    input: Tensor,  # noqa: A002 - torch's argument name
    p: float = 2.0,
    dim: int | Sequence[int] = 1,
    eps: float = 1e-12,
) -> Tensor:
    """x / max(||x||_p, eps) along ``dim`` (an int or a tuple of ints), as torch.

    ``p`` may be any real number, ``inf`` or ``-inf``.  A zero vector stays
    zero.  Raises TypeError for non-float input or a non-numeric ``p`` and
    IndexError for a bad ``dim``.
    """
    check_float(input, "input", "normalize")
    check_p(p, "normalize")
    axes = normalize_axes(dim, input.ndim)
    x = opmath(input)
    return ew.cast(x / clamp_min(vector_norm(x, p, axes), eps), input.dtype)


@composite("cosine_similarity")
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))) along ``dim``: torch's current formula.

    Each vector is normalised before the product, so the result stays in
    [-1, 1] and x1 . x2 never overflows.  As in torch, the clamp is not part
    of the gradient (torch clamps in place without grad): the norm's
    gradient flows as if unclamped.  x1 and x2 broadcast; integer operands
    are converted to their floating common dtype.  Raises TypeError if the
    common dtype is not floating and IndexError for a bad ``dim``.
    """
    check_tensor(x1, "x1", "cosine_similarity")
    check_tensor(x2, "x2", "cosine_similarity")
    common = dt.result_type(x1.dtype, x2.dtype)
    if not common.is_floating_point:
        raise TypeError(
            f"cosine_similarity() needs a floating common dtype, got {x1.dtype.name} and "
            f"{x2.dtype.name}; convert one with .float()"
        )
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"cosine_similarity() dim must be an int, got {dim!r}")
    shape = broadcast_shapes(x1.shape, x2.shape)
    a, b = (opmath(ew.cast(t, common)).expand(shape) for t in (x1, x2))
    axes = normalize_axes(dim, len(shape))
    a = a / call(_CLAMP_MIN_KEEP_GRAD, vector_norm(a, 2, axes), floor=float(eps))
    b = b / call(_CLAMP_MIN_KEEP_GRAD, vector_norm(b, 2, axes), floor=float(eps))
    return ew.cast((a * b).sum(axes), common)


# --------------------------------------------------------------------------- shared helpers
def vector_norm(x: Tensor, p: float, axes: tuple[int, ...], keepdim: bool = True) -> Tensor:
    """torch.linalg.vector_norm of a floating ``x`` over ``axes`` (already normalised).

    p = 2 is sqrt(sum x**2), p = 1 sum |x|, p = inf max |x|, p = -inf min |x|,
    p = 0 the count of non-zeros (no gradient), any other p (sum |x|**p)**(1/p).
    The root is taken through a mask so a zero norm gets gradient 0, as
    torch's norm backward gives; NaN still propagates.
    """
    if p == 2:
        return _root((x * x).sum(axes, keepdim), 0.5)
    if p == 1:
        return x.abs().sum(axes, keepdim)
    if p == math.inf:
        return x.abs().amax(axes, keepdim)
    if p == -math.inf:
        return -(-x.abs()).amax(axes, keepdim)
    if p == 0:
        return ew.cast(x != 0, x.dtype).sum(axes, keepdim)
    return _root((x.abs() ** float(p)).sum(axes, keepdim), 1.0 / p)


def check_p(p: Any, op: str) -> float:
    """``p`` if it is a real number (int or float, not bool), else TypeError naming it."""
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"{op}(): p must be a real number (e.g. 2, 1 or float('inf')), got {p!r}")
    return p


def clamp_min(x: Tensor, floor: float) -> Tensor:
    """max(x, floor) with torch's clamp_min gradient: all of it where x >= floor (ties included); NaN stays."""
    return ew.where(x < floor, floor, x)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float, eps: float) -> Tensor:
    """torch's pairwise_distance: ||x1 - x2 + eps||_p over the last dimension of the broadcast shape."""
    ndim = max(x1.ndim, x2.ndim)
    return vector_norm(x1 - x2 + eps, p, normalize_axes(ndim - 1, ndim), keepdim=False)


def _root(total: Tensor, power: float) -> Tensor:
    """total ** power, with value and gradient 0 where total == 0 (a double where keeps the gradient finite)."""
    zero = total == 0
    safe = ew.where(zero, 1.0, total)
    return ew.where(zero, 0.0, safe.sqrt() if power == 0.5 else safe**power)


class _ClampMinKeepGrad(Op):
    """max(x, floor) whose gradient is the identity: torch's ``clamp_min_`` under no_grad on a norm."""

    name = "clamp_min_keep_grad"

    def forward(self, ctx, k, x, *, floor):
        return k.maximum(x, floor)

    def backward(self, ctx, k, g):
        return (g,)


_CLAMP_MIN_KEEP_GRAD = _ClampMinKeepGrad()
