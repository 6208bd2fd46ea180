"""F.interpolate: nearest, nearest-exact, linear, bilinear, trilinear and area resampling, with torch's index math.

Each mode is torch's aten op of the same name, declared here (:mod:`ampcore.ops.declare`), and F.interpolate is a
plain function that picks one, as torch's does.  The ops are separable: along each resized dimension, nearest
takes one source index per output position (a ``take``: exact, and its gradient scatters back) and linear
blends two with weights ``1 - l`` and ``l``, computed in float32 (float64 for float64) and rounded once to the
input's dtype.  The source indices and weights follow torch's kernels (``UpSample.h``): nearest always in
float32, ``src = min(floor(dst * scale), in - 1)``; linear ``src = max(scale * (dst + 0.5) - 0.5, 0)`` or
``scale * dst`` with ``align_corners``, where ``scale`` is ``1 / scale_factor`` when a factor was given (and not
recomputed), else ``in / out`` (``(in - 1) / (out - 1)`` with ``align_corners``).  ``area`` is
adaptive_avg_pool, as in torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import dtypes as dt
from ...ops import elementwise as ew
from ...ops import take
from ...ops.declare import Example, Input, composite
from ...tensor import Tensor
from ._utils import check_float, opmath
from .adaptive_pool import adaptive_avg_pool

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "MODES"]

MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area", "bicubic")
_SPATIAL = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _scale(in_size: int, out_size: int, scale: float | None, align_corners: bool, dtype: Any) -> Any:
    """torch's area_pixel_compute_scale / compute_scales_value in ``dtype`` (np.float32 or np.float64)."""
    if align_corners:
        return dtype((in_size - 1) / (out_size - 1)) if out_size > 1 else dtype(0)
    if scale is not None and scale > 0:
        return dtype(1.0 / scale)
    return dtype(in_size) / dtype(out_size)


def nearest_indices(in_size: int, out_size: int, scale: float | None, exact: bool) -> np.ndarray:
    """The source index of each output position (torch's nearest_idx / nearest_neighbor_exact_compute_source_index,
    in float32 as its kernels compute them)."""
    dst = np.arange(out_size, dtype=np.float32)
    if not exact and out_size == in_size:
        return np.arange(out_size, dtype=np.int64)
    if not exact and out_size == 2 * in_size:
        return np.arange(out_size, dtype=np.int64) >> 1
    s = _scale(in_size, out_size, scale, False, np.float32)
    src = np.floor((dst + np.float32(0.5)) * s) if exact else np.floor(dst * s)
    return np.minimum(src.astype(np.int64), in_size - 1)


