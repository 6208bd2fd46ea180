"""Bilinear: y = x1^T A x2 + b (torch keeps it next to Linear)."""

from __future__ import annotations

import math
from typing import Any

from ...creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = ["Bilinear"]


class Bilinear(Module):
    """``y[o] = x1 @ weight[o] @ x2 + bias[o]`` with ``weight`` of shape (out_features, in1_features, in2_features).

    Initialised as torch does: weight and bias from U(-1/sqrt(in1_features), 1/sqrt(in1_features)).
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        for name, n in (("in1_features", in1_features), ("in2_features", in2_features),
                        ("out_features", out_features)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"Bilinear {name} must be a non-negative int, got {n!r}")
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in1_features, in2_features, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
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
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
