"""The pooling layers: MaxPool2d, AvgPool1d/2d/3d and AdaptiveAvgPool1d/2d/3d, the layer forms of their
functionals in :mod:`ampcore.nn.functional`."""

from __future__ import annotations

from typing import Any

from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = [
    "MaxPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
]


class MaxPool2d(Module):
    """``MaxPool2d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False)``:
    the maximum of each window of (N, C, H, W) or (C, H, W) input (``stride`` defaults to ``kernel_size``)."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = (
            kernel_size,
            stride or kernel_size,
            padding,
            dilation,
        )
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.max_pool2d(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode, self.return_indices
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class _AvgPoolNd(Module):
    """The average pooling layers' shared state, forward and repr; a subclass names its functional."""

    _FUNCTION: Any = None

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad, self.divisor_override = ceil_mode, count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        args = (self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)
        return type(self)._FUNCTION(input, *args, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """``AvgPool2d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None)``: the mean of each window of (N, C, H, W) or (C, H, W) input."""

    _FUNCTION = staticmethod(F.avg_pool2d)


class AvgPool1d(_AvgPoolNd):
    """``AvgPool1d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True)``: the mean of
    each window of (N, C, L) or (C, L) input."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class AvgPool3d(_AvgPoolNd):
    """``AvgPool3d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None)``: the mean of each window of (N, C, D, H, W) or (C, D, H, W) input."""

    _FUNCTION = staticmethod(F.avg_pool3d)


class _AdaptiveAvgPoolNd(Module):
    _FUNCTION: Any = None

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return type(self)._FUNCTION(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """``AdaptiveAvgPool1d(output_size)``: (N, C, L) or (C, L) averaged over adaptive windows to ``output_size``."""

    _FUNCTION = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """``AdaptiveAvgPool2d(output_size)``: (N, C, H, W) or (C, H, W) averaged over adaptive windows to
    ``output_size`` (an int or a pair; None keeps that size), e.g. ``AdaptiveAvgPool2d(1)`` for global pooling."""

    _FUNCTION = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """``AdaptiveAvgPool3d(output_size)``: (N, C, D, H, W) or (C, D, H, W) averaged over adaptive windows."""

    _FUNCTION = staticmethod(F.adaptive_avg_pool3d)