def linear_weights(
    in_size: int, out_size: int, scale: float | None, align_corners: bool, dtype: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i0, i1, lambda) per output position: ``out = (1 - lambda) x[i0] + lambda x[i1]`` (torch's
    compute_indices_weights_linear), the weights in ``dtype``."""
    s = _scale(in_size, out_size, scale, align_corners, dtype)
    dst = np.arange(out_size, dtype=dtype)
    src = s * dst if align_corners else np.maximum(s * (dst + dtype(0.5)) - dtype(0.5), dtype(0))
    i0 = np.minimum(src.astype(np.int64), in_size - 1)
    lam = np.clip(src - i0.astype(dtype), 0, 1).astype(dtype)
    i1 = i0 + (i0 < in_size - 1)
    return i0, i1, lam


def _check(op: str, x: Tensor, output_size: Sequence[int], dims: int) -> tuple[int, ...]:
    check_float(x, "input", op)
    if x.ndim != dims + 2:
        raise ValueError(f"{op}() needs a {dims + 2}-D (N, C, spatial...) input, got shape {x.shape}")
    size = tuple(int(n) for n in output_size)
    if len(size) != dims or any(n <= 0 for n in size):
        raise ValueError(f"{op}(): output_size must be {dims} positive ints, got {tuple(output_size)}")
    return size


def _nearest(name: str, dims: int, exact: bool) -> Any:
    def op(input: Tensor, output_size: Sequence[int], scales: Sequence[float | None] | None = None) -> Tensor:  # noqa: A002
        size = _check(name, input, output_size, dims)
        out = input
        for i, n in enumerate(size):
            axis = 2 + i
            idx = nearest_indices(input.shape[axis], n, scales[i] if scales else None, exact)
            out = take(out, out._new_tensor(idx, dt.int64), axis)
        return out

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"torch's {name}: (N, C, *spatial) resized to ``output_size`` by nearest source elements."
    return op


def _linear(name: str, dims: int) -> Any:
    def op(
        input: Tensor,  # noqa: A002 - torch's argument name
        output_size: Sequence[int],
        align_corners: bool,
        scales: Sequence[float | None] | None = None,
    ) -> Tensor:
        size = _check(name, input, output_size, dims)
        x = opmath(input)
        weight_dtype = np.float64 if x.dtype is dt.float64 else np.float32
        for i, n in enumerate(size):
            axis = 2 + i
            i0, i1, lam = linear_weights(
                x.shape[axis], n, scales[i] if scales else None, bool(align_corners), weight_dtype
            )
            shape = (n,) + (1,) * (x.ndim - axis - 1)
            w1 = x._new_tensor(lam.reshape(shape), x.dtype)
            w0 = x._new_tensor((1 - lam).reshape(shape), x.dtype)
            a = take(x, x._new_tensor(i0, dt.int64), axis)
            b = take(x, x._new_tensor(i1, dt.int64), axis)
            x = a * w0 + b * w1
        return ew.cast(x, input.dtype)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"torch's {name}: (N, C, *spatial) resized to ``output_size`` by {name.split('_')[1]} blending."
    return op


def _nearest_reference(exact: bool) -> Any:
    def ref(x: np.ndarray, output_size: Sequence[int]) -> np.ndarray:
        for i, n in enumerate(output_size):
            x = np.take(x, nearest_indices(x.shape[2 + i], n, None, exact), axis=2 + i)
        return x

    return ref


def _linear_reference(x: np.ndarray, output_size: Sequence[int], align_corners: bool) -> np.ndarray:
    for i, n in enumerate(output_size):
        axis = 2 + i
        i0, i1, lam = linear_weights(x.shape[axis], n, None, align_corners, np.float64)
        lam = lam.reshape((n,) + (1,) * (x.ndim - axis - 1))
        x = np.take(x, i0, axis=axis) * (1 - lam) + np.take(x, i1, axis=axis) * lam
    return x


_IN = {1: (2, 3, 4), 2: (2, 3, 4, 5), 3: (1, 2, 2, 3, 4)}
# Doubling: torch's linear weights are then multiples of 1/4 (exact in float32 and float64 alike).
_OUT = {1: (8,), 2: (8, 10), 3: (4, 6, 8)}
_NEAREST_OUT = {1: (7,), 2: (6, 7), 3: (3, 5, 6)}

NEAREST: dict[tuple[int, bool], Any] = {}
for _dims in (1, 2, 3):
    for _exact in (False, True):
        _name = f"{'_upsample_nearest_exact' if _exact else 'upsample_nearest'}{_dims}d"
        NEAREST[_dims, _exact] = composite(
            _name,
            variants=(),
            torch_function=f"_C._nn.{_name}",
            signature=f"{_name}(input, output_size, scales=None) -> Tensor",
            example=Example((Input(_IN[_dims]),), {"output_size": _NEAREST_OUT[_dims]}, rule="exact", n_grad=(3,)),
            reference=_nearest_reference(_exact),
        )(_nearest(_name, _dims, _exact))
LINEAR: dict[int, Any] = {}
for _dims, _name in ((1, "upsample_linear1d"), (2, "upsample_bilinear2d"), (3, "upsample_trilinear3d")):
    LINEAR[_dims] = composite(
        _name,
        variants=(),
        torch_function=f"_C._nn.{_name}",
        signature=f"{_name}(input, output_size, align_corners, scales=None) -> Tensor",
        example=Example(
            (Input(_IN[_dims]),), {"output_size": _OUT[_dims], "align_corners": False}, n=2**_dims, n_grad=(4**_dims,)
        ),
        reference=_linear_reference,
    )(_linear(_name, _dims))


def _output_size(x: Tensor, size: Any, scale_factor: Any, dims: int) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    """The output size and the per-dimension scale factors torch passes on (None where there is none)."""
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate(): give exactly one of size and scale_factor")
    if size is not None:
        sizes = tuple(size) if isinstance(size, (tuple, list)) else (size,) * dims
        if len(sizes) != dims:
            raise ValueError(f"interpolate(): size {size!r} must have {dims} values for an input of shape {x.shape}")
        return tuple(int(n) for n in sizes), (None,) * dims
    factors = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * dims
    if len(factors) != dims or any(f is None or f <= 0 for f in factors):
        raise ValueError(f"interpolate(): scale_factor {scale_factor!r} must be {dims} positive numbers")
    out = tuple(int(math.floor(n * float(f))) for n, f in zip(x.shape[2:], factors))
    return out, tuple(float(f) for f in factors)


def interpolate(
    input: Tensor,  # noqa: A002 - torch's argument name
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """torch.nn.functional.interpolate over the spatial dimensions of (N, C, *spatial) ``input``.

    ``mode``: ``nearest``, ``nearest-exact``, ``linear`` (3-D input), ``bilinear`` (4-D), ``trilinear`` (5-D)
    or ``area``; ``align_corners`` only with the linear modes (default False).  With ``scale_factor`` the output
    size is ``floor(size * factor)`` and the factor itself sets the sampling step unless
    ``recompute_scale_factor=True``.  ValueError names a bad mode, size or combination; NotImplementedError for
    ``bicubic`` and ``antialias``.
    """
    check_float(input, "input", "interpolate")
    if mode not in MODES:
        raise ValueError(f"interpolate(): unknown mode {mode!r}; valid modes are {', '.join(map(repr, MODES))}")
    if mode == "bicubic" or antialias:
        raise NotImplementedError(f"interpolate(): mode={mode!r} with antialias={antialias} is not supported yet")
    dims = input.ndim - 2
    if dims not in (1, 2, 3):
        raise ValueError(f"interpolate() needs a 3-D, 4-D or 5-D (N, C, spatial...) input, got shape {input.shape}")
    linear = mode in _SPATIAL
    if linear and _SPATIAL[mode] != dims:
        raise ValueError(f"interpolate(): mode {mode!r} needs a {_SPATIAL[mode] + 2}-D input, got shape {input.shape}")
    if align_corners is not None and not linear:
        raise ValueError(f"interpolate(): align_corners is only for the linear modes, not {mode!r}")
    out_size, factors = _output_size(input, size, scale_factor, dims)
    scales = None if recompute_scale_factor else factors
    if mode == "area":
        return adaptive_avg_pool(input, out_size)
    if linear:
        return LINEAR[dims](input, out_size, bool(align_corners), scales)
    return NEAREST[dims, mode == "nearest-exact"](input, out_size, scales)


def upsample(
    input: Tensor,  # noqa: A002 - torch's argument name
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """torch's deprecated F.upsample: :func:`interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:  # noqa: A002
    """torch's deprecated F.upsample_nearest: nearest :func:`interpolate`."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:  # noqa: A002
    """torch's deprecated F.upsample_bilinear: bilinear :func:`interpolate` with ``align_corners=True``."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
