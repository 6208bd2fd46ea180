"""Conv3d and the transposed convolutions ConvTranspose1d/2d/3d, with torch's arguments, checks, initialisation
and state-dict names (``weight``, ``bias``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from .linear import add_weight_and_bias

__all__ = ["Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


def _ntuple(value: Any, n: int, name: str, owner: str) -> tuple[int, ...]:
    values = (value,) * n if isinstance(value, int) and not isinstance(value, bool) else tuple(value)
    if len(values) != n or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise ValueError(f"{owner} {name} must be an int or a {n}-tuple of ints, got {value!r}")
    return values


def _check_channels(owner: str, in_channels: int, out_channels: int, groups: int, padding_mode: str) -> None:
    if groups <= 0 or in_channels % groups or out_channels % groups:
        raise ValueError(
            f"{owner}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be divisible by "
            f"groups ({groups}), and groups must be positive"
        )
    if padding_mode != "zeros":
        raise ValueError(f"{owner}: padding_mode {padding_mode!r} is not supported; only 'zeros'")


class Conv3d(Module):
    """3-D convolution over (N, C, D, H, W) (or unbatched (C, D, H, W)) input, weight of shape
    (out_channels, in_channels // groups, kD, kH, kW) (torch.nn.Conv3d); ``padding`` an int, a triple,
    ``"valid"`` or ``"same"``.  Initialised as torch does: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""

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
        _check_channels("Conv3d", in_channels, out_channels, groups, padding_mode)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _ntuple(kernel_size, 3, "kernel_size", "Conv3d")
        self.stride = _ntuple(stride, 3, "stride", "Conv3d")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Conv3d padding {padding!r} is not supported; use an int, a triple, 'valid', 'same'")
            if padding == "same" and self.stride != (1, 1, 1):
                raise ValueError(f"padding='same' is not supported for strided convolutions, got stride={stride!r}")
            self.padding: Any = padding
        else:
            self.padding = _ntuple(padding, 3, "padding", "Conv3d")
        self.dilation = _ntuple(dilation, 3, "dilation", "Conv3d")
        self.padding_mode = padding_mode
        add_weight_and_bias(
            self, (out_channels, in_channels // groups, *self.kernel_size), out_channels, bias, device, dtype
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw weight and bias with torch's default initialisation."""
        init.default_init_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.conv3d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + (", bias=False" if self.bias is None else "")


class _ConvTransposeNd(Module):
    """A transposed convolution: weight (in_channels, out_channels // groups, *kernel_size)."""

    _DIMS = 0
    _FUNCTIONS = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        owner, n = type(self).__name__, self._DIMS
        _check_channels(owner, in_channels, out_channels, groups, padding_mode)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _ntuple(kernel_size, n, "kernel_size", owner)
        self.stride = _ntuple(stride, n, "stride", owner)
        self.padding = _ntuple(padding, n, "padding", owner)
        self.output_padding = _ntuple(output_padding, n, "output_padding", owner)
        self.dilation = _ntuple(dilation, n, "dilation", owner)
        self.padding_mode = padding_mode
        add_weight_and_bias(
            self, (in_channels, out_channels // groups, *self.kernel_size), out_channels, bias, device, dtype
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's default: kaiming_uniform_(a=sqrt(5)) on the weight, whose fan-in is taken from its dimension
        1 (out_channels // groups * prod(kernel_size)), and the bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
        init.default_init_(self.weight, self.bias)

    def _output_padding(self, input: Tensor, output_size: Sequence[int] | None) -> tuple[int, ...]:  # noqa: A002
        """The output padding that makes the output ``output_size`` (torch's ``_output_padding``)."""
        if output_size is None:
            return self.output_padding
        n = self._DIMS
        size = list(output_size)[-n:]
        if len(size) != n:
            raise ValueError(f"{type(self).__name__}: output_size {output_size!r} needs {n} spatial sizes")
        extra = []
        for i in range(n):
            smallest = (
                (input.shape[input.ndim - n + i] - 1) * self.stride[i]
                - 2 * self.padding[i]
                + self.dilation[i] * (self.kernel_size[i] - 1)
                + 1
            )
            largest = smallest + self.stride[i] - 1
            if not smallest <= size[i] <= largest:
                raise ValueError(
                    f"{type(self).__name__}: requested an output size of {tuple(size)}, but valid sizes range from "
                    f"{smallest} to {largest} in dimension {i} (for an input of shape {input.shape})"
                )
            extra.append(size[i] - smallest)
        return tuple(extra)

    def forward(self, input: Tensor, output_size: Sequence[int] | None = None) -> Tensor:  # noqa: A002
        fn = self._FUNCTIONS[self._DIMS]
        padding = self._output_padding(input, output_size)
        return fn(input, self.weight, self.bias, self.stride, self.padding, padding, self.groups, self.dilation)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if any(self.padding):
            s += f", padding={self.padding}"
        if any(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + (", bias=False" if self.bias is None else "")


class ConvTranspose1d(_ConvTransposeNd):
    """torch.nn.ConvTranspose1d over (N, C, L) or (C, L) input; ``forward(input, output_size=None)``."""

    _DIMS = 1


class ConvTranspose2d(_ConvTransposeNd):
    """torch.nn.ConvTranspose2d over (N, C, H, W) or (C, H, W) input, weight (in_channels, out_channels // groups,
    kH, kW); ``forward(input, output_size=None)`` picks the output padding that gives ``output_size``."""

    _DIMS = 2


class ConvTranspose3d(_ConvTransposeNd):
    """torch.nn.ConvTranspose3d over (N, C, D, H, W) or (C, D, H, W) input; ``forward(input, output_size=None)``."""

    _DIMS = 3
