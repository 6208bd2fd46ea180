"""Indexing beyond basic slices: boolean masks (get and set), assignment with gradients, gathering along a dim.

A boolean mask selects a data-dependent number of elements, so ``x[mask]`` and
``x[mask] = t`` (a tensor of one value per selected element) read the mask on
the host once (a counted host sync, as torch's are); ``x[mask] = scalar`` and
``x[mask] = t`` with ``t`` broadcastable to the trailing dims need no read: they
are a ``where``.  Everything is composed of primitive kernels (``take``,
``scatter_add``, ``where``, ``slice_assign``), so every backend has them.
``x[mask]`` itself is :func:`~.shape.masked_select`, in shape.py beside
``getitem``, which calls it from its advanced-index branch (no cost on basic
indexing); it is re-exported here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as dt
from ..dispatch import call, guarded_kernels, primitive, register_op
from ..kernels import KernelError
from ..tensor_base import TensorBase, wrap
from .base import Op, unbroadcast
from .elementwise import Scalar, cast, where
from .reduction import normalize_axes
from .shape import (
    _flat_positions,
    _mask_of,
    _normalize_basic_index,
    index_add,
    is_mask_index,
    masked_select,
    permute,
    reshape,
    take,
)

__all__ = ["is_mask_index", "masked_select", "setitem", "assigned_array", "take_along_dim"]


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
    elif isinstance(value, (int, float, np.number, np.bool_)):  # bool is an int: one fill, no tensor to expand
        k = guarded_kernels(x._backend, "__setitem__")
        value = wrap(k.full(selected, value, x.dtype, x.device.index), x.device, x._backend)
    else:
        value = x._new_tensor(value, x.dtype)
    if value.shape != selected:
        value = value.expand(selected)
    if not kernel_index:  # x[...] = value: every element overwritten
        return value
    return call(SLICE_ASSIGN, x, value, index=kernel_index)


_BASIC = (int, slice)


def assigned_array(x: Any, index: Any, value: Any) -> Any:
    """The array of ``x`` with ``x[index] = value``, straight from the kernels, for the common case that records
    nothing: basic indices (ints and slices) and a number or a tensor of ``x``'s device; None for anything
    else (a mask, an integer-tensor index, ``None`` or ``...`` in the index), which :func:`setitem` does.

    The caller has checked that no gradient is wanted and no autocast region or overflow watch is open.  The
    result is the one :func:`setitem` computes, without its Tensors, op boundary and graph node: a data set's
    ``x[1:1 + n] = ix`` costs a few microseconds, not twice that.
    """
    if type(index) is tuple:
        for i in index:
            if type(i) not in _BASIC:
                return None
    elif type(index) in _BASIC:
        index = (index,)
    else:
        return None
    scalar = type(value) in (int, float)
    if not scalar and not (isinstance(value, TensorBase) and value.device == x.device):
        return None
    kernel_index, selected = _normalize_basic_index(index, x.shape)
    k = x._backend.kernels
    try:
        if scalar:
            values = k.full(selected, value, x.dtype, x.device.index)
        else:
            values = value._data if value.dtype is x.dtype else k.cast(value._data, x.dtype)
            if value.shape != selected:
                if not _broadcasts_to(value.shape, selected):  # the general path's expand says the same
                    raise ValueError(f"shape {value.shape} cannot be expanded to {selected}")
                values = k.broadcast_to(values, selected)
        return k.slice_assign(x._data, kernel_index, values) if kernel_index else values
    except KernelError as exc:
        raise exc.named("__setitem__") from exc.error


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
