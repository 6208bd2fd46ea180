"""conv2d as one op with its own backward, written against the primitive kernels (every backend runs it).

Differentiating im2col through autograd (a slice per kernel tap, then a
stack) kept the whole column matrix, nine times the input for a 3x3 kernel,
for backward, and its backward wrote each tap's gradient into a full-size
zero array.  Here:

* the columns are built channel-major, (C, kh*kw, N, Ho*Wo), so the forward
  is one GEMM per group, ``W (O/G, C/G*kh*kw) @ cols (C/G*kh*kw, N*Ho*Wo)``;
* only the (unpadded) input and the weight are saved; backward rebuilds the
  columns and takes the weight gradient as one GEMM, ``cols @ g^T``, summed
  over batch and positions by the GEMM itself (float32 accumulation, one
  rounding for float16/bfloat16);
* the input gradient is the transposed convolution, computed as a forward
  one: the output gradient with ``stride - 1`` zeros between elements, padded
  by ``dilation * (k - 1)``, correlated with the flipped, transposed weight.
  That is another im2col and one GEMM per group: no scatter, no per-tap
  full-size temporaries.
"""

from __future__ import annotations

from typing import Any

from ...ops.base import Op
from ._windows import output_size

_ALL = slice(None)


def im2col(
    k: Any,
    xt: Any,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    out_hw: tuple[int, int],
) -> Any:
    """(A, B, H, W) already padded -> (A, kh*kw, B, Ho, Wo): tap ``i*kw + j`` at (r, c) is
    ``x[..., i*dh + sh*r, j*dw + sw*c]`` (conv passes A, B = C, N; pooling N, C)."""
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out_hw
    c, n = k.shape_of(xt)[:2]
    taps = [
        k.reshape(
            k.slice(
                xt,
                (
                    _ALL,
                    _ALL,
                    slice(i * dh, i * dh + sh * (ho - 1) + 1, sh),
                    slice(j * dw, j * dw + sw * (wo - 1) + 1, sw),
                ),
            ),
            (c, 1, n, ho, wo),
        )
        for i in range(kh)
        for j in range(kw)
    ]
    return taps[0] if len(taps) == 1 else k.concat(taps, 1)


def _channel_major(k: Any, x: Any, pads: Any) -> Any:
    """(N, C, H, W) -> padded (C, N, Hp, Wp): a view where the backend's transpose is one."""
    (top, bottom), (left, right) = pads
    xt = k.transpose(x, (1, 0, 2, 3))
    if top == bottom == left == right == 0:
        return xt
    return k.pad(xt, ((0, 0), (0, 0), (top, bottom), (left, right)), 0.0)


class Conv2d(Op):
    """(N, C, H, W) input and (O, C/G, kh, kw) weight -> (N, O, Ho, Wo); bias is added outside."""

    name = "conv2d"

    def forward(self, ctx, k, x, w, *, stride, pads, dilation, groups):
        n, c, h, wd = k.shape_of(x)
        o, cg, kh, kw = k.shape_of(w)
        ho = output_size(h, kh, stride[0], pads[0], dilation[0])
        wo = output_size(wd, kw, stride[1], pads[1], dilation[1])
        x_needs, w_needs = ctx.needs_input_grad
        ctx.x, ctx.w = (x if w_needs else None), (w if x_needs else None)
        ctx.geometry = (stride, pads, dilation, groups, (n, c, h, wd), (o, cg, kh, kw), (ho, wo))
        cols = self._columns(k, x, ctx.geometry)
        out = k.matmul(k.reshape(w, (groups, o // groups, cg * kh * kw)), cols)  # (G, O/G, N*Ho*Wo)
        return k.transpose(k.reshape(out, (o, n, ho, wo)), (1, 0, 2, 3))

    @staticmethod
    def _columns(k, x, geometry):
        stride, pads, dilation, groups, (n, _, _, _), (_, cg, kh, kw), (ho, wo) = geometry
        cols = im2col(k, _channel_major(k, x, pads), (kh, kw), stride, dilation, (ho, wo))
        return k.reshape(cols, (groups, cg * kh * kw, n * ho * wo))

    def backward(self, ctx, k, g):
        stride, pads, dilation, groups, x_shape, w_shape, (ho, wo) = ctx.geometry
        n, (o, _cg, _kh, _kw) = x_shape[0], w_shape
        gx = self._input_grad(ctx, k, g) if ctx.needs_input_grad[0] else None
        gw = None
        if ctx.needs_input_grad[1]:
            # cols (G, C/G*kh*kw, M) @ g^T (G, M, O/G), both contiguous: NumPy's batched matmul takes its
            # slow non-BLAS loop when an operand is a transposed view (217 ms against 8.5 ms here).
            cols = self._columns(k, ctx.x, ctx.geometry)
            g4 = k.reshape(g, (n, groups, o // groups, ho * wo))
            gt = k.reshape(k.transpose(g4, (1, 0, 3, 2)), (groups, n * ho * wo, o // groups))
            gw_t = k.matmul(cols, gt)  # (G, C/G*kh*kw, O/G)
            gw = k.reshape(k.transpose(gw_t, (0, 2, 1)), w_shape)
        return gx, gw

    @staticmethod
    def _input_grad(ctx, k, g):
        stride, pads, dilation, groups, (n, c, h, wd), (o, cg, kh, kw), (ho, wo) = ctx.geometry
        (sh, sw), (dh, dw) = stride, dilation
        gt = k.transpose(g, (1, 0, 2, 3))  # (O, N, Ho, Wo)
        if sh > 1 or sw > 1:  # zeros between the output positions: the stride's gaps
            spread = k.full((o, n, (ho - 1) * sh + 1, (wo - 1) * sw + 1), 0.0, k.dtype_of(g), ctx.device_index)
            gt = k.slice_assign(spread, (_ALL, _ALL, slice(None, None, sh), slice(None, None, sw)), gt)
        hp, wp = h + pads[0][0] + pads[0][1], wd + pads[1][0] + pads[1][1]
        # Full correlation over the padded input, then only the rows and columns of the unpadded one.
        q = k.pad(
            gt, ((0, 0), (0, 0), (dh * (kh - 1), hp - (ho - 1) * sh - 1), (dw * (kw - 1), wp - (wo - 1) * sw - 1)), 0.0
        )
        q = k.slice(
            q,
            (
                _ALL,
                _ALL,
                slice(pads[0][0], pads[0][0] + h + dh * (kh - 1)),
                slice(pads[1][0], pads[1][0] + wd + dw * (kw - 1)),
            ),
        )
        cols = k.reshape(
            im2col(k, q, (kh, kw), (1, 1), dilation, (h, wd)), (groups, (o // groups) * kh * kw, n * h * wd)
        )
        flipped = k.slice(ctx.w, (_ALL, _ALL, slice(None, None, -1), slice(None, None, -1)))
        wt = k.reshape(
            k.transpose(k.reshape(flipped, (groups, o // groups, cg, kh * kw)), (0, 2, 1, 3)),
            (groups, cg, (o // groups) * kh * kw),
        )
        gx = k.reshape(k.matmul(wt, cols), (c, n, h, wd))
        return k.transpose(gx, (1, 0, 2, 3))


CONV2D = Conv2d()
