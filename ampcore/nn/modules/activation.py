"""Elementwise activations and Softmax as modules."""

from __future__ import annotations

from typing import Any

from ...creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init as nn_init
from ..module import Module
from ..parameter import Parameter
from .attention import MultiheadAttention  # torch keeps it in nn.modules.activation; its code is in .attention
from .piecewise import ELU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, ReLU6  # torch's home for them too

__all__ = [
    "ReLU",
    "GELU",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "Softmax",
    "LogSoftmax",
    "PReLU",
    "Softplus",
    "Softmin",
    "MultiheadAttention",
    "LeakyReLU",
    "ELU",
    "SELU",
    "Hardtanh",
    "ReLU6",
    "Hardsigmoid",
    "Hardswish",
]


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


class _AlongDim(Module):
    """A normalisation along a required ``dim`` (torch's implicit-dimension guess is deprecated);
    subclasses name the functional op in ``_op``."""

    _op = ""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = _check_dim(dim, type(self).__name__)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return getattr(F, self._op)(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_AlongDim):
    """Softmax along ``dim`` (required)."""

    _op = "softmax"


class LogSoftmax(_AlongDim):
    """Log-softmax along ``dim`` (required)."""

    _op = "log_softmax"


class Softmin(_AlongDim):
    """Softmin (softmax of -x) along ``dim`` (required)."""

    _op = "softmin"


class PReLU(Module):
    """x where x > 0, else a * x with a learnt slope ``a``: one shared (``num_parameters=1``) or one per
    channel (``num_parameters=C``, dimension 1 of the input), initialised to ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if isinstance(num_parameters, bool) or not isinstance(num_parameters, int) or num_parameters < 1:
            raise ValueError(
                f"PReLU num_parameters must be a positive int (1 or the channel count), got {num_parameters!r}"
            )
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set every slope back to ``init``."""
        nn_init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Softplus(Module):
    """log(1 + exp(beta x)) / beta, linear where beta x > ``threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"
