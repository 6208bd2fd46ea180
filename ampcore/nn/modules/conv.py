"""Conv1d and Conv2d, and the base every convolution layer shares (:mod:`.conv_nd` has Conv3d and the transposed
ones): torch's argument checks, the per-dimension tuples, the weight and bias, the initialisation and the repr."""

from __future__ import annotations

from typing import Any

from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from .linear import add_weight_and_bias

__all__ = ["Conv1d", "Conv2d"]

_TUPLE_WORDS = {1: "a 1-tuple", 2: "a pair", 3: "a triple"}


def _ntuple(value: Any, n: int, name: str, owner: str) -> tuple[int, ...]:
    values = (value,) * n if isinstance(value, int) and not isinstance(value, bool) else tuple(value)
    if len(values) != n or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise ValueError(f"{owner} {name} must be an int or {_TUPLE_WORDS[n]} of ints, got {value!r}")
    return values


class _ConvBase(Module):
    """What every convolution layer shares; a subclass sets ``_DIMS`` and builds its weight in ``__init__``."""

    _DIMS = 0

    def _set_shape(
        self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any, dilation: Any, groups: int, mode: str
    ) -> None:
        """Checks the channels against ``groups`` and ``padding_mode``; stores the per-dimension tuples."""
        owner, n = type(self).__name__, self._DIMS
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{owner}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be divisible by "
                f"groups ({groups}), and groups must be positive"
            )
        if mode != "zeros":
            raise ValueError(f"{owner}: padding_mode {mode!r} is not supported; only 'zeros'")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _ntuple(kernel_size, n, "kernel_size", owner)
        self.stride = _ntuple(stride, n, "stride", owner)
        self.dilation = _ntuple(dilation, n, "dilation", owner)
        self.padding_mode = mode

    def reset_parameters(self) -> None:
        """Redraw weight and bias with torch's default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the
        fan-in taken from the weight's dimension 1 times the kernel size."""
        init.default_init_(self.weight, self.bias)

    def extra_repr(self) -> str:
        """torch's: the settings that differ from their defaults."""
        n = self._DIMS
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if getattr(self, "output_padding", (0,) * n) != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + (", bias=False" if self.bias is None else "")


class _ConvNd(_ConvBase):
    """A convolution: weight (out_channels, in_channels // groups, *kernel_size); ``padding`` an int, a tuple,
    ``"valid"`` or ``"same"`` (only zero padding; ``"same"`` needs stride 1, as in torch)."""

    _FUNCTIONS = {1: F.conv1d, 2: F.conv2d}  # Conv3d adds F.conv3d

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
        owner, word = type(self).__name__, _TUPLE_WORDS[self._DIMS]
        if isinstance(padding, str) and padding not in ("valid", "same"):
            raise ValueError(f"{owner} padding {padding!r} is not supported; use an int, {word}, 'valid' or 'same'")
        self._set_shape(in_channels, out_channels, kernel_size, stride, dilation, groups, padding_mode)
        if padding == "same" and any(s != 1 for s in self.stride):
            raise ValueError(
                f"{owner}: padding='same' is not supported for strided convolutions, got stride={stride!r}; "
                f"use stride=1 or an explicit int or {word[2:]} padding"
            )
        self.padding: Any = padding if isinstance(padding, str) else _ntuple(padding, self._DIMS, "padding", owner)
        add_weight_and_bias(
            self, (out_channels, in_channels // groups, *self.kernel_size), out_channels, bias, device, dtype
        )
        self.reset_parameters()

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        fn = self._FUNCTIONS[self._DIMS]
        return fn(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) (or unbatched (C, H, W)) input, weight of shape
    (out_channels, in_channels // groups, kH, kW).

    ``padding`` is an int, a pair, ``"valid"`` or ``"same"`` (passed to
    ``F.conv2d``); only zero padding.  ValueError for ``"same"`` with a stride
    other than 1, as in torch.  Initialised as torch does:
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels // groups * kH * kW.
    """

    _DIMS = 2


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) (or unbatched (C, L)) input, weight of shape
    (out_channels, in_channels // groups, k); torch's arguments, checks and initialisation, as :class:`Conv2d`."""

    _DIMS = 1
