"""Adaptive average pooling (1-D, 2-D, 3-D): each output position averages the input window
``[floor(i * in / out), ceil((i + 1) * in / out))`` along every pooled dimension, as torch's.

The pooling is separable: along each dimension the windows form an (out, in) averaging matrix, applied as one
GEMM (float32 accumulation; 16-bit inputs are pooled in float32 and rounded once).  Each size is torch's aten op
of that name (:mod:`ampcore.ops.declare`); torch's CPU autocast runs the 3-D one in float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import dtypes as dt
from ...ops import elementwise as ew
from ...ops import matmul
from ...ops.declare import Example, Input, composite
from ...tensor import Tensor
from ._utils import check_float, opmath

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_avg_pool", "averaging"]


def averaging(in_size: int, out_size: int) -> np.ndarray:
    """The (out, in) matrix of torch's adaptive windows: row i averages ``[floor(i*in/out), ceil((i+1)*in/out))``."""
    a = np.zeros((out_size, in_size))
    for i in range(out_size):
        start, end = (i * in_size) // out_size, -((-(i + 1) * in_size) // out_size)
        a[i, start:end] = 1.0 / (end - start)
    return a


def _sizes(x: Tensor, output_size: Any, dims: int) -> tuple[int, ...]:
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * dims
    if len(sizes) != dims:
        raise ValueError(f"adaptive_avg_pool{dims}d(): output_size {output_size!r} must have {dims} values")
    # None keeps the input's size, as torch's
    out = tuple(x.shape[x.ndim - dims + i] if n is None else int(n) for i, n in enumerate(sizes))
    if any(n <= 0 for n in out):
        raise ValueError(f"adaptive_avg_pool{dims}d(): output_size {output_size!r} must be positive")
    return out


def adaptive_avg_pool(input: Tensor, output_size: Sequence[int]) -> Tensor:  # noqa: A002 - torch's argument name
    """Adaptive average pooling of the last ``len(output_size)`` dimensions of ``input``."""
    check_float(input, "input", "adaptive_avg_pool")
    dims = len(output_size)
    x = opmath(input)
    weight = np.float64 if x.dtype is dt.float64 else np.float32
    for i, n in enumerate(output_size):
        axis = x.ndim - dims + i
        size = x.shape[axis]
        if size == n:
            continue
        a = x._new_tensor(averaging(size, n).T.astype(weight), x.dtype)  # (in, out)
        moved = x.transpose(axis, -1)
        x = matmul(moved, a).transpose(axis, -1)
    return ew.cast(x, input.dtype)


def _reference(dims: int) -> Any:
    def ref(x: np.ndarray, output_size: Sequence[int]) -> np.ndarray:
        for i, n in enumerate(output_size):
            axis = x.ndim - dims + i
            x = np.moveaxis(np.moveaxis(x, axis, -1) @ averaging(x.shape[axis], n).T, -1, axis)
        return x

    return ref


def _declare(dims: int, shape: tuple[int, ...], out: tuple[int, ...], torch_function: str) -> Any:
    name = f"adaptive_avg_pool{dims}d"

    def op(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002 - torch's argument name
        if input.ndim not in (dims + 1, dims + 2):
            raise ValueError(f"{name}() needs a {dims + 1}-D or {dims + 2}-D input, got shape {input.shape}")
        return adaptive_avg_pool(input, _sizes(input, output_size, dims))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (
        f"torch's {name}: the last {dims} dimension(s) of ``input`` averaged over adaptive windows to "
        "``output_size`` (an int, or one per dimension; None keeps a size)."
    )
    return composite(
        name,
        variants=("function",) if dims == 1 else (),
        torch_function=torch_function,
        signature=f"{name}(input, output_size) -> Tensor",
        example=Example((Input(shape),), {"output_size": out}, n=3),
        reference=_reference(dims),
    )(op)


# 5 -> 3 and 7 -> 3 give windows of 2 and 3 elements, overlapping: the general case, not a tiling.
adaptive_avg_pool1d = _declare(1, (2, 3, 7), (3,), "adaptive_avg_pool1d")
adaptive_avg_pool2d = _declare(2, (2, 3, 5, 7), (3, 3), "_C._nn.adaptive_avg_pool2d")
adaptive_avg_pool3d = _declare(3, (1, 2, 4, 5, 7), (2, 3, 3), "_C._nn.adaptive_avg_pool3d")
