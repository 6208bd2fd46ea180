"""2-D pooling (max_pool2d, avg_pool2d) over the sliding windows of :mod:`._windows`."""

from __future__ import annotations

from typing import Any

from ...creation import ones
from ...dispatch import composite
from ...ops import reduction
from ...tensor import Tensor
from ._utils import check_float, ntuple
from ._windows import output_size, pad2d, windows

__all__ = ["max_pool2d", "avg_pool2d"]


@composite("max_pool2d")
def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """Maximum over each (kh, kw) window of (N, C, H, W) or (C, H, W) input; padding counts as -inf.

    ``stride`` defaults to ``kernel_size``.  The gradient goes to the first
    maximum of each window, as in torch.  Raises ValueError for padding above
    half the effective kernel or a window larger than the padded input;
    NotImplementedError for ``ceil_mode`` / ``return_indices``.
    """
    _unsupported("max_pool2d", ceil_mode=ceil_mode, return_indices=return_indices)
    kernel, stride_, pads, dilation_ = _args("max_pool2d", input, kernel_size, stride, padding, dilation)
    taps = windows(pad2d(input, pads, float("-inf")), kernel, stride_, dilation_)
    return reduction.max(taps, input.ndim - 2).values


@composite("avg_pool2d")
def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over each (kh, kw) window of (N, C, H, W) or (C, H, W) input; zero padding.

    The divisor is kh * kw (``count_include_pad=True``), the number of
    non-padding elements in the window (False), or ``divisor_override``.
    Raises ValueError like :func:`max_pool2d`; NotImplementedError for ``ceil_mode``.
    """
    _unsupported("avg_pool2d", ceil_mode=ceil_mode)
    kernel, stride_, pads, dilation = _args("avg_pool2d", input, kernel_size, stride, padding, 1)
    total = windows(pad2d(input, pads), kernel, stride_, dilation).sum(input.ndim - 2)
    if divisor_override is not None:
        if not isinstance(divisor_override, int) or divisor_override <= 0:
            raise ValueError(f"avg_pool2d(): divisor_override must be a positive int, got {divisor_override!r}")
        return total / float(divisor_override)
    if count_include_pad or pads == ((0, 0), (0, 0)):
        return total / float(kernel[0] * kernel[1])
    # Per-position count of real (non-padding) elements: pool a padded image of ones.
    mask = pad2d(ones(input.shape[-2:], dtype=input.dtype, device=input.device), pads)
    return total / windows(mask, kernel, stride_, dilation).sum(0)


def _args(op: str, x: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any) -> tuple[Any, ...]:
    check_float(x, "input", op)
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}() needs a 4-D (N, C, H, W) or 3-D (C, H, W) input, got shape {x.shape}")
    kernel = ntuple(kernel_size, 2, "kernel_size", op, minimum=1)
    stride_ = kernel if stride is None or stride == () or stride == [] else ntuple(stride, 2, "stride", op, minimum=1)
    pad = ntuple(padding, 2, "padding", op)
    dilation_ = ntuple(dilation, 2, "dilation", op, minimum=1)
    for p, k, d in zip(pad, kernel, dilation_):
        if 2 * p > d * (k - 1) + 1:
            raise ValueError(f"{op}(): padding {padding!r} must be at most half the effective kernel size "
                             f"{kernel} (dilation {dilation_})")
    pads = ((pad[0], pad[0]), (pad[1], pad[1]))
    for size, k, s, p, d in zip(x.shape[-2:], kernel, stride_, pads, dilation_):
        if output_size(size, k, s, p, d) <= 0:
            raise ValueError(f"{op}(): kernel {kernel} is larger than the padded input of shape {x.shape} "
                             f"(padding {padding!r}, dilation {dilation_})")
    return kernel, stride_, pads, dilation_


def _unsupported(op: str, **flags: bool) -> None:
    for name, value in flags.items():
        if value:
            raise NotImplementedError(f"{op}(): {name}=True is not supported yet")
