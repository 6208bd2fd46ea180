"""Indexing beyond basic slices: boolean masks (get and set), assignment with gradients, gathering along a dim.

A boolean mask selects a data-dependent number of elements, so ``x[mask]`` and
``x[mask] = t`` (a tensor of one value per selected element) read the mask on
the host once (a counted host sync, as torch's are); ``x[mask] = scalar`` and
``x[mask] = t`` with ``t`` broadcastable to the trailing dims need no read: they
are a ``where``.  Everything is composed of primitive kernels (``take``,
``scatter_add``, ``where``, ``slice_assign``), so every backend has them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as dt
from ..dispatch import call, primitive, register_op
from ..syncs import to_host
from ..tensor_base import TensorBase
from .base import Op, unbroadcast
from .elementwise import Scalar, cast, where
from .reduction import normalize_axes
from .shape import _normalize_basic_index, index_add, permute, reshape, take

__all__ = ["is_mask_index", "masked_select", "setitem", "take_along_dim"]


def _is_mask(i: Any) -> bool:
    return isinstance(i, TensorBase) and i.dtype is dt.bool_


def is_mask_index(index: Any) -> bool:
    """Whether ``index`` (one index or a tuple) holds a bool tensor: the boolean-mask path."""
    if isinstance(index, tuple):
        return any(_is_mask(i) for i in index)
    return _is_mask(index)


def _mask_of(x: Any, index: Any) -> Any:
    """The bool mask that is all of ``index``, checked against ``x``."""
    parts = index if isinstance(index, tuple) else (index,)
    if len(parts) != 1 or not _is_mask(parts[0]):
        raise IndexError(
            "a boolean mask must be the only index (x[mask] with mask.shape == x.shape[:mask.ndim]); "
            "index step by step, e.g. x[:, 0][mask]"
        )
    mask = parts[0]
    if mask.device != x.device:
        raise ValueError(f"the mask is on {str(mask.device)!r} but the tensor is on {str(x.device)!r}; move one")
    if mask.ndim > x.ndim or mask.shape != x.shape[: mask.ndim]:
        raise IndexError(
            f"the mask of shape {mask.shape} does not match the indexed tensor of shape {x.shape} "
            f"(it must equal the leading dims, {x.shape[: mask.ndim] or '()'})"
        )
    return mask


def _flat_positions(x: Any, mask: Any) -> Any:
    """The positions where ``mask`` is true, as a 1-D int64 tensor on ``x``'s device (one host read)."""
    positions = np.flatnonzero(to_host(mask, "boolean mask"))
    return x._new_tensor(positions.astype(np.int64), dt.int64)


@primitive("masked_select")
def masked_select(x: Any, mask: Any) -> Any:
    """``x[mask]``: the elements (rows) where the bool ``mask`` is true, as a tensor of shape ``(K, *rest)``.

    ``mask.shape`` must equal ``x.shape[:mask.ndim]``; the gradient flows back to
    the selected elements of ``x``.  Reads the mask on the host (one sync).
    """
    mask = _mask_of(x, mask)
    rest = x.shape[mask.ndim :]
    rows = reshape(x, (mask.numel(),) + rest)
    return take(rows, _flat_positions(x, mask), 0)


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return tuple(np.broadcast_shapes(shape, target)) == target
    except ValueError:
        return False


def _mask_assign(x: Any, mask: Any, value: Any) -> Any:
    """``x`` with ``value`` where ``mask`` is true (torch's ``x[mask] = value``), differentiable in both."""
    mask = _mask_of(x, mask)
    rest = x.shape[mask.ndim :]
    cond = reshape(mask, mask.shape + (1,) * len(rest))
    if not isinstance(value, TensorBase):
        if not isinstance(value, Scalar):
            raise TypeError(f"x[mask] = value needs a number or a Tensor, got {type(value).__name__}")
        return where(cond, value, x)
    if value.device != x.device:
        raise ValueError(f"the value is on {str(value.device)!r} but the tensor is on {str(x.device)!r}; move one")
    value = cast(value, x.dtype)
    if _broadcasts_to(value.shape, rest):  # one value (row) for every selected element: no host read
        return where(cond, value, x)
    positions = _flat_positions(x, mask)
    selected = (positions.shape[0],) + rest
    if not _broadcasts_to(value.shape, selected):
        raise ValueError(
            f"x[mask] = value: a value of shape {value.shape} cannot be assigned to the {selected[0]} selected "
            f"elements (shape {selected}); pass a number, or a tensor broadcastable to {selected}"
        )
    spread = index_add(value.expand(selected), positions, 0, mask.numel())
    return where(cond, reshape(spread, x.shape), x)


