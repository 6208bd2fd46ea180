"""pixel_shuffle and pixel_unshuffle: channels traded for a finer image and back (sub-pixel convolution), by
reshape and permute alone (exact; the gradient is the inverse rearrangement)."""

from __future__ import annotations

import numpy as np

from ...ops.declare import Example, Input, composite
from ...tensor import Tensor
from ._utils import check_tensor

__all__ = ["pixel_shuffle", "pixel_unshuffle"]


def _factor(op: str, r: int) -> int:
    if isinstance(r, bool) or not isinstance(r, int) or r <= 0:
        raise ValueError(f"{op}(): the factor must be a positive int, got {r!r}")
    return r


def _shuffle_reference(x: np.ndarray, upscale_factor: int) -> np.ndarray:
    """Element by element from the definition."""
    r = upscale_factor
    *lead, c, h, w = x.shape
    out = np.zeros((*lead, c // (r * r), h * r, w * r), dtype=x.dtype)
    for k in range(c // (r * r)):
        for i in range(r):
            for j in range(r):
                out[..., k, i::r, j::r] = x[..., k * r * r + i * r + j, :, :]
    return out


@composite(
    "pixel_shuffle",
    variants=("function",),
    signature="pixel_shuffle(input, upscale_factor) -> Tensor",
    example=Example((Input((2, 8, 3, 4)),), {"upscale_factor": 2}, rule="exact"),
    reference=_shuffle_reference,
)
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:  # noqa: A002 - torch's argument name
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r): ``out[..., c, h*r + i, w*r + j] = in[..., c*r*r + i*r + j, h, w]``
    (torch.pixel_shuffle).  ValueError where the channels are not a multiple of r^2."""
    check_tensor(input, "input", "pixel_shuffle")
    r = _factor("pixel_shuffle", upscale_factor)
    if input.ndim < 3 or input.shape[-3] % (r * r):
        raise ValueError(f"pixel_shuffle(): input of shape {input.shape} needs (*, C * {r * r}, H, W)")
    *lead, c, h, w = input.shape
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    order = list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2]
    return x.permute(order).reshape(*lead, c // (r * r), h * r, w * r)


@composite(
    "pixel_unshuffle",
    variants=("function",),
    signature="pixel_unshuffle(input, downscale_factor) -> Tensor",
    example=Example((Input((2, 2, 6, 4)),), {"downscale_factor": 2}, rule="exact"),
    reference=lambda x, downscale_factor: _unshuffle_reference(x, downscale_factor),
)
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:  # noqa: A002 - torch's argument name
    """The inverse of :func:`pixel_shuffle`: (*, C, H * r, W * r) -> (*, C * r^2, H, W) (torch.pixel_unshuffle)."""
    check_tensor(input, "input", "pixel_unshuffle")
    r = _factor("pixel_unshuffle", downscale_factor)
    if input.ndim < 3 or input.shape[-2] % r or input.shape[-1] % r:
        raise ValueError(f"pixel_unshuffle(): input of shape {input.shape} needs (*, C, H * {r}, W * {r})")
    *lead, c, hr, wr = input.shape
    n = len(lead)
    x = input.reshape(*lead, c, hr // r, r, wr // r, r)
    order = list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3]
    return x.permute(order).reshape(*lead, c * r * r, hr // r, wr // r)


def _unshuffle_reference(x: np.ndarray, r: int) -> np.ndarray:
    *lead, c, hr, wr = x.shape
    n = len(lead)
    y = x.reshape(*lead, c, hr // r, r, wr // r, r)
    return np.transpose(y, list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3]).reshape(*lead, c * r * r, hr // r, wr // r)
