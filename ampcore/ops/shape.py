"""Shape ops: reshape, permute, broadcast, indexing, padding, concatenation, gather/scatter."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes as dt
from ..dispatch import call, primitive
from ..syncs import to_host
from ..tensor_base import TensorBase
from .base import Op, unbroadcast
from .elementwise import broadcast_shapes, cast
from .reduction import normalize_axes

if TYPE_CHECKING:
    from ..autograd import Context
    from ..kernels import KernelTable


class Reshape(Op):
    name = "reshape"

    def forward(self, ctx: Context, k: KernelTable, x: Any, *, shape: tuple[int, ...]) -> Any:
        ctx.shape = k.shape_of(x)
        return k.reshape(x, shape)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        return (k.reshape(g, ctx.shape),)


class Transpose(Op):
    name = "permute"

    def forward(self, ctx: Context, k: KernelTable, x: Any, *, axes: tuple[int, ...]) -> Any:
        ctx.inverse = tuple(sorted(range(len(axes)), key=lambda i: axes[i]))
        return k.transpose(x, axes)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        return (k.transpose(g, ctx.inverse),)


class BroadcastTo(Op):
    name = "expand"

    def forward(self, ctx: Context, k: KernelTable, x: Any, *, shape: tuple[int, ...]) -> Any:
        ctx.shape = k.shape_of(x)
        return k.broadcast_to(x, shape)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        return (unbroadcast(k, g, ctx.shape),)


class Slice(Op):
    name = "slice"

    def forward(self, ctx: Context, k: KernelTable, x: Any, *, index: tuple[Any, ...]) -> Any:
        ctx.shape, ctx.dtype, ctx.index = k.shape_of(x), k.dtype_of(x), index
        return k.slice(x, index)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        zeros = k.full(ctx.shape, 0.0, ctx.dtype, ctx.device_index)
        return (k.slice_assign(zeros, ctx.index, g),)


class Pad(Op):
    name = "pad"

    def forward(
        self, ctx: Context, k: KernelTable, x: Any, *, widths: tuple[tuple[int, int], ...], value: float
    ) -> Any:
        ctx.index = tuple(slice(lo, lo + n) for (lo, _), n in zip(widths, k.shape_of(x)))
        return k.pad(x, widths, value)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        return (k.slice(g, ctx.index),)


class Concat(Op):
    name = "cat"

    def forward(self, ctx: Context, k: KernelTable, *xs: Any, axis: int) -> Any:
        ctx.axis, ctx.sizes = axis, [k.shape_of(x)[axis] for x in xs]
        return k.concat(list(xs), axis)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        grads, start = [], 0
        for n, needed in zip(ctx.sizes, ctx.needs_input_grad):
            grads.append(k.slice(g, (slice(None),) * ctx.axis + (slice(start, start + n),)) if needed else None)
            start += n
        return tuple(grads)


class Take(Op):
    name = "take"

    def forward(self, ctx: Context, k: KernelTable, x: Any, idx: Any, *, axis: int) -> Any:
        ctx.idx, ctx.axis, ctx.size = idx, axis, k.shape_of(x)[axis]
        return k.take(x, idx, axis)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        return k.scatter_add(g, ctx.idx, ctx.axis, ctx.size), None


class ScatterAdd(Op):
    name = "scatter_add"

    def forward(self, ctx: Context, k: KernelTable, src: Any, idx: Any, *, axis: int, size: int) -> Any:
        ctx.idx, ctx.axis = idx, axis
        return k.scatter_add(src, idx, axis, size)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        return k.take(g, ctx.idx, ctx.axis), None


RESHAPE, TRANSPOSE, BROADCAST, SLICE, PAD, CONCAT, TAKE, SCATTER_ADD = (
    Reshape(),
    Transpose(),
    BroadcastTo(),
    Slice(),
    Pad(),
    Concat(),
    Take(),
    ScatterAdd(),
)


def _numel(shape: Iterable[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def infer_shape(shape: Sequence[int], numel: int, old: tuple[int, ...]) -> tuple[int, ...]:
    """Resolve one ``-1`` in ``shape``; ValueError showing both shapes if sizes disagree."""
    shape = tuple(int(s) for s in shape)
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in shape):
        raise ValueError(f"invalid shape {shape}: at most one -1 and no other negative sizes")
    if unknown:
        rest = _numel(s for s in shape if s != -1)
        if rest == 0 or numel % rest:
            raise ValueError(f"shape {shape} is invalid for a tensor of shape {old} ({numel} elements)")
        shape = tuple(numel // rest if s == -1 else s for s in shape)
    if _numel(shape) != numel:
        raise ValueError(f"shape {shape} is invalid for a tensor of shape {old} ({numel} elements)")
    return shape


@primitive("reshape")
def reshape(x: Any, *shape: Any) -> Any:
    """Same elements in a new shape (one dimension may be -1)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    new = infer_shape(shape, x.numel(), x.shape)
    return x if new == x.shape else call(RESHAPE, x, shape=new)


