"""Conv1d and Conv2d."""

from __future__ import annotations

from typing import Any

from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from .linear import add_weight_and_bias

__all__ = ["Conv1d", "Conv2d"]


def _pair(value: Any, name: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in pair):
        raise ValueError(f"Conv2d {name} must be an int or a pair of ints, got {value!r}")
    return pair


class Conv2d(Module):
    """2-D convolution over (N, C, H, W) input, weight of shape
    (out_channels, in_channels // groups, kH, kW).

    ``padding`` is an int, a pair, ``"valid"`` or ``"same"`` (passed to
    ``F.conv2d``); only zero padding.  ValueError for ``"same"`` with a stride
    other than 1, as in torch.  Initialised as torch does:
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels // groups * kH * kW.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                f"divisible by groups ({groups}), and groups must be positive"
            )
        if padding_mode != "zeros":
            raise ValueError(f"padding_mode {padding_mode!r} is not supported; only 'zeros'")
        if isinstance(padding, str) and padding not in ("valid", "same"):
            raise ValueError(f"padding {padding!r} is not supported; use an int, a pair, 'valid' or 'same'")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        if padding == "same" and self.stride != (1, 1):
            raise ValueError(
                f"padding='same' is not supported for strided convolutions, got stride={stride!r}; "
                "use stride=1 or an explicit int or pair padding"
            )
        self.padding = padding if isinstance(padding, str) else _pair(padding, "padding")
        self.dilation = _pair(dilation, "dilation")
        self.padding_mode = padding_mode
        add_weight_and_bias(
            self, (out_channels, in_channels // groups, *self.kernel_size), out_channels, bias, device, dtype
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw weight and bias with torch's default initialisation."""
        init.default_init_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv1d(Module):
    """1-D convolution over (N, C, L) (or unbatched (C, L)) input, weight of shape
    (out_channels, in_channels // groups, k); torch's arguments, checks and initialisation, as :class:`Conv2d`."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                f"divisible by groups ({groups}), and groups must be positive"
            )
        if padding_mode != "zeros":
            raise ValueError(f"padding_mode {padding_mode!r} is not supported; only 'zeros'")
        if isinstance(padding, str) and padding not in ("valid", "same"):
            raise ValueError(f"padding {padding!r} is not supported; use an int, a 1-tuple, 'valid' or 'same'")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _single(kernel_size, "kernel_size"), _single(stride, "stride")
        if padding == "same" and self.stride != (1,):
            raise ValueError(f"padding='same' is not supported for strided convolutions, got stride={stride!r}")
        self.padding = padding if isinstance(padding, str) else _single(padding, "padding")
        self.dilation = _single(dilation, "dilation")
        self.padding_mode = padding_mode
        add_weight_and_bias(
            self, (out_channels, in_channels // groups, *self.kernel_size), out_channels, bias, device, dtype
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw weight and bias with torch's default initialisation."""
        init.default_init_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,):
            s += f", padding={self.padding}"
        if self.bias is None:
            s += ", bias=False"
        return s


def _single(value: Any, name: str) -> tuple[int]:
    one = (value,) if isinstance(value, int) else tuple(value)
    if len(one) != 1 or any(isinstance(v, bool) or not isinstance(v, int) for v in one):
        raise ValueError(f"Conv1d {name} must be an int or a 1-tuple of ints, got {value!r}")
    return (one[0],)
