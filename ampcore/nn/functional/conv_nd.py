"""conv3d and the transposed convolutions (conv_transpose1d/2d/3d), as compositions of conv2d (:mod:`.conv`).

conv3d stacks the depth taps of every output depth onto the channels, ``(N * Do, C * kd, H, W)``, so the whole
3-D convolution is one 2-D convolution (one GEMM per group, float32 accumulation, one rounding) with the weight
viewed as ``(O, C/g * kd, kh, kw)``.

A transposed convolution is the gradient of a convolution with respect to its input, computed as a forward one:
the input with ``stride - 1`` zeros between its elements, padded by ``dilation * (k - 1) - padding`` (and
``output_padding`` at the end; a negative width crops), correlated with the weight flipped in space and with
its channel axes swapped per group.  Each is a declared op (:mod:`ampcore.ops.declare`): torch's autocast lists
run all four in the lower precision.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ops import pad as constant_pad
from ...ops import stack
from ...ops.declare import Example, Input, composite
from ...tensor import Tensor
from ._utils import ntuple
from ._windows import output_size
from .conv import _check_args, _padding, conv1d, conv2d
from .padding import pad

__all__ = ["conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]


@composite(
    "conv3d",
    variants=("function",),
    signature="conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor",
    example=Example(
        (Input((2, 3, 4, 5, 5)), Input((4, 3, 2, 3, 3)), Input((4,))),
        {"stride": (1, 2, 1), "padding": 1},
        rule="sum",
        n=55,
        n_grad=(72, 150, 150),
        roundings=1,
    ),
    reference=lambda x, w, b, stride, padding: _conv3d_reference(x, w, b, stride, padding),
)
def conv3d(
    input: Tensor,  # noqa: A002 - torch's argument name
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """3-D cross-correlation of (N, C, D, H, W) (or unbatched (C, D, H, W)) input with an (O, C/groups, kd, kh, kw)
    weight (torch.nn.functional.conv3d).  ``padding``: an int, a triple, 'valid' or 'same'."""
    _check_args("conv3d", input, weight, bias, groups, 3)
    s = ntuple(stride, 3, "stride", "conv3d", minimum=1)
    d = ntuple(dilation, 3, "dilation", "conv3d", minimum=1)
    kd, kh, kw = weight.shape[2:]
    pads = _padding(padding, (kd, kh, kw), s, d, "conv3d")
    unbatched = input.ndim == 4
    x = input.unsqueeze(0) if unbatched else input
    x = constant_pad(x, [w for lo_hi in reversed(pads) for w in lo_hi]) if any(map(any, pads)) else x
    n, c, depth, h, w = x.shape
    do = output_size(depth, kd, s[0], (0, 0), d[0])
    if do <= 0:
        raise ValueError(f"conv3d(): kernel of shape {weight.shape} is larger than the padded input {x.shape}")
    # (N, C, kd, Do, H, W) -> (N, Do, C, kd, H, W) -> (N * Do, C * kd, H, W): depth taps beside each channel
    taps = [x[:, :, i * d[0] : i * d[0] + s[0] * (do - 1) + 1 : s[0]] for i in range(kd)]
    stacked = stack(taps, 2)
    planes = stacked.permute(0, 3, 1, 2, 4, 5).reshape(n * do, c * kd, h, w)
    o = weight.shape[0]
    out = conv2d(planes, weight.reshape(o, weight.shape[1] * kd, kh, kw), None, s[1:], 0, d[1:], groups)
    out = out.reshape(n, do, o, *out.shape[2:]).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape(1, o, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def _conv3d_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: Any, padding: int) -> np.ndarray:
    """Direct 3-D correlation in float64 (complex-step safe)."""
    xp = np.pad(x, ((0, 0), (0, 0)) + ((padding, padding),) * 3)
    n, c, dd, hh, ww = xp.shape
    o, _, kd, kh, kw = w.shape
    sd, sh, sw = stride
    do, ho, wo = (dd - kd) // sd + 1, (hh - kh) // sh + 1, (ww - kw) // sw + 1
    out = np.zeros((n, o, do, ho, wo), dtype=np.result_type(x, w, b))
    for i in range(kd):
        for j in range(kh):
            for k in range(kw):
                patch = xp[
                    :, :, i : i + sd * (do - 1) + 1 : sd, j : j + sh * (ho - 1) + 1 : sh, k : k + sw * (wo - 1) + 1 : sw
                ]
                out += np.einsum("ncdhw,oc->nodhw", patch, w[:, :, i, j, k])
    return out + b.reshape(1, o, 1, 1, 1)


_CONV = {1: conv1d, 2: conv2d, 3: conv3d}


def _conv_transpose(
    op: str,
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: int,
    dilation: Any,
    dims: int,
) -> Tensor:
    _check_args(op, x, weight, bias, groups, dims, transposed=True)
    s = ntuple(stride, dims, "stride", op, minimum=1)
    p = ntuple(padding, dims, "padding", op)
    op_ = ntuple(output_padding, dims, "output_padding", op)
    d = ntuple(dilation, dims, "dilation", op, minimum=1)
    for extra, si, di in zip(op_, s, d):
        if extra >= max(si, di):
            raise ValueError(f"{op}(): output_padding {op_} must be smaller than stride {s} or dilation {d}")
    unbatched = x.ndim == dims + 1
    z = x.unsqueeze(0) if unbatched else x
    kernel = weight.shape[2:]
    for i, si in enumerate(s):  # stride - 1 zeros between the elements of each spatial dimension
        if si > 1 and z.shape[2 + i] > 0:
            axis = 2 + i
            spread = z.unsqueeze(axis + 1)
            spread = constant_pad(spread, [0, 0] * (z.ndim - axis - 1) + [0, si - 1])
            n = z.shape[axis]
            z = spread.reshape(*z.shape[:axis], n * si, *z.shape[axis + 1 :])[
                (slice(None),) * axis + (slice(0, (n - 1) * si + 1),)
            ]
    widths = []
    for i in reversed(range(dims)):
        edge = d[i] * (kernel[i] - 1) - p[i]
        widths += [edge, edge + op_[i]]
    z = pad(z, widths)
    cin, cout_g = weight.shape[:2]
    w = (
        weight.reshape(groups, cin // groups, cout_g, *kernel)
        .transpose(1, 2)
        .reshape(groups * cout_g, cin // groups, *kernel)
    )
    w = w.flip(tuple(range(2, 2 + dims)))
    out = _CONV[dims](z, w, bias, 1, 0, d, groups)
    return out.squeeze(0) if unbatched else out


def _transpose_reference(dims: int) -> Any:
    def ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: Any, padding: Any) -> np.ndarray:
        """Scatter form, straight from the definition: each input element adds its weighted kernel to the output."""
        n, cin = x.shape[:2]
        _, cout, *k = w.shape
        size = [(x.shape[2 + i] - 1) * stride[i] - 2 * padding + k[i] for i in range(dims)]
        full = np.zeros((n, cout, *[sz + 2 * padding for sz in size]), dtype=np.result_type(x, w, b))
        for pos in np.ndindex(*x.shape[2:]):
            contrib = np.einsum("nc,co...->no...", x[(slice(None), slice(None), *pos)], w)
            index = tuple(slice(pos[i] * stride[i], pos[i] * stride[i] + k[i]) for i in range(dims))
            full[(slice(None), slice(None), *index)] += contrib
        crop = tuple(slice(padding, padding + sz) for sz in size)
        return full[(slice(None), slice(None), *crop)] + b.reshape(1, cout, *([1] * dims))

    return ref


def _declare_transpose(
    dims: int, shapes: tuple[tuple[int, ...], ...], stride: tuple[int, ...], fan: tuple[int, ...]
) -> Any:
    name = f"conv_transpose{dims}d"

    def op(
        input: Tensor,  # noqa: A002 - torch's argument name
        weight: Tensor,
        bias: Tensor | None = None,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        dilation: Any = 1,
    ) -> Tensor:
        return _conv_transpose(name, input, weight, bias, stride, padding, output_padding, groups, dilation, dims)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (
        f"torch.nn.functional.{name}: the transposed {dims}-D convolution of (N, C_in, ...) input with a (C_in, "
        "C_out/groups, k...) weight; the output size is (in - 1) * stride - 2 * padding + dilation * (k - 1) + "
        "output_padding + 1."
    )
    return composite(
        name,
        variants=("function",),
        signature=f"{name}(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)",
        example=Example(
            tuple(Input(s) for s in shapes),
            {"stride": stride, "padding": 1},
            rule="sum",
            n=fan[0],
            n_grad=fan[1:],
            roundings=1,
        ),
        reference=_transpose_reference(dims),
    )(op)


# (N, C_in, ...), (C_in, C_out, k...), (C_out,); stride 2, padding 1.  The fan-ins: an output sums at most
# C_in * ceil(k / stride) per dimension (+ the bias); x's gradient C_out * k...; w's N * in...; b's N * out...
conv_transpose1d = _declare_transpose(1, ((2, 3, 5), (3, 4, 3), (4,)), (2,), (7, 12, 10, 18))
conv_transpose2d = _declare_transpose(2, ((2, 3, 4, 5), (3, 4, 3, 3), (4,)), (2, 2), (13, 36, 40, 126))
conv_transpose3d = _declare_transpose(3, ((1, 2, 3, 3, 4), (2, 3, 3, 3, 2), (3,)), (1, 2, 2), (13, 54, 36, 90))
