"""Convolutions (conv1d, conv2d) by im2col: sliding windows times the weight matrix, per group.

For input (N, C, H, W) and weight (O, C/G, kh, kw) the windows form
(G, C/G * kh * kw, N * Ho * Wo); the weight, viewed as (G, O/G, C/G * kh * kw),
multiplies them in one GEMM per group (float32 accumulation for low
precision).  The op and its backward are in :mod:`._conv_op`.  conv1d is
conv2d over a height-1 image.
"""

from __future__ import annotations

from typing import Any

from ...dispatch import call, composite
from ...tensor import Tensor
from ._conv_op import CONV2D
from ._utils import check_float, check_tensor, ntuple
from ._windows import Pads, output_size

__all__ = ["conv1d", "conv2d"]


@composite("conv2d")
def conv2d(
    input: Tensor,  # noqa: A002 - torch's argument name
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """2-D cross-correlation of (N, C, H, W) (or unbatched (C, H, W)) input with an (O, C/groups, kh, kw) weight.

    ``stride``, ``dilation``: int or (h, w); ``padding``: int, (h, w), 'valid' or 'same'.
    Raises ValueError for mismatched shapes (showing both), bad groups or a kernel larger than the padded input.
    """
    _check_args("conv2d", input, weight, bias, groups, spatial=2)
    stride_ = ntuple(stride, 2, "stride", "conv2d", minimum=1)
    dilation_ = ntuple(dilation, 2, "dilation", "conv2d", minimum=1)
    pads = _padding(padding, weight.shape[-2:], stride_, dilation_, "conv2d")
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    out = _conv2d(x, weight, bias, stride_, pads, dilation_, groups)
    return out.squeeze(0) if unbatched else out


@composite("conv1d")
def conv1d(
    input: Tensor,  # noqa: A002 - torch's argument name
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """1-D cross-correlation of (N, C, L) (or unbatched (C, L)) input with an (O, C/groups, k) weight.

    ``padding``: int, (p,), 'valid' or 'same'.  Raises ValueError as :func:`conv2d` does.
    """
    _check_args("conv1d", input, weight, bias, groups, spatial=1)
    (s,) = ntuple(stride, 1, "stride", "conv1d", minimum=1)
    (d,) = ntuple(dilation, 1, "dilation", "conv1d", minimum=1)
    (p,) = _padding(padding, weight.shape[-1:], (s,), (d,), "conv1d")
    if output_size(input.shape[-1], weight.shape[-1], s, p, d) <= 0:  # checked here to name the user's shapes
        raise ValueError(
            f"conv1d(): kernel of shape {weight.shape} (dilation {d}) is larger than the padded "
            f"input: input shape {input.shape}, padding {p}"
        )
    unbatched = input.ndim == 2
    x = (input.unsqueeze(0) if unbatched else input).unsqueeze(2)
    out = _conv2d(x, weight.unsqueeze(2), bias, (1, s), ((0, 0), p), (1, d), groups).squeeze(2)
    return out.squeeze(0) if unbatched else out


def _conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: tuple[int, ...],
    pads: Pads,
    dilation: tuple[int, ...],
    groups: int,
) -> Tensor:
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    ho = output_size(h, kh, stride[0], pads[0], dilation[0])
    wo = output_size(w, kw, stride[1], pads[1], dilation[1])
    if ho <= 0 or wo <= 0:
        raise ValueError(
            f"convolution kernel of shape {weight.shape} (dilation {dilation}) is larger than the "
            f"padded input: input shape {x.shape}, padding {pads}"
        )
    out = call(CONV2D, x, weight, stride=stride, pads=pads, dilation=dilation, groups=groups)
    return out if bias is None else out + bias.reshape(1, o, 1, 1)


def _check_args(op: str, x: Any, weight: Any, bias: Any, groups: Any, spatial: int, transposed: bool = False) -> None:
    """The checks every convolution shares; a transposed one's weight is (C_in, C_out/groups, k...)."""
    check_float(x, "input", op)
    check_tensor(weight, "weight", op)
    if x.ndim not in (spatial + 1, spatial + 2) or weight.ndim != spatial + 2:
        raise ValueError(
            f"{op}() needs a {spatial + 2}-D (or unbatched {spatial + 1}-D) input and a "
            f"{spatial + 2}-D weight, got shapes {x.shape} and {weight.shape}"
        )
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"{op}(): groups must be a positive int, got {groups!r}")
    channels = x.shape[-spatial - 1]
    expected = weight.shape[0] if transposed else weight.shape[1] * groups
    if channels != expected:
        raise ValueError(
            f"{op}(): input of shape {x.shape} has {channels} channels, but weight of shape "
            f"{weight.shape} with groups={groups} expects {expected}"
        )
    if weight.shape[0] % groups:
        name = "in_channels" if transposed else "out_channels"
        raise ValueError(
            f"{op}(): {name} {weight.shape[0]} (weight shape {weight.shape}) is not divisible by groups={groups}"
        )
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if bias is not None and (check_tensor(bias, "bias", op).shape != (out_channels,)):
        raise ValueError(
            f"{op}(): bias of shape {bias.shape} does not match weight of shape {weight.shape}; "
            f"expected ({out_channels},)"
        )


def _padding(
    padding: Any, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...], op: str
) -> tuple[tuple[int, int], ...]:
    """(lo, hi) per spatial dimension; 'same' puts the odd extra element at the end, as torch does."""
    n = len(kernel)
    if padding == "valid":
        return ((0, 0),) * n
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError(f"{op}(): padding='same' needs stride 1, got stride {stride}")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in totals)
    if isinstance(padding, str):
        raise ValueError(f"{op}(): unknown padding {padding!r}; use an int, a tuple, 'valid' or 'same'")
    return tuple((p, p) for p in ntuple(padding, n, "padding", op))