class SliceAssign(Op):
    """``base`` with ``base[index] = values``: the gradient of ``base`` is zero where it was overwritten."""

    name = "slice_assign"

    def forward(self, ctx: Any, k: Any, base: Any, values: Any, *, index: tuple) -> Any:
        ctx.index, ctx.values_shape = index, k.shape_of(values)
        return k.slice_assign(base, index, values)

    def backward(self, ctx: Any, k: Any, g: Any) -> tuple[Any, Any]:
        gb = gv = None
        if ctx.needs_input_grad[0]:
            gb = k.slice_assign(g, ctx.index, k.full(ctx.values_shape, 0.0, k.dtype_of(g), ctx.device_index))
        if ctx.needs_input_grad[1]:
            gv = unbroadcast(k, k.slice(g, ctx.index), ctx.values_shape)
        return gb, gv


SLICE_ASSIGN = SliceAssign()


def setitem(x: Any, index: Any, value: Any) -> Any:
    """A new tensor: ``x`` with ``x[index] = value`` (basic indices or one bool mask), in ``x``'s dtype.

    Differentiable in ``x`` (zero where overwritten) and in a tensor ``value``;
    :meth:`ampcore.Tensor.__setitem__` rebinds the tensor to it.
    """
    if is_mask_index(index):
        return _mask_assign(x, index, value)
    index = index if isinstance(index, tuple) else (index,)
    for i in index:
        if isinstance(i, TensorBase) or isinstance(i, list):
            raise IndexError(
                f"assignment with an integer-tensor index ({i!r}) is not supported; "
                "use ints, slices, ... or one bool mask"
            )
        if not (i is Ellipsis or isinstance(i, (int, np.integer, slice))) or isinstance(i, bool):
            raise IndexError(f"unsupported assignment index {i!r}: use ints, slices, ... or one bool mask")
    kernel_index, selected = _normalize_basic_index(index, x.shape)
    if isinstance(value, TensorBase):
        if value.device != x.device:
            raise ValueError(f"the value is on {str(value.device)!r} but the tensor is on {str(x.device)!r}; move one")
        value = cast(value, x.dtype)
    else:
        value = x._new_tensor(value, x.dtype)
    value = value.expand(selected)
    if not kernel_index:  # x[...] = value: every element overwritten
        return value
    return call(SLICE_ASSIGN, x, value, index=kernel_index)


@primitive("take_along_dim")
def take_along_dim(x: Any, indices: Any, dim: int) -> Any:
    """torch.take_along_dim / gather: ``out[..., j, ...] = x[..., indices[..., j, ...], ...]`` along ``dim``.

    ``indices`` has ``x``'s shape except (possibly) along ``dim``; differentiable in ``x``.
    """
    (axis,) = normalize_axes(dim, x.ndim)
    if indices.ndim != x.ndim or any(a != b for i, (a, b) in enumerate(zip(indices.shape, x.shape)) if i != axis):
        raise ValueError(
            f"take_along_dim: indices of shape {indices.shape} must match the input's shape {x.shape} "
            f"outside dimension {axis}"
        )
    last = tuple(i for i in range(x.ndim) if i != axis) + (axis,)
    inverse = tuple(sorted(range(x.ndim), key=lambda i: last[i]))
    xs, idx = permute(x, last), permute(indices, last)
    n, m = xs.shape[-1], idx.shape[-1]
    rows = idx.numel() // m if m else 0
    offsets = x._new_tensor((np.arange(rows, dtype=np.int64) * n).reshape(rows, 1), dt.int64)
    flat_idx = reshape(reshape(cast(idx, dt.int64), (rows, m)) + offsets, (-1,))
    out = take(reshape(xs, (-1,)), flat_idx, 0)
    return permute(reshape(out, idx.shape), inverse)


register_op("__setitem__", "in-place")
