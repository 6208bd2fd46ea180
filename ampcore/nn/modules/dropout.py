"""Dropout, and the channel dropouts Dropout1d/2d/3d."""

from __future__ import annotations

from typing import Any

from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


class Dropout(Module):
    """Zero each element with probability ``p`` in training (scaling the rest by 1/(1-p));
    the identity in eval.  ValueError if ``p`` is outside [0, 1].

    ``inplace=True`` writes the result into ``input`` and returns it, as in torch
    (the input's autograd history continues through the dropout).
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, got {p!r}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _DropoutNd(Module):
    _FUNCTION: Any = None

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, got {p!r}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return type(self)._FUNCTION(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) or (C, L) input with probability ``p`` in training (torch.nn.Dropout1d)."""

    _FUNCTION = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) or (C, H, W) input with probability ``p`` in training, the rest
    scaled by 1/(1-p) (torch.nn.Dropout2d)."""

    _FUNCTION = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input with probability ``p`` in training."""

    _FUNCTION = staticmethod(F.dropout3d)
