"""Pooling over the sliding windows of :mod:`._windows`: max_pool2d, avg_pool1d/2d/3d (avg_pool1d and avg_pool3d
are declared ops, :mod:`ampcore.ops.declare`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...creation import ones
from ...dispatch import call, composite
from ...ops import elementwise as ew
from ...ops import pad as ops_pad
from ...ops import reduction
from ...ops.declare import Example, Input
from ...ops.declare import composite as declared
from ...tensor import Tensor
from ._pool_op import TILED_MAX_POOL2D, tiles
from ._utils import check_float, ntuple, opmath
from ._windows import output_size, pad2d, windows

__all__ = ["max_pool2d", "avg_pool1d", "avg_pool2d", "avg_pool3d"]


@composite("max_pool2d")
def max_pool2d(
    input: Tensor,  # noqa: A002 - torch's argument name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor:
    """Maximum over each (kh, kw) window of (N, C, H, W) or (C, H, W) input; padding counts as -inf.

    ``stride`` defaults to ``kernel_size``.  The gradient goes to the first
    maximum of each window among its real (non-padding) elements, as in
    torch.  Raises ValueError for padding above half the effective kernel or a
    window larger than the padded input; NotImplementedError for
    ``ceil_mode`` / ``return_indices``.
    """
    _unsupported("max_pool2d", ceil_mode=ceil_mode, return_indices=return_indices)
    kernel, stride_, pads, dilation_ = _args("max_pool2d", input, kernel_size, stride, padding, dilation)
    if tiles(kernel, stride_, pads, dilation_):
        x = input.unsqueeze(0) if input.ndim == 3 else input
        out = call(TILED_MAX_POOL2D, x, kernel=kernel)
        return out.squeeze(0) if input.ndim == 3 else out
    taps = windows(pad2d(input, pads, float("-inf")), kernel, stride_, dilation_)
    axis = input.ndim - 2
    if pads == ((0, 0), (0, 0)):
        return reduction.max(taps, axis).values
    first = _first_real_maximum(taps.detach(), input.shape[-2:], pads, kernel, stride_, dilation_)
    return call(reduction.MAX_ALONG, taps, first, axis=axis, keepdims=False)


@composite("avg_pool2d")
def avg_pool2d(
    input: Tensor,  # noqa: A002 - torch's argument name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over each (kh, kw) window of (N, C, H, W) or (C, H, W) input; zero padding.

    The divisor is kh * kw (``count_include_pad=True``), the number of
    non-padding elements in the window (False), or ``divisor_override``.
    float16/bfloat16 are summed and divided in float32, then rounded once.
    Raises ValueError like :func:`max_pool2d`; NotImplementedError for ``ceil_mode``.
    """
    _unsupported("avg_pool2d", ceil_mode=ceil_mode)
    kernel, stride_, pads, dilation = _args("avg_pool2d", input, kernel_size, stride, padding, 1)
    _check_divisor("avg_pool2d", divisor_override)
    # float16/bfloat16 windows are summed and divided in float32 and rounded once, as torch's kernel:
    # a rounded float16 window sum overflows (65504) long before the mean does.
    x = opmath(input)
    total = windows(pad2d(x, pads), kernel, stride_, dilation).sum(x.ndim - 2)

    def real_counts() -> Tensor:  # per position, the real (non-padding) elements: pool a padded image of ones
        mask = pad2d(ones(x.shape[-2:], dtype=x.dtype, device=x.device), pads)
        return windows(mask, kernel, stride_, dilation).sum(0)

    whole = count_include_pad or pads == ((0, 0), (0, 0))
    return ew.cast(_divide(total, divisor_override, whole, kernel, real_counts), input.dtype)


def _first_real_maximum(
    taps: Tensor, size: tuple[int, ...], pads: Any, kernel: Any, stride: Any, dilation: Any
) -> Tensor:
    """Index along the tap axis of each window's first maximum that is not padding (a NaN counts as the maximum).

    The padding is -inf, so in a window whose real values are all -inf a padded
    tap ties for the maximum; if it came first, the gradient would be lost in
    the padding.  torch's kernel only ever looks at real elements.
    """
    axis = taps.ndim - 3
    real = windows(pad2d(ones(size, dtype=taps.dtype, device=taps.device), pads), kernel, stride, dilation)
    hit = ew.cast(taps == reduction.amax(taps, axis, keepdim=True), taps.dtype) + ew.cast(taps != taps, taps.dtype)
    return reduction.argmax(hit * real, axis)


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
            raise ValueError(
                f"{op}(): padding {padding!r} must be at most half the effective kernel size "
                f"{kernel} (dilation {dilation_})"
            )
    pads = ((pad[0], pad[0]), (pad[1], pad[1]))
    for size, k, s, lo_hi, d in zip(x.shape[-2:], kernel, stride_, pads, dilation_):
        if output_size(size, k, s, lo_hi, d) <= 0:
            raise ValueError(
                f"{op}(): kernel {kernel} is larger than the padded input of shape {x.shape} "
                f"(padding {padding!r}, dilation {dilation_})"
            )
    return kernel, stride_, pads, dilation_


def _unsupported(op: str, **flags: bool) -> None:
    for name, value in flags.items():
        if value:
            raise NotImplementedError(f"{op}(): {name}=True is not supported yet")


