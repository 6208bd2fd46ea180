"""Losses: cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss,
binary_cross_entropy and binary_cross_entropy_with_logits.

Class-index losses select each target's log-probability with a mask
(``target == arange(C)``): no gather, and ``ignore_index`` rows simply match
no class.  Weighted means divide by the summed weights of the counted
targets, as torch does.
"""

from __future__ import annotations

import warnings
from typing import Any

from ... import dtypes as dt
from ...creation import arange
from ...dispatch import call, composite
from ...ops import elementwise as ew
from ...syncs import defer_check
from ...tensor import Tensor
from ._bce_ops import BINARY_CROSS_ENTROPY, LOG1P
from ._utils import apply_reduction, check_float, check_tensor, legacy_reduction
from .activation import log_softmax

__all__ = [
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
]


@composite("cross_entropy")
def cross_entropy(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between logits (N, C, d1, ...) or (C,) and class-index or class-probability targets.

    Class indices (int64/int32, shape (N, d1, ...)) honour ``ignore_index``;
    float targets must have the input's shape.  ``label_smoothing`` mixes the
    target with the uniform distribution; ``weight`` rescales each class.
    Raises ValueError for mis-shaped targets or weight, class indices out of
    range, an unknown ``reduction`` or ``label_smoothing`` outside [0, 1].
    """
    reduction = legacy_reduction(size_average, reduce, reduction, "cross_entropy")
    check_float(input, "input", "cross_entropy")
    check_tensor(target, "target", "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy(): label_smoothing must be in [0, 1], got {label_smoothing!r}")
    class_dim = 0 if input.ndim == 1 else 1
    logp = log_softmax(input, class_dim)
    weight = _class_weight("cross_entropy", weight, input, class_dim)
    if target.dtype.is_floating_point:
        return _probability_targets(logp, target, weight, reduction, label_smoothing, class_dim)
    loss, counted = _select("cross_entropy", logp, target, weight, ignore_index, class_dim)
    if label_smoothing > 0.0:
        every = logp if weight is None else logp * weight
        kept = ew.cast(target != ignore_index, logp.dtype)
        smooth = -every.sum(class_dim) * kept
        n_classes = input.shape[class_dim]
        loss = loss * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)
    return _weighted_reduce(loss, counted, reduction)


@composite("nll_loss")
def nll_loss(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class-index targets given log-probabilities (N, C, d1, ...) or (C,).

    loss = -weight[t] * input[t]; the mean divides by the summed weights of
    the targets that are not ``ignore_index``.  Raises ValueError as :func:`cross_entropy`.
    """
    reduction = legacy_reduction(size_average, reduce, reduction, "nll_loss")
    check_float(input, "input", "nll_loss")
    check_tensor(target, "target", "nll_loss")
    class_dim = 0 if input.ndim == 1 else 1
    weight = _class_weight("nll_loss", weight, input, class_dim)
    loss, counted = _select("nll_loss", input, target, weight, ignore_index, class_dim)
    return _weighted_reduce(loss, counted, reduction)


@composite("mse_loss")
def mse_loss(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """(input - target)**2, reduced.  Warns (like torch) when the shapes differ and broadcast."""
    reduction = legacy_reduction(size_average, reduce, reduction, "mse_loss")
    diff = _difference("mse_loss", input, target)
    return apply_reduction(diff * diff, reduction)


@composite("l1_loss")
def l1_loss(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """|input - target|, reduced.  Warns when the shapes differ and broadcast."""
    reduction = legacy_reduction(size_average, reduce, reduction, "l1_loss")
    return apply_reduction(_difference("l1_loss", input, target).abs(), reduction)


@composite("smooth_l1_loss")
def smooth_l1_loss(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """0.5 d**2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target); beta = 0 is l1_loss.

    Raises ValueError for negative ``beta``.
    """
    reduction = legacy_reduction(size_average, reduce, reduction, "smooth_l1_loss")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss(): beta must be >= 0, got {beta!r}")
    d = _difference("smooth_l1_loss", input, target).abs()
    if beta == 0:
        return apply_reduction(d, reduction)
    return apply_reduction(ew.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


@composite("binary_cross_entropy")
def binary_cross_entropy(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """-(y log p + (1 - y) log(1 - p)) for probabilities ``input``; each log is clamped at -100 like torch.

    p = 0 or 1 gives a finite loss.  The gradient is torch's
    (p - y) / max(p (1 - p), 1e-12), not that of the clamp, so a saturated
    wrong prediction still gets a (huge) gradient.  float16/bfloat16 are
    computed in float32 and rounded once.  Raises ValueError if target and
    input shapes differ.
    """
    # Unsafe in float16 (log of rounded probabilities); ampcore.autocast makes
    # this boundary raise inside an autocast region, as torch does.
    reduction = legacy_reduction(size_average, reduce, reduction, "binary_cross_entropy")
    _same_shape("binary_cross_entropy", input, target)
    compute, out = _compute_dtypes(input, target, weight)
    loss = call(BINARY_CROSS_ENTROPY, ew.cast(input, compute), ew.cast(target, compute))
    return apply_reduction(ew.cast(loss if weight is None else loss * weight, out), reduction)


@composite("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(
    input: Tensor,  # noqa: A002 - torch's argument name
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """BCE of sigmoid(input), computed stably as max(x, 0) - x y + log1p(exp(-|x|)).

    ``pos_weight`` (broadcast along the last dimension) weights the positive
    term: (1 - y) x + (1 + (pos_weight - 1) y) (log1p(exp(-|x|)) + max(-x, 0)).
    float16/bfloat16 are computed in float32 and rounded once, so losses far
    below 1 (x = 8, y = 1 gives 3.4e-4) survive.  Raises ValueError if target
    and input shapes differ.
    """
    reduction = legacy_reduction(size_average, reduce, reduction, "binary_cross_entropy_with_logits")
    _same_shape("binary_cross_entropy_with_logits", input, target)
    compute, out = _compute_dtypes(input, target, weight, pos_weight)
    x = ew.cast(input, compute)
    # log(1 + e) with e <= 1 loses every e below eps/2 (x = 20 has loss 2e-9); log1p keeps it.
    softplus_neg_abs = call(LOG1P, (-x.abs()).exp())
    if pos_weight is None:
        loss = _max0(x) - x * target + softplus_neg_abs
    else:
        log_weight = (pos_weight - 1.0) * target + 1.0
        loss = (1.0 - target) * x + log_weight * (softplus_neg_abs + _max0(-x))
    return apply_reduction(ew.cast(loss if weight is None else loss * weight, out), reduction)


# --------------------------------------------------------------------------- helpers
def _select(
    op: str, logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, class_dim: int
) -> tuple[Tensor, Tensor]:
    """Per sample: -weight[t] * logp[t] and weight[t], both 0 where t == ignore_index.

    A select, not a multiply by the one-hot mask: 0 * -inf (a class with zero
    probability) and 0 * NaN (an ignored row) must not reach the loss.
    """
    mask = _class_mask(op, target, logp, ignore_index, class_dim)
    picked = ew.where(mask, logp, 0.0)
    counted = ew.cast(mask, logp.dtype)
    if weight is not None:
        picked, counted = picked * weight, counted * weight
    return -picked.sum(class_dim), counted.sum(class_dim)


def _class_mask(op: str, target: Tensor, input: Tensor, ignore_index: int, class_dim: int) -> Tensor:  # noqa: A002
    """(target == class) as bool, with the class axis at ``class_dim``; ignored targets select nothing."""
    if target.dtype not in (dt.int64, dt.int32):
        raise TypeError(f"{op}() needs int64 class-index targets, got dtype {target.dtype.name}")
    n_classes = input.shape[class_dim]
    expected = input.shape[:class_dim] + input.shape[class_dim + 1 :]
    if target.shape != expected:
        raise ValueError(
            f"{op}(): target of shape {target.shape} does not match input of shape {input.shape}; "
            f"class-index targets need shape {expected}"
        )
    _check_class_range(op, target, n_classes, ignore_index)
    if 0 <= ignore_index < n_classes:  # an ignored target that is a real class must not be selected
        target = ew.where(target == ignore_index, -1, target)
    classes = arange(n_classes, device=input.device).reshape((n_classes,) + (1,) * (input.ndim - class_dim - 1))
    return target.unsqueeze(class_dim) == classes


def _check_class_range(op: str, target: Tensor, n_classes: int, ignore_index: int) -> None:
    """Queue a device-side check of the class indices: no host sync here (see :mod:`ampcore.syncs`).

    Out-of-range targets match no class in the one-hot mask, so nothing reads
    out of bounds before the deferred check raises.
    """
    if target.numel() == 0:
        return
    outside = ew.cast(target.clamp(0, n_classes - 1) != target, dt.float32)
    bad = outside * ew.cast(target != ignore_index, dt.float32)

    def error() -> ValueError:
        t = target.numpy()
        first = t[((t < 0) | (t >= n_classes)) & (t != ignore_index)].flat[0]
        return ValueError(
            f"{op}(): target class {int(first)} is out of range for {n_classes} classes "
            f"(valid: 0..{n_classes - 1}, or ignore_index={ignore_index}); found by a check on the "
            "device, raised at the next host read or optimizer step"
        )

    defer_check(bad.sum() > 0, error)


def _class_weight(op: str, weight: Tensor | None, input: Tensor, class_dim: int) -> Tensor | None:  # noqa: A002
    """``weight`` (C,) reshaped to broadcast along ``class_dim``, in the input's dtype."""
    if weight is None:
        return None
    n_classes = input.shape[class_dim]
    if check_tensor(weight, "weight", op).shape != (n_classes,):
        raise ValueError(
            f"{op}(): weight of shape {weight.shape} does not match {n_classes} classes "
            f"(input shape {input.shape}); expected ({n_classes},)"
        )
    return ew.cast(weight, input.dtype).reshape((n_classes,) + (1,) * (input.ndim - class_dim - 1))


def _probability_targets(
    logp: Tensor, target: Tensor, weight: Tensor | None, reduction: str, label_smoothing: float, class_dim: int
) -> Tensor:
    if target.shape != logp.shape:
        raise ValueError(
            f"cross_entropy(): float (class-probability) targets must have the input's shape "
            f"{logp.shape}, got {target.shape}; class-index targets must be int64"
        )
    n_classes = logp.shape[class_dim]
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
    terms = logp * target if weight is None else logp * target * weight
    # loss has one element per sample, so its plain mean is torch's (unweighted) mean over the batch.
    return apply_reduction(-terms.sum(class_dim), reduction)


def _weighted_reduce(loss: Tensor, counted: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.sum() / counted.sum()  # 0 / 0 = NaN when every target is ignored, as in torch
    return apply_reduction(loss, reduction)


def _difference(op: str, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
    check_tensor(input, "input", op)
    check_tensor(target, "target", op)
    if input.shape != target.shape:
        warnings.warn(
            f"{op}(): target shape {target.shape} differs from input shape {input.shape}; they will "
            "be broadcast, which is likely not what you want",
            UserWarning,
            stacklevel=4,
        )
    return input - target


def _same_shape(op: str, input: Tensor, target: Tensor) -> None:  # noqa: A002
    check_float(input, "input", op)
    check_tensor(target, "target", op)
    if input.shape != target.shape:
        raise ValueError(f"{op}(): target shape {target.shape} must equal the input shape {input.shape}")


def _max0(x: Tensor) -> Tensor:
    """max(x, 0) with the tie split at 0 (gradient 1/2): with d|x|/dx = 0 there, BCE's gradient is sigmoid(0) - y."""
    return ew.binary("maximum", x, 0.0)


def _compute_dtypes(*operands: Any) -> tuple[dt.DType, dt.DType]:
    """(dtype to compute in, dtype of the result): the tensors' promoted dtype, computed in float32 if low-precision."""
    out = dt.result_type(*(t.dtype for t in operands if isinstance(t, Tensor)))
    return (dt.float32 if out in dt.LOW_PRECISION_DTYPES else out), out
