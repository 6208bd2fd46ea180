"""Sliding windows over the last two dimensions (im2col), shared by convolution and pooling.

Built only from primitives: constant padding, strided basic slicing and
stacking, so autograd differentiates it with no rule of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ops import pad, stack
from ...tensor import Tensor

# (lo, hi) padding per spatial dimension (two for the 2-D ops).
Pads = tuple[tuple[int, int], ...]


def output_size(size: int, kernel: int, stride: int, pads: tuple[int, int], dilation: int) -> int:
    """Number of window positions along one dimension (may be <= 0 if the kernel does not fit)."""
    return (size + pads[0] + pads[1] - dilation * (kernel - 1) - 1) // stride + 1


def pad2d(x: Tensor, pads: Pads, value: float = 0.0) -> Tensor:
    """Pad the last two dimensions by ((top, bottom), (left, right)) with ``value``."""
    (top, bottom), (left, right) = pads
    if top == bottom == left == right == 0:
        return x
    return pad(x, (left, right, top, bottom), value)


def windows(x: Tensor, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int]) -> Tensor:
    """(..., H, W) already padded -> (..., kh * kw, Ho, Wo): every kernel tap, strided over the image.

    Tap ``i * kw + j`` holds ``x[..., i*dh + s*r, j*dw + s*c]`` at output position (r, c).
    """
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    h, w = x.shape[-2:]
    ho = output_size(h, kh, sh, (0, 0), dh)
    wo = output_size(w, kw, sw, (0, 0), dw)
    taps = [
        x[..., i * dh : i * dh + sh * ho : sh, j * dw : j * dw + sw * wo : sw] for i in range(kh) for j in range(kw)
    ]
    return stack(taps, x.ndim - 2)