@declared(
    "avg_pool1d",
    variants=("function",),
    signature="avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True)",
    example=Example((Input((2, 3, 9)),), {"kernel_size": 3, "stride": 2, "padding": 1}, n=3),
    reference=lambda x, kernel_size, stride, padding: _avg_pool_reference(x, (kernel_size,), (stride,), (padding,)),
)
def avg_pool1d(
    input: Tensor,  # noqa: A002 - torch's argument name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """Mean over each window of (N, C, L) or (C, L) input (torch.nn.functional.avg_pool1d): avg_pool2d over a
    height-1 image."""
    if input.ndim not in (2, 3):
        raise ValueError(f"avg_pool1d() needs a 3-D (N, C, L) or 2-D (C, L) input, got shape {input.shape}")
    (k,) = ntuple(kernel_size, 1, "kernel_size", "avg_pool1d", minimum=1)
    (s,) = (k,) if stride is None or stride == () else ntuple(stride, 1, "stride", "avg_pool1d", minimum=1)
    (p,) = ntuple(padding, 1, "padding", "avg_pool1d")
    out = avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad)
    return out.squeeze(-2)


@declared(
    "avg_pool3d",
    variants=(),
    torch_function="_C._nn.avg_pool3d",
    signature=(
        "avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, "
        "divisor_override=None) -> Tensor"
    ),
    example=Example((Input((1, 2, 4, 5, 5)),), {"kernel_size": (2, 3, 3), "stride": (2, 2, 1), "padding": 1}, n=18),
    reference=lambda x, kernel_size, stride, padding: _avg_pool_reference(x, kernel_size, stride, (padding,) * 3),
)
def avg_pool3d(
    input: Tensor,  # noqa: A002 - torch's argument name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over each (kd, kh, kw) window of (N, C, D, H, W) or (C, D, H, W) input, zero padding
    (torch.nn.functional.avg_pool3d): the depth taps are summed, then every depth plane's windows by
    avg_pool2d's sums; 16-bit inputs in float32, rounded once.  The divisor as in :func:`avg_pool2d`."""
    _unsupported("avg_pool3d", ceil_mode=ceil_mode)
    check_float(input, "input", "avg_pool3d")
    if input.ndim not in (4, 5):
        raise ValueError(f"avg_pool3d() needs a 5-D (N, C, D, H, W) or 4-D input, got shape {input.shape}")
    kernel = ntuple(kernel_size, 3, "kernel_size", "avg_pool3d", minimum=1)
    stride_ = kernel if stride is None or stride == () else ntuple(stride, 3, "stride", "avg_pool3d", minimum=1)
    pad = ntuple(padding, 3, "padding", "avg_pool3d")
    if any(2 * p > k for p, k in zip(pad, kernel)):
        raise ValueError(f"avg_pool3d(): padding {padding!r} must be at most half the kernel size {kernel}")
    _check_divisor("avg_pool3d", divisor_override)
    x = opmath(input)
    total = _window_sums3d(x, kernel, stride_, pad)

    def real_counts() -> Tensor:
        return _window_sums3d(ones(x.shape[-3:], dtype=x.dtype, device=x.device), kernel, stride_, pad)

    whole = count_include_pad or not any(pad)
    return ew.cast(_divide(total, divisor_override, whole, kernel, real_counts), input.dtype)


def _check_divisor(op: str, divisor_override: Any) -> None:
    if divisor_override is not None and (not isinstance(divisor_override, int) or divisor_override <= 0):
        raise ValueError(f"{op}(): divisor_override must be a positive int, got {divisor_override!r}")


def _divide(
    total: Tensor, divisor_override: int | None, whole: bool, kernel: tuple[int, ...], real_counts: Callable[[], Tensor]
) -> Tensor:
    """Each window's mean: its sum over ``divisor_override``, over the kernel's size (``whole``: padding counts),
    or over its real (non-padding) elements."""
    if divisor_override is not None:
        return total / float(divisor_override)
    if whole:
        return total / float(math.prod(kernel))
    return total / real_counts()


def _window_sums3d(x: Tensor, kernel: Any, stride: Any, pad: Any) -> Tensor:
    """The sum of each zero-padded (kd, kh, kw) window over the last three dimensions."""
    (kd, kh, kw), (sd, sh, sw), (pd, ph, pw) = kernel, stride, pad
    padded = pad2d(x, ((ph, ph), (pw, pw))) if ph or pw else x
    if pd:
        padded = ops_pad(padded, (0, 0, 0, 0, pd, pd))
    depth, h, w = padded.shape[-3:]
    do = output_size(depth, kd, sd, (0, 0), 1)
    if do <= 0 or output_size(h, kh, sh, (0, 0), 1) <= 0 or output_size(w, kw, sw, (0, 0), 1) <= 0:
        raise ValueError(f"avg_pool3d(): kernel {kernel} is larger than the padded input of shape {x.shape}")
    lead = (slice(None),) * (padded.ndim - 3)
    planes = padded[lead + (slice(0, sd * (do - 1) + 1, sd),)]
    for i in range(1, kd):
        planes = planes + padded[lead + (slice(i, i + sd * (do - 1) + 1, sd),)]
    return windows(planes, (kh, kw), (sh, sw), (1, 1)).sum(planes.ndim - 2)


def _avg_pool_reference(x: np.ndarray, kernel: Any, stride: Any, padding: Any) -> np.ndarray:
    """Mean of each zero-padded window (count_include_pad), in float64, any number of pooled dimensions."""
    k = len(kernel)
    xp = np.pad(x, ((0, 0),) * (x.ndim - k) + tuple((p, p) for p in padding))
    sizes = [(xp.shape[x.ndim - k + i] - kernel[i]) // stride[i] + 1 for i in range(k)]
    out = np.zeros(x.shape[: x.ndim - k] + tuple(sizes), dtype=x.dtype)
    for offsets in np.ndindex(*kernel):
        index = tuple(slice(o, o + s * (n - 1) + 1, s) for o, s, n in zip(offsets, stride, sizes))
        out = out + xp[(slice(None),) * (x.ndim - k) + index]
    return out / float(np.prod(kernel))
