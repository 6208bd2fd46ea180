"""Elementwise activations and Softmax as modules."""

from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = ["ReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax"]


class ReLU(Module):
    """max(x, 0); ``inplace=True`` overwrites the input, as in torch."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.relu(input, inplace=self.inplace)


class GELU(Module):
    """Gaussian error linear unit; ``approximate`` is ``"none"`` (erf) or ``"tanh"``."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x * sigmoid(x)."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.silu(input)


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.sigmoid(input)


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.tanh(input)


def _check_dim(dim: int | None, cls: str) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{cls} needs the dimension to normalise over, e.g. {cls}(dim=-1); got {dim!r}")
    return dim


class Softmax(Module):
    """Softmax along ``dim`` (required: torch's implicit-dimension guess is deprecated)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = _check_dim(dim, "Softmax")

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim`` (required)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = _check_dim(dim, "LogSoftmax")

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.log_softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
