"""The layers of the piecewise activations beside ReLU: LeakyReLU, ELU, SELU, Hardtanh, ReLU6, Hardsigmoid and
Hardswish (torch.nn's arguments and defaults; ``inplace=True`` overwrites the input, as torch's)."""

from __future__ import annotations

import warnings

from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = ["LeakyReLU", "ELU", "SELU", "Hardtanh", "ReLU6", "Hardsigmoid", "Hardswish"]


class LeakyReLU(Module):
    """``x`` where positive, ``negative_slope * x`` elsewhere (torch.nn.LeakyReLU)."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere (torch.nn.ELU)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SELU(Module):
    """The self-normalising ELU (torch.nn.SELU)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.selu(input, self.inplace)


class Hardtanh(Module):
    """``input`` clamped to ``[min_val, max_val]`` (torch.nn.Hardtanh)."""

    def __init__(
        self,
        min_val: float = -1.0,
        max_val: float = 1.0,
        inplace: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
    ) -> None:
        super().__init__()
        if min_value is not None or max_value is not None:  # torch's deprecated names, which win as in torch
            warnings.warn(
                "keyword arguments min_value and max_value are deprecated; use min_val and max_val", stacklevel=2
            )
            min_val = min_val if min_value is None else min_value
            max_val = max_val if max_value is None else max_value
        if max_val <= min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)`` (torch.nn.ReLU6, a Hardtanh(0, 6) as in torch)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.relu6(input, self.inplace)


class Hardsigmoid(Module):
    """``min(max(x + 3, 0), 6) / 6`` (torch.nn.Hardsigmoid)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.hardsigmoid(input, self.inplace)


class Hardswish(Module):
    """``x * hardsigmoid(x)`` (torch.nn.Hardswish)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.hardswish(input, self.inplace)
