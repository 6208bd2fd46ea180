"""Dropout."""

from __future__ import annotations

from ...autograd import is_grad_enabled
from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """Zero each element with probability ``p`` in training (scaling the rest by 1/(1-p));
    the identity in eval.  ValueError if ``p`` is outside [0, 1].

    ``inplace=True`` writes the result into ``input`` and returns it, as in torch.
    ampcore has no in-place autograd, so in training with gradients enabled an
    input that requires grad raises RuntimeError (torch allows it for non-leaf
    tensors): use ``inplace=False`` there, which gives the same values.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, got {p!r}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        if self.inplace and self.training and self.p > 0 and is_grad_enabled() and input.requires_grad:
            # Checked here, before F.dropout draws its mask, so the error costs no random numbers.
            raise RuntimeError("Dropout(inplace=True) cannot overwrite an input that requires grad while gradients "
                               "are enabled (ampcore has no in-place autograd); use Dropout(inplace=False), "
                               "which gives the same values, or call it under ampcore.no_grad()")
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