@primitive("permute")
def permute(x: Any, *axes: Any) -> Any:
    """Reorder the dimensions."""
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    if len(axes) != x.ndim:
        raise ValueError(f"permute needs {x.ndim} dimensions for shape {x.shape}, got {axes}")
    axes = tuple(normalize_axes(a, x.ndim)[0] for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"permute axes {axes} are not a permutation of 0..{x.ndim - 1}")
    return x if axes == tuple(range(x.ndim)) else call(TRANSPOSE, x, axes=axes)


@primitive("transpose")
def transpose(x: Any, dim0: int, dim1: int) -> Any:
    """Swap two dimensions."""
    axes = list(range(x.ndim))
    (a,), (b,) = normalize_axes(dim0, x.ndim), normalize_axes(dim1, x.ndim)
    axes[a], axes[b] = axes[b], axes[a]
    return permute(x, axes)


@primitive("expand")
def expand(x: Any, *shape: Any) -> Any:
    """Broadcast to ``shape`` (``-1`` keeps a dimension)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ValueError(f"cannot expand shape {x.shape} to fewer dimensions {tuple(shape)}")
    shape = tuple(x.shape[i - lead] if s == -1 else int(s) for i, s in enumerate(shape))
    if broadcast_shapes(x.shape, shape) != shape:
        raise ValueError(f"shape {x.shape} cannot be expanded to {shape}")
    return x if shape == x.shape else call(BROADCAST, x, shape=shape)


@primitive("unsqueeze")
def unsqueeze(x: Any, dim: int) -> Any:
    if not -(x.ndim + 1) <= dim <= x.ndim:
        raise IndexError(f"unsqueeze dimension out of range for a tensor with {x.ndim} dimension(s)")
    dim %= x.ndim + 1
    return reshape(x, x.shape[:dim] + (1,) + x.shape[dim:])


@primitive("squeeze")
def squeeze(x: Any, dim: int | None = None) -> Any:
    if dim is None:
        return reshape(x, tuple(s for s in x.shape if s != 1))
    (axis,) = normalize_axes(dim, x.ndim)
    return reshape(x, x.shape[:axis] + x.shape[axis + 1 :]) if x.shape[axis] == 1 else x


@primitive("flatten")
def flatten(x: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    if x.ndim == 0:
        return reshape(x, (1,))
    (s,), (e,) = normalize_axes(start_dim, x.ndim), normalize_axes(end_dim, x.ndim)
    return reshape(x, x.shape[:s] + (_numel(x.shape[s : e + 1]),) + x.shape[e + 1 :])


@primitive("pad")
def pad(x: Any, pad: Sequence[int], value: float = 0.0) -> Any:
    """torch-style constant pad: ``pad`` lists (left, right) pairs starting from the last dimension."""
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad {tuple(pad)} must have an even length of at most 2 * ndim = {2 * x.ndim}")
    if any(int(p) < 0 for p in pad):
        raise ValueError(f"negative padding {tuple(pad)} is not supported")
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    return call(PAD, x, widths=tuple(widths), value=float(value))


@primitive("cat")
def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Concatenate along ``dim``; tensors are promoted to a common dtype."""
    tensors = _tensor_list("cat", tensors)
    ref = tensors[0]
    (axis,) = normalize_axes(dim, ref.ndim)
    same_dtype = True
    for t in tensors[1:]:
        if t.shape != ref.shape and (
            len(t.shape) != len(ref.shape)
            or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape)) if i != axis)
        ):
            raise ValueError(f"cat() shapes {ref.shape} and {t.shape} differ outside dimension {axis}")
        same_dtype = same_dtype and t.dtype is ref.dtype
    if same_dtype:  # the common case, checked per tensor above: no promotion, no casts
        return call(CONCAT, *tensors, axis=axis)
    target = dt.result_type(*[t.dtype for t in tensors])
    return call(CONCAT, *[cast(t, target) for t in tensors], axis=axis)


