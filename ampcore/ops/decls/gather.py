"""Gathering and scattering along a dimension by an index tensor: gather, index_select, scatter, scatter_add and
index_copy (torch's signatures: ``gather(input, dim, index)``, ``scatter_add(input, dim, index, src)``, ...).

Each element of ``index`` names a position of ``input``: its flat offset is the index times the stride of
``dim`` plus the offset of the index element's own coordinates in the other dimensions, computed on the device
(no host read).  The primitives ``take`` and ``scatter_add`` (whose gradients are each other) do the moving,
``where`` the overwriting, so every op is differentiable in its float inputs on every backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as dt
from ...tensor_base import TensorBase
from ..declare import Example, Input, composite
from ..elementwise import binary, cast, compare, where
from ..indexing import take_along_dim
from ..reduction import normalize_axes
from ..shape import expand, getitem, index_add, reshape, take


def _check_index(op: str, x: Any, index: Any, axis: int) -> None:
    if not isinstance(index, TensorBase) or index.dtype not in (dt.int64, dt.int32):
        got = index.dtype.name if isinstance(index, TensorBase) else type(index).__name__
        raise TypeError(f"{op}(): index must be an int64 tensor, got {got}")
    if len(index.shape) != x.ndim and not (len(index.shape) == 0 and x.ndim == 0):
        raise ValueError(f"{op}(): index of shape {index.shape} must have as many dimensions as input {x.shape}")
    for i, (m, n) in enumerate(zip(index.shape, x.shape)):
        if i != axis and m > n:
            raise ValueError(
                f"{op}(): index of shape {index.shape} is larger than input {x.shape} in dimension {i} (only "
                f"dimension {axis} may differ)"
            )


def _flat_positions(x: Any, index: Any, axis: int) -> Any:
    """For each element of ``index``: the flat (row-major) offset in ``x`` it names along ``axis``."""
    strides = [int(np.prod(x.shape[i + 1 :], dtype=np.int64)) for i in range(x.ndim)]
    grids = np.meshgrid(*(np.arange(n, dtype=np.int64) for n in index.shape), indexing="ij")
    base = sum((g * s for i, (g, s) in enumerate(zip(grids, strides)) if i != axis), np.zeros(index.shape, np.int64))
    offsets = x._new_tensor(base, dt.int64)
    return binary("add", binary("mul", cast(index, dt.int64), strides[axis]), offsets)


def _gather_reference(x: np.ndarray, index: np.ndarray, dim: int) -> np.ndarray:
    lead = tuple(slice(0, n) if i != dim else slice(None) for i, n in enumerate(index.shape))
    return np.take_along_axis(x[lead], index, axis=dim)


@composite(
    "gather",
    signature="gather(input, dim, index, *, sparse_grad=False) -> Tensor",
    example=Example(
        (Input((4, 5)), Input((3, 6), kind="int64", high=5)),
        {"dim": 1},
        rule="exact",
        n_grad=(3,),
        call=lambda op, x, index, dim: op(x, dim, index),
    ),
    reference=_gather_reference,
)
def gather(input: Any, dim: int, index: Any, *, sparse_grad: bool = False) -> Any:  # noqa: A002 - torch's names
    """``out[i][j] = input[index[i][j]][j]`` along ``dim`` (torch.gather): ``index`` has ``input``'s number of
    dimensions and is no larger outside ``dim``; differentiable in ``input``."""
    (axis,) = normalize_axes(dim, input.ndim)
    _check_index("gather", input, index, axis)
    lead = tuple(slice(0, n) if i != axis else slice(None) for i, n in enumerate(index.shape))
    return take_along_dim(getitem(input, lead), index, axis)


@composite(
    "index_select",
    signature="index_select(input, dim, index) -> Tensor",
    example=Example(
        (Input((4, 5)), Input((6,), kind="int64", high=4)),
        {"dim": 0},
        rule="exact",
        n_grad=(3,),
        call=lambda op, x, index, dim: op(x, dim, index),
    ),
    reference=lambda x, index, dim: np.take(x, index, axis=dim),
)
def index_select(input: Any, dim: int, index: Any) -> Any:  # noqa: A002 - torch's argument name
    """The slices of ``input`` along ``dim`` at the positions of the 1-D ``index`` (torch.index_select)."""
    (axis,) = normalize_axes(dim, input.ndim)
    if not isinstance(index, TensorBase) or len(index.shape) > 1:
        raise ValueError(f"index_select(): index must be a 0-D or 1-D int64 tensor, got {index!r}")
    return take(input, reshape(index, (-1,)), axis)


def _scatter_add_reference(x: np.ndarray, index: np.ndarray, src: np.ndarray, dim: int) -> np.ndarray:
    out = x.astype(np.result_type(x, src))  # a copy, complex where either is (the suite's complex step)
    src = src[tuple(slice(0, n) for n in index.shape)]
    coords = list(np.meshgrid(*(np.arange(n) for n in index.shape), indexing="ij"))
    coords[dim] = index
    np.add.at(out, tuple(coords), src)
    return out


def _scattered(op: str, input: Any, dim: int, index: Any, src: Any) -> tuple[Any, Any]:  # noqa: A002
    """``src`` (its leading part, index-shaped) summed into zeros of ``input``'s shape at the positions ``index``
    names along ``dim``, and those positions as flat offsets."""
    (axis,) = normalize_axes(dim, input.ndim)
    _check_index(op, input, index, axis)
    if isinstance(src, TensorBase):
        if len(src.shape) != len(index.shape) or any(m > n for m, n in zip(index.shape, src.shape)):
            raise ValueError(f"{op}(): src of shape {src.shape} must cover index of shape {index.shape}")
        values = getitem(cast(src, input.dtype), tuple(slice(0, n) for n in index.shape))
    else:
        values = expand(input._new_tensor(src, input.dtype), index.shape)
    positions = reshape(_flat_positions(input, index, axis), (-1,))
    flat = index_add(reshape(values, (-1,)), positions, 0, input.numel())
    return reshape(flat, input.shape), positions


@composite(
    "scatter_add",
    variants=("function", "method", "inplace"),
    signature="scatter_add(input, dim, index, src) -> Tensor",
    example=Example(
        (Input((3, 5)), Input((3, 4), kind="int64", high=5), Input((3, 4))),
        {"dim": 1},
        n=5,
        call=lambda op, x, index, src, dim: op(x, dim, index, src),
    ),
    reference=_scatter_add_reference,
)
def scatter_add(input: Any, dim: int, index: Any, src: Any) -> Any:  # noqa: A002 - torch's argument name
    """``input`` with ``src[i][j]`` added at ``[index[i][j]][j]`` along ``dim`` (torch.scatter_add: repeated
    positions add up); differentiable in ``input`` and ``src``."""
    added, _ = _scattered("scatter_add", input, dim, index, src)
    return binary("add", input, added)


def _scatter_reference(x: np.ndarray, index: np.ndarray, src: np.ndarray, dim: int) -> np.ndarray:
    out = x.astype(np.result_type(x, src))
    coords = list(np.meshgrid(*(np.arange(n) for n in index.shape), indexing="ij"))
    coords[dim] = index
    out[tuple(coords)] = src[tuple(slice(0, n) for n in index.shape)]
    return out


@composite(
    "scatter",
    variants=("function", "method", "inplace"),
    signature="scatter(input, dim, index, src=None, *, value=None, reduce=None) -> Tensor",
    example=Example(
        (Input((2, 6)), Input((2, 3), kind="int64", high=6, distinct=True), Input((2, 3))),
        {"dim": 1},
        rule="exact",
        call=lambda op, x, index, src, dim: op(x, dim, index, src),
    ),
    reference=_scatter_reference,
)
def scatter(
    input: Any,  # noqa: A002 - torch's argument name
    dim: int,
    index: Any,
    src: Any = None,
    *,
    value: Any = None,
    reduce: str | None = None,
) -> Any:
    """``input`` with ``src[i][j]`` (or the number ``value``) written at ``[index[i][j]][j]`` along ``dim``
    (torch.scatter; which of several writes to one position wins is unspecified, as in torch).  ``reduce``
    ``'add'`` is scatter_add; ``'multiply'`` raises NotImplementedError."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter() needs src (a tensor) or value (a number)")
    if reduce == "add":
        return scatter_add(
            input,
            dim,
            index,
            src if isinstance(src, TensorBase) else expand(input._new_tensor(src, input.dtype), index.shape),
        )
    if reduce is not None:
        raise NotImplementedError(f"scatter(reduce={reduce!r}) is not supported; only reduce=None or 'add'")
    written, positions = _scattered("scatter", input, dim, index, src)
    ones = expand(input._new_tensor(1, dt.int64), positions.shape)
    hit = reshape(compare("gt", index_add(ones, positions, 0, input.numel()), 0), input.shape)
    return where(hit, written, input)


