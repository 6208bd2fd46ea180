"""Dropout: zero each element with probability p and scale the survivors by 1 / (1 - p)."""

from __future__ import annotations

from ...creation import Generator, rand
from ...dispatch import composite, register_op
from ...ops import elementwise as ew
from ...tensor import Tensor
from ._utils import check_float

__all__ = ["dropout"]


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
