"""The padding layers: Reflection-, Replication-, Zero-, Constant- and CircularPad in 1, 2 and 3 dimensions, the
layer forms of ``F.pad`` (torch.nn's names and ``padding`` arguments: an int, or one (left, right) pair per
dimension from the last backwards)."""

from __future__ import annotations

from typing import Any

from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = [
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
]


class _PadNd(Module):
    """Pads the last ``_DIMS`` dimensions by F.pad's ``_MODE``."""

    _MODE = "constant"
    _DIMS = 0

    def __init__(self, padding: Any, value: float = 0.0) -> None:
        super().__init__()
        n = 2 * self._DIMS
        widths = (padding,) * n if isinstance(padding, int) and not isinstance(padding, bool) else tuple(padding)
        if len(widths) != n or any(isinstance(p, bool) or not isinstance(p, int) for p in widths):
            raise ValueError(f"{type(self).__name__}: padding must be an int or {n} ints, got {padding!r}")
        self.padding = widths
        self.value = value

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.pad(input, self.padding, self._MODE, self.value if self._MODE == "constant" else None)

    def extra_repr(self) -> str:
        return f"{self.padding}" + (f", value={self.value}" if self._MODE == "constant" and self.value else "")


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding, value)


class _FixedPadNd(_PadNd):
    def __init__(self, padding: Any) -> None:
        super().__init__(padding)


class ReflectionPad1d(_FixedPadNd):
    """torch.nn.ReflectionPad1d: the last 1 dimension(s) padded mirrored at the edges (the edge itself not repeated)."""

    _MODE, _DIMS = "reflect", 1


class ReflectionPad2d(_FixedPadNd):
    """torch.nn.ReflectionPad2d: the last 2 dimension(s) padded mirrored at the edges (the edge itself not repeated)."""

    _MODE, _DIMS = "reflect", 2


class ReflectionPad3d(_FixedPadNd):
    """torch.nn.ReflectionPad3d: the last 3 dimension(s) padded mirrored at the edges (the edge itself not repeated)."""

    _MODE, _DIMS = "reflect", 3


class ReplicationPad1d(_FixedPadNd):
    """torch.nn.ReplicationPad1d: the last 1 dimension(s) padded repeating the edge values."""

    _MODE, _DIMS = "replicate", 1


class ReplicationPad2d(_FixedPadNd):
    """torch.nn.ReplicationPad2d: the last 2 dimension(s) padded repeating the edge values."""

    _MODE, _DIMS = "replicate", 2


class ReplicationPad3d(_FixedPadNd):
    """torch.nn.ReplicationPad3d: the last 3 dimension(s) padded repeating the edge values."""

    _MODE, _DIMS = "replicate", 3


class ZeroPad1d(_FixedPadNd):
    """torch.nn.ZeroPad1d: the last 1 dimension(s) padded with zeros."""

    _MODE, _DIMS = "constant", 1


class ZeroPad2d(_FixedPadNd):
    """torch.nn.ZeroPad2d: the last 2 dimension(s) padded with zeros."""

    _MODE, _DIMS = "constant", 2


class ZeroPad3d(_FixedPadNd):
    """torch.nn.ZeroPad3d: the last 3 dimension(s) padded with zeros."""

    _MODE, _DIMS = "constant", 3


class ConstantPad1d(_ConstantPadNd):
    """torch.nn.ConstantPad1d: the last 1 dimension(s) padded with ``value``."""

    _MODE, _DIMS = "constant", 1


class ConstantPad2d(_ConstantPadNd):
    """torch.nn.ConstantPad2d: the last 2 dimension(s) padded with ``value``."""

    _MODE, _DIMS = "constant", 2


class ConstantPad3d(_ConstantPadNd):
    """torch.nn.ConstantPad3d: the last 3 dimension(s) padded with ``value``."""

    _MODE, _DIMS = "constant", 3


class CircularPad1d(_FixedPadNd):
    """torch.nn.CircularPad1d: the last 1 dimension(s) padded wrapping around."""

    _MODE, _DIMS = "circular", 1


class CircularPad2d(_FixedPadNd):
    """torch.nn.CircularPad2d: the last 2 dimension(s) padded wrapping around."""

    _MODE, _DIMS = "circular", 2


class CircularPad3d(_FixedPadNd):
    """torch.nn.CircularPad3d: the last 3 dimension(s) padded wrapping around."""

    _MODE, _DIMS = "circular", 3
