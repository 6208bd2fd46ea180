"""Max-pooling over windows that tile the input: the fused kernels ``max_pool2d_tiled`` and its backward.

The core's reference composition (:mod:`ampcore.nn.functional._pool_op`) builds the taps with im2col (a
copy of the input), takes ``argmax`` and ``max`` over them, and its backward is ``eq``, ``where`` and a
permuting copy back into the image: about eight whole-array passes.  Here each window is read once forward
and once backward (:mod:`._pool_numba` for 2x2 windows on the compiled path; strided views of the taps
otherwise).  Both only move values, so every dtype gives the reference's bits:

* forward: the window's maximum by ``np.max``'s rule over the taps in row-major order (a NaN wins, the first
  one; of tied zeros the sign of the last, or of the first in float16);
* backward: the gradient at the window's first maximum (its first NaN), as ``argmax`` picks it; +0 at every
  other element, including rows and columns no window reaches.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from . import compiled
from .kernels import _quiet

_BITS_NAN = {np.dtype(np.float16): 0x7C00, np.dtype(dt.bfloat16.numpy): 0x7F80}  # NaN: magnitude bits above
_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


@functools.cache
def _loops() -> Any:
    """:mod:`._pool_numba` on the compiled path, else None (:mod:`.compiled`)."""
    return compiled.load("_pool_numba")


def _compiled_args(x: np.ndarray, kernel: tuple[int, int]) -> tuple[Any, np.ndarray, int] | None:
    """(loops, x as (N*C, H, W) in a type the loops take, NaN threshold), or None where they do not apply."""
    if tuple(kernel) != (2, 2) or x.ndim != 4:
        return None
    nan_above = 0 if x.dtype in _FLOATS else _BITS_NAN.get(x.dtype)
    loops = _loops() if nan_above is not None else None
    if loops is None:
        return None
    flat = np.ascontiguousarray(x).reshape((-1,) + x.shape[2:])
    return loops, (flat if nan_above == 0 else flat.view(np.uint16)), nan_above


def _taps(x: np.ndarray, kernel: tuple[int, int], out_hw: tuple[int, int]) -> list[np.ndarray]:
    """The strided views of ``x``'s window taps, row-major: tap ``i*kw + j`` at (r, c) is x[..., kh*r + i, kw*c + j]."""
    (kh, kw), (ho, wo) = kernel, out_hw
    return [x[..., i : i + kh * ho : kh, j : j + kw * wo : kw] for i in range(kh) for j in range(kw)]


def _window_max(taps: list[np.ndarray]) -> np.ndarray:
    """np.maximum folded over the taps in order: the reference's ``np.max`` over its tap axis."""
    best = np.maximum(taps[0], taps[1]) if len(taps) > 1 else taps[0].copy()
    for t in taps[2:]:
        np.maximum(best, t, out=best)
    return best


def max_pool2d_tiled(x: np.ndarray, kernel: tuple[int, int]) -> np.ndarray:
    """(N, C, H, W) -> (N, C, H // kh, W // kw): each window's maximum (NaN if any of it is NaN)."""
    n, c, h, w = x.shape
    ho, wo = h // kernel[0], w // kernel[1]
    fast = _compiled_args(x, kernel)
    if fast is None:
        return _window_max(_taps(x, kernel, (ho, wo)))
    loops, flat, nan_above = fast
    out = np.empty((n * c, ho, wo), dtype=flat.dtype)
    loops.forward2x2(flat, nan_above, x.dtype == np.float16, out)
    return out.view(x.dtype).reshape(n, c, ho, wo)


def max_pool2d_tiled_backward(x: np.ndarray, g: np.ndarray, kernel: tuple[int, int]) -> np.ndarray:
    """(N, C, H, W) ``x`` and (N, C, Ho, Wo) ``g`` -> (N, C, H, W): ``g`` at each window's first maximum."""
    n, c, ho, wo = g.shape
    out = np.zeros(x.shape, dtype=g.dtype)  # rows and columns past the last window get no gradient
    fast = _compiled_args(x, kernel) if g.dtype == x.dtype else None
    if fast is not None:
        loops, flat, nan_above = fast
        gflat = np.ascontiguousarray(g).reshape(n * c, ho, wo)
        loops.backward2x2(
            flat,
            gflat if nan_above == 0 else gflat.view(np.uint16),
            nan_above,
            out.reshape(flat.shape).view(flat.dtype),
        )
        return out
    taps = _taps(x, kernel, (ho, wo))
    best = _window_max(taps)
    open_ = np.ones(best.shape, dtype=np.bool_)  # no earlier tap of the window took the gradient
    zero = np.zeros((), dtype=g.dtype)
    for tap, dst in zip(taps, _taps(out, kernel, (ho, wo))):
        hit = open_ & ((tap == best) | np.isnan(tap))
        dst[...] = np.where(hit, g, zero)
        open_ &= ~hit
    return out


POOL_KERNELS = {fn.__name__: _quiet(fn) for fn in (max_pool2d_tiled, max_pool2d_tiled_backward)}
