"""max_pool2d over non-overlapping windows as one op, written against the primitive kernels.

The general path (:func:`.pooling.max_pool2d`) differentiates im2col through
autograd: a slice per tap and a stack, whose backward writes each tap's
gradient into a full-size zero array, then a scatter-add for the maximum.
For windows that tile the input (stride = kernel, no dilation, no padding:
the usual ``max_pool2d(x, k)``) each input element is in at most one window,
so the backward is exact without any scatter: the gradient goes to the first
maximum of its window through one ``where`` against the saved tap index, and
the taps fold back into the image by one transpose.  A backend with the fused
kernels ``max_pool2d_tiled`` / ``max_pool2d_tiled_backward`` runs them instead
(one pass each way; the backward finds each window's first maximum again in
the saved input, which the preceding activation usually holds anyway).
"""

from __future__ import annotations

from typing import Any

from ... import dtypes as dt
from ...ops.base import Op
from ._conv_op import im2col

_ALL = slice(None)


def tiles(kernel: tuple[int, int], stride: tuple[int, int], pads: Any, dilation: tuple[int, int]) -> bool:
    """Whether the windows tile the input: this op's case."""
    return tuple(stride) == tuple(kernel) and tuple(dilation) == (1, 1) and pads == ((0, 0), (0, 0))


class TiledMaxPool2d(Op):
    """(N, C, H, W) -> (N, C, H // kh, W // kw); the gradient goes to each window's first maximum (a NaN
    counts as the maximum), as torch's."""

    name = "max_pool2d"

    def forward(self, ctx, k, x, *, kernel):
        if k.has("max_pool2d_tiled") and k.has("max_pool2d_tiled_backward"):
            ctx.x, ctx.kernel = x, kernel
            return k.max_pool2d_tiled(x, kernel)
        ctx.x = None
        n, c, h, w = k.shape_of(x)
        (kh, kw), ho, wo = kernel, h // kernel[0], w // kernel[1]
        taps = im2col(k, x, kernel, kernel, (1, 1), (ho, wo))  # (N, kh*kw, C, Ho, Wo)
        ctx.idx, ctx.geometry = k.argmax(taps, 1), (n, c, h, w, kh, kw, ho, wo)
        return k.max(taps, (1,), False)

    def backward(self, ctx, k, g):
        if ctx.x is not None:
            return (k.max_pool2d_tiled_backward(ctx.x, g, ctx.kernel),)
        n, c, h, w, kh, kw, ho, wo = ctx.geometry
        taps = k.reshape(k.arange(0, kh * kw, 1, dt.int64, ctx.device_index), (1, kh * kw, 1, 1, 1))
        hit = k.eq(k.reshape(ctx.idx, (n, 1, c, ho, wo)), taps)
        gtaps = k.where(hit, k.reshape(g, (n, 1, c, ho, wo)), 0.0)  # (N, kh*kw, C, Ho, Wo)
        tiles_ = k.transpose(k.reshape(gtaps, (n, kh, kw, c, ho, wo)), (0, 3, 4, 1, 5, 2))
        gx = k.reshape(tiles_, (n, c, ho * kh, wo * kw))
        if (ho * kh, wo * kw) != (h, w):  # the rows and columns no window reached get no gradient
            gx = k.pad(gx, ((0, 0), (0, 0), (0, h - ho * kh), (0, w - wo * kw)), 0.0)
        return (gx,)


TILED_MAX_POOL2D = TiledMaxPool2d()
