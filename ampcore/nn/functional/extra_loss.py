"""More losses from torch's autocast lists: kl_div, huber_loss, margin_ranking_loss, soft_margin_loss,
hinge_embedding_loss, poisson_nll_loss, cosine_embedding_loss and triplet_margin_loss.

Each is torch's formula with torch's argument list; the deprecated
``size_average``/``reduce`` arguments are refused where torch still has
them.  float16/bfloat16 operands are computed in float32, reduced there and
rounded once to the result dtype, as a float32-accumulating kernel would.
Where torch's formula overflows or divides 0 by 0 (log1p(exp(z)) for large
z, the 0 * log(0) terms of kl_div and the Stirling term), these use the
stable or masked form instead, with the same value wherever torch is finite.
"""

from __future__ import annotations

import math
from typing import Any

from ...dispatch import call, composite
from ...ops import elementwise as ew
from ...tensor import Tensor
from ._bce_ops import LOG1P
from ._utils import apply_reduction, check_float, check_reduction, check_tensor, legacy_reduction, opmath
from .loss import _compute_dtypes, _difference, _max0
from .similarity import check_p, clamp_min, pairwise_distance

__all__ = [
    "kl_div",
    "huber_loss",
    "margin_ranking_loss",
    "soft_margin_loss",
    "hinge_embedding_loss",
    "poisson_nll_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
]

KL_REDUCTIONS = ("none", "batchmean", "sum", "mean")
_COSINE_EPS = 1e-12  # torch's EPSILON added to each squared magnitude in cosine_embedding_loss