def _tensor_list(op: str, tensors: Any) -> list[Any]:
    """``tensors`` as a non-empty list of Tensors; TypeError names the first element that is not one."""
    Tensor = TensorBase  # noqa: N806 - reads as the type it checks for
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}() takes a list or tuple of Tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{op}() needs at least one tensor")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}() takes Tensors; element {i} is a {type(t).__name__}: {t!r}")
    return list(tensors)


@primitive("stack")
def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Join tensors of one shape along a new dimension."""
    tensors = _tensor_list("stack", tensors)
    shape = tensors[0].shape
    for t in tensors[1:]:
        if t.shape != shape:
            raise ValueError(f"stack() needs tensors of one shape, got {shape} and {t.shape}")
    (axis,) = normalize_axes(dim, len(shape) + 1)
    if axis == len(shape):  # a new last axis (or 0-d tensors): no existing axis to join along
        return cat([unsqueeze(t, dim) for t in tensors], dim)
    # Joined along the existing axis, then that axis split in two: the same values as unsqueezing each, in one
    # concat (a data loader stacks every batch; one op per sample was 140 us for 32 rows).
    joined = cat(tensors, axis)
    return reshape(joined, (*shape[:axis], len(tensors), *shape[axis:]))


def _check_index_tensor(idx: Any, size: int) -> None:
    if idx.dtype not in (dt.int64, dt.int32):
        raise TypeError(f"indices must be an int64 or int32 tensor, got {idx.dtype.name}")


@primitive("take")
def take(x: Any, indices: Any, dim: int) -> Any:
    """Gather along ``dim`` with integer ``indices`` of any shape (result: x.shape, dim replaced by indices.shape)."""
    (axis,) = normalize_axes(dim, x.ndim)
    _check_index_tensor(indices, x.shape[axis])
    flat = cast(indices, dt.int64).reshape(-1)
    out = call(TAKE, x, flat, axis=axis)
    return out.reshape(x.shape[:axis] + indices.shape + x.shape[axis + 1 :])


@primitive("index_add")
def index_add(src: Any, indices: Any, dim: int, size: int) -> Any:
    """Zeros of ``src``'s shape with ``size`` along ``dim``, plus ``src`` added at ``indices``."""
    (axis,) = normalize_axes(dim, src.ndim)
    _check_index_tensor(indices, size)
    return call(SCATTER_ADD, src, cast(indices, dt.int64).reshape(-1), axis=axis, size=int(size))


def _normalize_basic_index(index: tuple, shape: tuple[int, ...]) -> tuple[tuple, tuple[int, ...]]:
    """Split a basic index into a kernel index (ints and slices) and the result shape with ``None`` axes."""
    if len(index) == 1 and type(index[0]) is slice and shape:  # x[a:b], on every sample of a data set
        start, stop, step = index[0].indices(shape[0])
        length = len(range(start, stop, step))  # a zero step raised in indices() already
        bound = slice(start, stop if stop >= 0 else None, step) if length else slice(0, 0, 1)
        return (bound,), (length, *shape[1:])
    n_ellipsis = sum(1 for i in index if i is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > len(shape):
        raise IndexError(f"too many indices for a tensor of shape {shape}: {used} given")
    expanded: list = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - used))
        else:
            expanded.append(i)
    kernel_index: list = []
    out_shape: list[int] = []
    axis = 0
    for i in expanded:
        if i is None:
            out_shape.append(1)
            continue
        n = shape[axis]
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step == 0:
                raise ValueError("slice step cannot be zero")
            length = len(range(start, stop, step))
            # slice.indices gives -1 for "before index 0" (as a start or a stop); as a slice bound that would
            # mean "the last", so an empty selection becomes an explicit empty slice.
            kernel_index.append(slice(start, stop if stop >= 0 else None, step) if length else slice(0, 0, 1))
            out_shape.append(length)
        else:
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for dimension {axis} with size {n}")
            kernel_index.append(int(i) % n)
        axis += 1
    out_shape.extend(shape[axis:])
    return tuple(kernel_index), tuple(out_shape)


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


