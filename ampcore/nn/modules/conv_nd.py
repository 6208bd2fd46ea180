"""Conv3d and the transposed convolutions ConvTranspose1d/2d/3d, with torch's arguments, checks, initialisation
and state-dict names (``weight``, ``bias``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...tensor import Tensor
from .. import functional as F
from .conv import _ConvBase, _ConvNd, _ntuple
from .linear import add_weight_and_bias

__all__ = ["Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


class Conv3d(_ConvNd):
    """3-D convolution over (N, C, D, H, W) (or unbatched (C, D, H, W)) input, weight of shape
    (out_channels, in_channels // groups, kD, kH, kW) (torch.nn.Conv3d); ``padding`` an int, a triple,
    ``"valid"`` or ``"same"``.  Initialised as torch does: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""

    _DIMS = 3
    _FUNCTIONS = {**_ConvNd._FUNCTIONS, 3: F.conv3d}


class _ConvTransposeNd(_ConvBase):
    """A transposed convolution: weight (in_channels, out_channels // groups, *kernel_size).

    ``reset_parameters`` is torch's default: kaiming_uniform_(a=sqrt(5)) on the weight, whose fan-in is taken from
    its dimension 1 (out_channels // groups * prod(kernel_size)), and the bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    """

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
        self._set_shape(in_channels, out_channels, kernel_size, stride, dilation, groups, padding_mode)
        owner, n = type(self).__name__, self._DIMS
        self.padding = _ntuple(padding, n, "padding", owner)
        self.output_padding = _ntuple(output_padding, n, "output_padding", owner)
        add_weight_and_bias(
            self, (in_channels, out_channels // groups, *self.kernel_size), out_channels, bias, device, dtype
        )
        self.reset_parameters()

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
