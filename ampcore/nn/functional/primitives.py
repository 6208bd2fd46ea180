"""Primitive ops re-exported under torch.nn.functional / torch names.

These are single primitive ops (or thin wrappers of one); they carry their
own backward rules in :mod:`ampcore.ops`, so no composite boundary is needed.
"""

from __future__ import annotations

from typing import Any

from ...ops import cat, cumsum, mean, stack, sum  # noqa: A004 - torch names, re-exported
from ...ops import elementwise as ew
from ...tensor import Tensor

__all__ = ["cat", "cumsum", "exp", "log", "mean", "pow", "rsqrt", "sigmoid", "sqrt", "stack", "sum", "tanh"]


def exp(input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
    """Elementwise e**x (integer input becomes float32)."""
    return ew.unary("exp", input)


def log(input: Tensor) -> Tensor:  # noqa: A002
    """Elementwise natural logarithm (-inf at 0, NaN below)."""
    return ew.unary("log", input)


def sqrt(input: Tensor) -> Tensor:  # noqa: A002
    """Elementwise square root (NaN below 0)."""
    return ew.unary("sqrt", input)


def rsqrt(input: Tensor) -> Tensor:  # noqa: A002
    """Elementwise 1 / sqrt(x) (inf at 0)."""
    return ew.unary("rsqrt", input)


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002
    """Elementwise logistic function 1 / (1 + exp(-x)), stable for large |x|."""
    return ew.unary("sigmoid", input)


def tanh(input: Tensor) -> Tensor:  # noqa: A002
    """Elementwise hyperbolic tangent."""
    return ew.unary("tanh", input)


def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001, A002 - torch names
    """``input ** exponent``; either may be a Python number (torch's type promotion).

    Raises TypeError if neither operand is a Tensor.
    """
    return ew.binary("pow", input, exponent)