@composite("kl_div")
def kl_div(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """KL divergence of ``target`` from log-probabilities ``input``: target * (log target - input).

    ``log_target=True`` takes log-probability targets: exp(t) * (t - input).
    0 * log 0 counts as 0 (torch's xlogy), and so does its gradient (torch's
    is NaN there).  ``reduction="batchmean"`` divides the sum by
    input.shape[0] (the true KL per sample); ``"mean"`` divides by every
    element, as torch.  Raises ValueError for another reduction, TypeError
    for non-float operands.
    """
    if size_average is not None or reduce is not None:
        legacy_reduction(size_average, reduce, "mean", "kl_div")
    if reduction not in KL_REDUCTIONS:
        valid = ", ".join(repr(r) for r in KL_REDUCTIONS)
        raise ValueError(f"kl_div(): unknown reduction {reduction!r}; valid reductions are {valid}")
    check_float(input, "input", "kl_div")
    check_float(target, "target", "kl_div")
    compute, out = _compute_dtypes(input, target)
    x, t = ew.cast(input, compute), ew.cast(target, compute)
    if log_target:
        loss = t.exp() * (t - x)
    else:
        loss = t * ew.where(t == 0, 1.0, t).log() - t * x
    if reduction == "batchmean":
        total = loss.sum()
        if input.ndim:
            total = total / float(input.shape[0]) if input.shape[0] else total * math.nan
        return ew.cast(total, out)
    return ew.cast(apply_reduction(loss, reduction), out)


@composite("huber_loss")
def huber_loss(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Tensor | None = None,
) -> Tensor:
    """0.5 d**2 where |d| < delta, else delta (|d| - 0.5 delta), with d = input - target.

    ``weight`` (torch >= 2.6; the input's shape) scales each element before
    the reduction.  Warns, like torch, when the shapes differ and broadcast.
    Raises ValueError for delta <= 0 or a mis-shaped weight.
    """
    reduction = check_reduction(reduction, "huber_loss")
    if not delta > 0:
        raise ValueError(f"huber_loss(): delta must be > 0, got {delta!r}")
    check_float(input, "input", "huber_loss")
    check_tensor(target, "target", "huber_loss")
    if weight is not None and check_tensor(weight, "weight", "huber_loss").shape != input.shape:
        raise ValueError(f"huber_loss(): weight of shape {weight.shape} must have the input's shape {input.shape}")
    compute, out = _compute_dtypes(input, target, weight)
    z = _difference("huber_loss", ew.cast(input, compute), ew.cast(target, compute)).abs()
    loss = ew.where(z < delta, z * z * 0.5, (z - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * ew.cast(weight, compute)
    return ew.cast(apply_reduction(loss, reduction), out)


@composite("margin_ranking_loss")
def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, -target * (input1 - input2) + margin): target 1 asks input1 to rank higher, -1 lower.

    The three tensors broadcast but must have the same number of dimensions,
    as torch.  Raises ValueError otherwise, TypeError for non-float inputs.
    """
    reduction = legacy_reduction(size_average, reduce, reduction, "margin_ranking_loss")
    check_float(input1, "input1", "margin_ranking_loss")
    check_float(input2, "input2", "margin_ranking_loss")
    check_tensor(target, "target", "margin_ranking_loss")
    if not input1.ndim == input2.ndim == target.ndim:
        raise ValueError(
            f"margin_ranking_loss(): input1, input2 and target must have the same number of "
            f"dimensions, got shapes {input1.shape}, {input2.shape} and {target.shape}"
        )
    compute, out = _compute_dtypes(input1, input2, target)
    x1, x2, t = (ew.cast(v, compute) for v in (input1, input2, target))
    loss = clamp_min(-t * (x1 - x2) + margin, 0.0)
    return ew.cast(apply_reduction(loss, reduction), out)


@composite("soft_margin_loss")
def soft_margin_loss(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """log(1 + exp(-target * input)) for targets of +-1 (two-class logistic loss); operands broadcast.

    Computed stably as max(z, 0) + log1p(exp(-|z|)): finite where torch's
    log1p(exp(z)) overflows.  Raises TypeError for non-float input.
    """
    reduction = legacy_reduction(size_average, reduce, reduction, "soft_margin_loss")
    check_float(input, "input", "soft_margin_loss")
    check_tensor(target, "target", "soft_margin_loss")
    compute, out = _compute_dtypes(input, target)
    z = -ew.cast(input, compute) * ew.cast(target, compute)
    loss = _max0(z) + call(LOG1P, (-z.abs()).exp())
    return ew.cast(apply_reduction(loss, reduction), out)


@composite("hinge_embedding_loss")
def hinge_embedding_loss(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    margin: float = 1.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """x where target is 1, max(0, margin - x) where target is -1 (input is usually a distance).

    torch's exact rule for other target values: the first term is kept where
    target != -1, the second where target != 1.  The result has the input's
    dtype.  Raises TypeError for non-float input.
    """
    reduction = legacy_reduction(size_average, reduce, reduction, "hinge_embedding_loss")
    check_float(input, "input", "hinge_embedding_loss")
    check_tensor(target, "target", "hinge_embedding_loss")
    x = opmath(input)
    loss = ew.where(target != 1, clamp_min(margin - x, 0.0), 0.0) + ew.where(target != -1, x, 0.0)
    return ew.cast(apply_reduction(loss, reduction), input.dtype)


@composite("poisson_nll_loss")
def poisson_nll_loss(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average: Any = None,
    eps: float = 1e-8,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Poisson negative log-likelihood: exp(x) - t x for log-rate ``input`` (``log_input=True``),
    else x - t log(x + eps).

    ``full=True`` adds the Stirling term t log t - t + 0.5 log(2 pi t) where
    t > 1.  Integer (count) targets are fine.  Raises TypeError for non-float input.
    """
    reduction = legacy_reduction(size_average, reduce, reduction, "poisson_nll_loss")
    check_float(input, "input", "poisson_nll_loss")
    check_tensor(target, "target", "poisson_nll_loss")
    compute, out = _compute_dtypes(input, target)
    x, t = ew.cast(input, compute), ew.cast(target, compute)
    loss = x.exp() - t * x if log_input else x - t * (x + eps).log()
    if full:
        small = t <= 1  # masked as torch's masked_fill; the log sees 1 there, so its gradient stays finite
        safe = ew.where(small, 1.0, t)
        stirling = safe * safe.log() - safe + (safe * (2.0 * math.pi)).log() * 0.5
        loss = loss + ew.where(small, 0.0, stirling)
    return ew.cast(apply_reduction(loss, reduction), out)


@composite("cosine_embedding_loss")
def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1 (0 otherwise).

    Inputs are (N, D) with a (N,) target, or (D,) with a 0-d target; cos is
    torch's x1.x2 / sqrt((|x1|**2 + 1e-12)(|x2|**2 + 1e-12)).  Raises
    ValueError for other shapes, TypeError for non-float inputs.
    """
    reduction = legacy_reduction(size_average, reduce, reduction, "cosine_embedding_loss")
    check_float(input1, "input1", "cosine_embedding_loss")
    check_float(input2, "input2", "cosine_embedding_loss")
    check_tensor(target, "target", "cosine_embedding_loss")
    if target.ndim not in (0, 1):
        raise ValueError(
            f"cosine_embedding_loss(): target must be 0-D or 1-D (multi-target is not supported), "
            f"got shape {target.shape}"
        )
    need = target.ndim + 1
    if input1.ndim != need or input2.ndim != need:
        raise ValueError(
            f"cosine_embedding_loss(): a {target.ndim}-D target needs {need}-D inputs, got shapes "
            f"{input1.shape} and {input2.shape}"
        )
    compute, out = _compute_dtypes(input1, input2)
    a, b = ew.cast(input1, compute), ew.cast(input2, compute)
    d = target.ndim
    cos = (a * b).sum(d) / (((a * a).sum(d) + _COSINE_EPS) * ((b * b).sum(d) + _COSINE_EPS)).sqrt()
    loss = ew.where(target == 1, 1.0 - cos, 0.0) + ew.where(target == -1, clamp_min(cos - margin, 0.0), 0.0)
    return ew.cast(apply_reduction(loss, reduction), out)


@composite("triplet_margin_loss")
def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d = ||x1 - x2 + eps||_p over the last dim.

    ``swap=True`` uses min(d(a, n), d(p, n)) as the negative distance.  The
    tensors broadcast but must have the same number of dimensions.  Raises
    ValueError for margin <= 0 (as torch) or differing dimensions, TypeError
    for non-float inputs or a non-numeric ``p``.
    """
    reduction = legacy_reduction(size_average, reduce, reduction, "triplet_margin_loss")
    if not margin > 0:
        raise ValueError(f"triplet_margin_loss(): margin must be > 0, got {margin!r}")
    check_p(p, "triplet_margin_loss")
    for name, value in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        check_float(value, name, "triplet_margin_loss")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ValueError(
            f"triplet_margin_loss(): anchor, positive and negative must have the same number of "
            f"dimensions, got shapes {anchor.shape}, {positive.shape} and {negative.shape}"
        )
    compute, out = _compute_dtypes(anchor, positive, negative)
    a, pos, neg = (ew.cast(v, compute) for v in (anchor, positive, negative))
    d_pos = pairwise_distance(a, pos, p, eps)
    d_neg = pairwise_distance(a, neg, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(pos, neg, p, eps))
    loss = clamp_min(d_pos + margin - d_neg, 0.0)
    return ew.cast(apply_reduction(loss, reduction), out)
