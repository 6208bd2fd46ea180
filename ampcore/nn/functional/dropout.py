"""Dropout: zero each element (dropout) or each channel (dropout1d/2d/3d, torch's feature dropout) with probability
p and scale the survivors by 1 / (1 - p)."""

from __future__ import annotations

from ...creation import Generator, rand
from ...dispatch import composite, register_op
from ...ops import elementwise as ew
from ...ops.declare import composite as declared
from ...tensor import Tensor
from ._utils import check_float

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "feature_dropout"]


@composite("dropout")
def dropout(
    input: Tensor,  # noqa: A002 - torch's argument name
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    """Randomly zero elements with probability ``p`` (drawn with ``ampcore.rand``, seeded by ``generator``
    or the default generator) and scale the rest by 1 / (1 - p); the identity when not ``training`` or p = 0.

    ``inplace=True`` makes ``input`` hold the result, its history continuing through the dropout
    (RuntimeError for a leaf that requires grad, as in torch).
    Raises ValueError for p outside [0, 1].
    """
    check_float(input, "input", "dropout")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout(): probability p must be in [0, 1], got {p!r}")
    if not training or p == 0.0:
        return input
    if inplace:
        return input._rebase(lambda x: apply_dropout(x, p, generator), "dropout_")
    return apply_dropout(input, p, generator)


def apply_dropout(x: Tensor, p: float, generator: Generator | None = None) -> Tensor:
    """The dropout itself (no argument checks); also used inside attention."""
    # Draw in float32 whatever x's dtype: a bf16 uniform has too few levels to hit p accurately.
    keep = rand(x.shape, device=x.device, generator=generator) >= p
    return ew.where(keep, x * (1.0 / (1.0 - p)) if p < 1.0 else x * 0.0, 0.0)


register_op("dropout_", "in-place")


@declared("feature_dropout", signature="feature_dropout(input, p, train) -> Tensor")
def feature_dropout(input: Tensor, p: float, train: bool, *, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """torch.feature_dropout: zero whole channels of (N, C, *) input (or (C, *) where the caller says it is
    unbatched, by passing a tensor of one more leading dim) with probability ``p``, the rest scaled by 1 / (1 -
    p); one draw per (sample, channel).  The identity when not ``train`` or p = 0; ValueError for p outside [0, 1]."""
    check_float(input, "input", "feature_dropout")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"feature_dropout(): probability p must be in [0, 1], got {p!r}")
    if not train or p == 0.0:
        return input
    mask_shape = input.shape[:2] + (1,) * (input.ndim - 2)
    keep = rand(mask_shape, device=input.device, generator=generator) >= p
    return ew.where(keep, input * (1.0 / (1.0 - p)) if p < 1.0 else input * 0.0, 0.0)


def _channel_dropout(op: str, spatial: int, input: Tensor, p: float, training: bool, inplace: bool) -> Tensor:  # noqa: A002
    """dropout1d/2d/3d: a (C, *spatial) input is one sample, an (N, C, *spatial) one a batch."""
    check_float(input, "input", op)
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(
            f"{op}() needs a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) input, got shape {input.shape}"
        )
    batched = input.ndim == spatial + 2

    def drop(x: Tensor) -> Tensor:
        return feature_dropout(x if batched else x.unsqueeze(0), p, training).reshape(x.shape)

    if inplace and training and p > 0.0:
        return input._rebase(drop, f"{op}_")
    return drop(input)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:  # noqa: A002
    """torch.nn.functional.dropout1d: each channel of (N, C, L) or (C, L) input zeroed with probability ``p``."""
    return _channel_dropout("dropout1d", 1, input, p, training, inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:  # noqa: A002
    """torch.nn.functional.dropout2d: each channel of (N, C, H, W) or (C, H, W) input zeroed with probability ``p``."""
    return _channel_dropout("dropout2d", 2, input, p, training, inplace)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:  # noqa: A002
    """torch.nn.functional.dropout3d: each channel of (N, C, D, H, W) or (C, D, H, W) input zeroed with
    probability ``p``."""
    return _channel_dropout("dropout3d", 3, input, p, training, inplace)