def _index_copy_reference(x: np.ndarray, index: np.ndarray, source: np.ndarray, dim: int) -> np.ndarray:
    out = x.astype(np.result_type(x, source))
    lead = (slice(None),) * dim
    out[lead + (index,)] = source
    return out


@composite(
    "index_copy",
    variants=("function", "method", "inplace"),
    signature="index_copy(input, dim, index, source) -> Tensor",
    example=Example(
        (Input((6, 3)), Input((4,), kind="int64", high=6, distinct=True), Input((4, 3))),
        {"dim": 0},
        rule="exact",
        call=lambda op, x, index, source, dim: op(x, dim, index, source),
    ),
    reference=_index_copy_reference,
)
def index_copy(input: Any, dim: int, index: Any, source: Any) -> Any:  # noqa: A002 - torch's argument name
    """``input`` with its slices along ``dim`` at the positions of the 1-D ``index`` replaced by ``source``'s
    slices, in order (torch.index_copy); differentiable in ``input`` and ``source``."""
    (axis,) = normalize_axes(dim, input.ndim)
    if not isinstance(index, TensorBase) or len(index.shape) > 1:
        raise ValueError(f"index_copy(): index must be a 0-D or 1-D int64 tensor, got {index!r}")
    index = reshape(cast(index, dt.int64), (-1,))
    expected = input.shape[:axis] + (index.shape[0],) + input.shape[axis + 1 :]
    if not isinstance(source, TensorBase) or source.shape != expected:
        got = source.shape if isinstance(source, TensorBase) else type(source).__name__
        raise ValueError(f"index_copy(): source must have shape {expected} for index {tuple(index.shape)}, got {got}")
    size = input.shape[axis]
    written = index_add(cast(source, input.dtype), index, axis, size)
    ones = expand(input._new_tensor(1, dt.int64), index.shape)
    hit = compare("gt", index_add(ones, index, 0, size), 0)
    hit = reshape(hit, (size,) + (1,) * (input.ndim - axis - 1))
    return where(hit, written, input)
