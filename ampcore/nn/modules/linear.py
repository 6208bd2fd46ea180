"""Linear, Bilinear, Identity and Flatten, and the parameter set-up layers with a weight and a bias share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = [
    "Linear",
    "NonDynamicallyQuantizableLinear",
    "Bilinear",
    "Identity",
    "Flatten",
    "check_sizes",
    "add_weight_and_bias",
]


def check_sizes(layer: str, **sizes: Any) -> None:
    """ValueError naming the first size that is not a non-negative int."""
    for name, n in sizes.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"{layer} {name} must be a non-negative int, got {n!r}")


def add_weight_and_bias(
    module: Module, weight_shape: Sequence[int], bias_size: int, bias: bool, device: Any, dtype: Any
) -> None:
    """Give ``module`` an (uninitialised) ``weight`` and a ``bias`` parameter, or ``bias = None``."""
    module.weight = Parameter(empty(*weight_shape, device=device, dtype=dtype))
    if bias:
        module.bias = Parameter(empty(bias_size, device=device, dtype=dtype))
    else:
        module.register_parameter("bias", None)


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape (out_features, in_features).

    Initialised as torch does: weight and bias from U(-1/sqrt(in_features), 1/sqrt(in_features)).
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        check_sizes("Linear", in_features=in_features, out_features=out_features)
        self.in_features = in_features
        self.out_features = out_features
        add_weight_and_bias(self, (out_features, in_features), out_features, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw weight and bias with torch's default initialisation."""
        init.default_init_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """torch's name for the output projection of MultiheadAttention (a Linear; torch's quantization tooling
    treats it differently, ampcore has none)."""


class Bilinear(Module):
    """``y[o] = x1 @ weight[o] @ x2 + bias[o]`` with ``weight`` of shape (out_features, in1_features, in2_features).

    Initialised as torch does: weight and bias from U(-1/sqrt(in1_features), 1/sqrt(in1_features)).
    """

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        check_sizes("Bilinear", in1_features=in1_features, in2_features=in2_features, out_features=out_features)
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        add_weight_and_bias(self, (out_features, in1_features, in2_features), out_features, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw weight and bias from U(-1/sqrt(in1_features), 1/sqrt(in1_features))."""
        bound = 1.0 / math.sqrt(self.in1_features) if self.in1_features > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class Identity(Module):
    """Returns its input unchanged (arguments to the constructor are ignored, as in torch)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return input


class Flatten(Module):
    """Flattens dimensions ``start_dim`` .. ``end_dim`` into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