@primitive("getitem")
def getitem(x: Any, index: Any) -> Any:
    """Basic indexing (ints, slices, None, ...) and one integer-tensor or list index."""
    Tensor = TensorBase  # noqa: N806 - reads as the type it checks for
    if not isinstance(index, tuple):
        index = (index,)
    advanced = [j for j, i in enumerate(index) if isinstance(i, (Tensor, list))]
    if advanced:
        if any(_is_mask(index[j]) for j in advanced):
            return masked_select(x, index if len(index) > 1 else index[0])
        if len(advanced) > 1 or any(i is None or i is Ellipsis for i in index):
            raise IndexError("only one integer-tensor index (without None or ...) is supported; index step by step")
        j = advanced[0]
        idx = index[j]
        if isinstance(idx, list):
            idx = x._new_tensor(idx, dt.int64)
        rest = getitem(x, index[:j] + (slice(None),) + index[j + 1 :])
        axis = sum(1 for i in index[:j] if not isinstance(i, int))
        return take(rest, idx, axis)
    for i in index:
        if not (i is None or i is Ellipsis or isinstance(i, (int, slice))) or isinstance(i, bool):
            raise IndexError(f"unsupported index {i!r}: use ints, slices, None, ... or one integer tensor")
    kernel_index, out_shape = _normalize_basic_index(index, x.shape)
    out = call(SLICE, x, index=kernel_index) if kernel_index else x
    return reshape(out, out_shape)


def _slice_along(x: Any, axis: int, start: int, stop: int) -> Any:
    return getitem(x, (slice(None),) * axis + (slice(start, stop),))


@primitive("split")
def split(x: Any, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Any, ...]:
    """torch.split: pieces of ``split_size_or_sections`` along ``dim`` (the last may be smaller), or of the
    listed sizes (which must add up to the dimension); each piece is differentiable."""
    (axis,) = normalize_axes(dim, x.ndim)
    n = x.shape[axis]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ValueError(
                f"split sections {tuple(sizes)} must be non-negative and add up to {n}, the size of dimension "
                f"{axis} of shape {x.shape}"
            )
    elif isinstance(split_size_or_sections, (int, np.integer)) and not isinstance(split_size_or_sections, bool):
        size = int(split_size_or_sections)
        if size <= 0 and not (size == 0 and n == 0):
            raise ValueError(f"split_size must be a positive int, got {split_size_or_sections!r}")
        sizes = [min(size, n - start) for start in range(0, n, size)] if n else [0]
    else:
        raise TypeError(f"split() takes an int size or a list of sizes, got {split_size_or_sections!r}")
    pieces, start = [], 0
    for s in sizes:
        pieces.append(_slice_along(x, axis, start, start + s))
        start += s
    return tuple(pieces)


@primitive("chunk")
def chunk(x: Any, chunks: int, dim: int = 0) -> tuple[Any, ...]:
    """torch.chunk: at most ``chunks`` pieces of ``ceil(size / chunks)`` along ``dim`` (fewer when the size
    runs out first, as torch returns them)."""
    if not isinstance(chunks, int) or isinstance(chunks, bool) or chunks <= 0:
        raise ValueError(f"chunks must be a positive int, got {chunks!r}")
    (axis,) = normalize_axes(dim, x.ndim)
    n = x.shape[axis]
    return split(x, max(-(-n // chunks), 1), axis)
