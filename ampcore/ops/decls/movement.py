"""Ops that move values without arithmetic: view_as and reshape_as, repeat, tile and repeat_interleave, narrow,
flip (and fliplr / flipud), roll, diag, diagonal and diag_embed.

Each is a composition of the primitive shape ops (reshape, expand, slicing, concatenation, take and its
scatter-add), so every backend runs it and autograd differentiates it with the primitives' own rules.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import dtypes as dt
from ..declare import Example, Input, composite
from ..reduction import normalize_axes
from ..shape import cat, expand, getitem, index_add, permute, reshape, take

_ALL = slice(None)


def _sizes(args: tuple[Any, ...], what: str) -> tuple[int, ...]:
    """``f(2, 3)`` or ``f((2, 3))``: the sizes as ints; TypeError names a bad one."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    for a in args:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"{what} takes ints, got {a!r}")
    return tuple(int(a) for a in args)


@composite(
    "view_as",
    variants=("method",),
    signature="view_as(self, other) -> Tensor",
    example=Example((Input((3, 4)), Input((2, 6), kind="bool")), rule="exact"),
    reference=lambda x, other: x.reshape(other.shape),
)
def view_as(self: Any, other: Any) -> Any:
    """``self`` in ``other``'s shape (torch.Tensor.view_as; ampcore tensors have no strides to share)."""
    return reshape(self, other.shape)


@composite(
    "reshape_as",
    variants=("method",),
    signature="reshape_as(self, other) -> Tensor",
    example=Example((Input((3, 4)), Input((6, 2), kind="bool")), rule="exact"),
    reference=lambda x, other: x.reshape(other.shape),
)
def reshape_as(self: Any, other: Any) -> Any:
    """``self`` reshaped to ``other``'s shape (torch.Tensor.reshape_as)."""
    return reshape(self, other.shape)


def _repeat_reference(x: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    return np.tile(x, sizes)


@composite(
    "repeat",
    variants=("method",),
    signature="repeat(self, *sizes) -> Tensor",
    example=Example(
        (Input((2, 3)),), {"sizes": (2, 1, 3)}, rule="exact", n_grad=(6,), call=lambda op, x, sizes: op(x, *sizes)
    ),
    reference=_repeat_reference,
)
def repeat(self: Any, *sizes: Any) -> Any:
    """``self`` tiled ``sizes[i]`` times along each dimension (torch.Tensor.repeat: ``len(sizes) >= ndim``,
    extra leading sizes add dimensions); the gradient sums the copies."""
    reps = _sizes(sizes, "repeat()")
    if len(reps) < self.ndim:
        raise ValueError(
            f"repeat(): {len(reps)} sizes {reps} for a tensor of {self.ndim} dimensions {self.shape}; give at least "
            f"{self.ndim}"
        )
    if any(r < 0 for r in reps):
        raise ValueError(f"repeat(): sizes {reps} must be non-negative")
    shape = (1,) * (len(reps) - self.ndim) + tuple(self.shape)
    # (s0, s1, ...) -> (1, s0, 1, s1, ...) -> expanded (r0, s0, r1, s1, ...) -> (r0 * s0, r1 * s1, ...)
    spread = reshape(self, tuple(v for s in shape for v in (1, s)))
    wide = expand(spread, tuple(v for r, s in zip(reps, shape) for v in (r, s)))
    return reshape(wide, tuple(r * s for r, s in zip(reps, shape)))


@composite(
    "tile",
    signature="tile(input, dims) -> Tensor",
    example=Example((Input((2, 3)),), {"dims": (2, 2)}, rule="exact", n_grad=(4,)),
    reference=lambda x, dims: np.tile(x, dims),
)
def tile(input: Any, dims: Sequence[int]) -> Any:  # noqa: A002 - torch's argument name
    """``input`` repeated ``dims[i]`` times along each dimension (torch.tile: fewer dims than the tensor's are
    padded with ones in front, unlike repeat)."""
    reps = _sizes((dims,), "tile()")
    return repeat(input, (1,) * (input.ndim - len(reps)) + reps)


@composite(
    "repeat_interleave",
    signature="repeat_interleave(input, repeats, dim=None) -> Tensor",
    example=Example((Input((3, 4)),), {"repeats": 2, "dim": 1}, rule="exact", n_grad=(2,)),
    reference=lambda x, repeats, dim: np.repeat(x, repeats, axis=dim),
)
def repeat_interleave(input: Any, repeats: Any, dim: int | None = None) -> Any:  # noqa: A002 - torch's name
    """Each element (slice along ``dim``; of the flattened tensor if None) repeated ``repeats`` times in place
    (torch.repeat_interleave); ``repeats`` an int or a 1-D tensor of one count per element (read on the host)."""
    x = reshape(input, (-1,)) if dim is None else input
    (axis,) = normalize_axes(0 if dim is None else dim, x.ndim)
    n = x.shape[axis]
    if isinstance(repeats, (int, np.integer)) and not isinstance(repeats, bool):
        if repeats < 0:
            raise ValueError(f"repeat_interleave(): repeats must be non-negative, got {repeats}")
        spread = reshape(x, x.shape[: axis + 1] + (1,) + x.shape[axis + 1 :])
        wide = expand(spread, x.shape[: axis + 1] + (int(repeats),) + x.shape[axis + 1 :])
        return reshape(wide, x.shape[:axis] + (n * int(repeats),) + x.shape[axis + 1 :])
    counts = np.asarray(repeats.numpy() if hasattr(repeats, "numpy") else repeats, dtype=np.int64).reshape(-1)
    if counts.size == 1:
        counts = np.full(n, counts[0])
    if counts.size != n or (counts < 0).any():
        raise ValueError(
            f"repeat_interleave(): repeats must be one non-negative count per element ({n} along dimension {axis}), "
            f"got {counts.tolist()}"
        )
    return take(x, x._new_tensor(np.repeat(np.arange(n), counts), dt.int64), axis)


@composite(
    "narrow",
    signature="narrow(input, dim, start, length) -> Tensor",
    example=Example((Input((4, 6)),), {"dim": 1, "start": 1, "length": 3}, rule="exact"),
    reference=lambda x, dim, start, length: np.take(x, range(start, start + length), axis=dim),
)
def narrow(input: Any, dim: int, start: int, length: int) -> Any:  # noqa: A002 - torch's argument name
    """``length`` elements of ``input`` along ``dim`` from ``start`` (negative counts from the end), as
    torch.narrow; IndexError where the range leaves the dimension."""
    (axis,) = normalize_axes(dim, input.ndim)
    size = input.shape[axis]
    begin = int(start) + size if int(start) < 0 else int(start)
    if not 0 <= begin <= size or length < 0 or begin + int(length) > size:
        raise IndexError(
            f"narrow(): start {start} and length {length} leave dimension {axis} of size {size} (shape {input.shape})"
        )
    return getitem(input, (_ALL,) * axis + (slice(begin, begin + int(length)),))


@composite(
    "flip",
    signature="flip(input, dims) -> Tensor",
    example=Example((Input((3, 4, 5)),), {"dims": (0, 2)}, rule="exact"),
    reference=lambda x, dims: np.flip(x, dims),
)
def flip(input: Any, dims: Any) -> Any:  # noqa: A002 - torch's argument name
    """``input`` with the order of its elements reversed along each of ``dims`` (torch.flip)."""
    axes = normalize_axes(dims, input.ndim) if dims != () else ()
    if not axes:
        return input
    return getitem(input, tuple(slice(None, None, -1) if i in axes else _ALL for i in range(input.ndim)))


@composite(
    "fliplr",
    signature="fliplr(input) -> Tensor",
    example=Example((Input((3, 4)),), rule="exact"),
    reference=np.fliplr,
)
def fliplr(input: Any) -> Any:  # noqa: A002 - torch's argument name
    """Columns reversed (torch.fliplr: dimension 1 of a tensor of at least 2 dimensions)."""
    if input.ndim < 2:
        raise ValueError(f"fliplr() needs at least 2 dimensions, got shape {input.shape}")
    return flip(input, (1,))


@composite(
    "flipud",
    signature="flipud(input) -> Tensor",
    example=Example((Input((3, 4)),), rule="exact"),
    reference=np.flipud,
)
def flipud(input: Any) -> Any:  # noqa: A002 - torch's argument name
    """Rows reversed (torch.flipud: dimension 0 of a tensor of at least 1 dimension)."""
    if input.ndim < 1:
        raise ValueError(f"flipud() needs at least 1 dimension, got shape {input.shape}")
    return flip(input, (0,))


@composite(
    "roll",
    signature="roll(input, shifts, dims=None) -> Tensor",
    example=Example((Input((3, 5)),), {"shifts": (2, -1), "dims": (1, 0)}, rule="exact"),
    reference=lambda x, shifts, dims: np.roll(x, shifts, dims),
)
def roll(input: Any, shifts: Any, dims: Any = None) -> Any:  # noqa: A002 - torch's argument name
    """``input`` rotated by ``shifts`` along ``dims`` (torch.roll: elements past the end come back at the start;
    without ``dims`` the flattened tensor is rolled and the shape restored)."""
    if dims is None:
        if isinstance(shifts, (tuple, list)) and len(shifts) != 1:
            raise ValueError(f"roll(): without dims, shifts must be one int, got {shifts!r}")
        shift = shifts[0] if isinstance(shifts, (tuple, list)) else shifts
        return reshape(roll(reshape(input, (-1,)), shift, 0), input.shape)
    shift_list = list(shifts) if isinstance(shifts, (tuple, list)) else [shifts]
    dim_list = list(dims) if isinstance(dims, (tuple, list)) else [dims]
    if len(shift_list) != len(dim_list):
        raise ValueError(f"roll(): shifts {shifts!r} and dims {dims!r} must have the same length")
    out = input
    for shift, dim in zip(shift_list, dim_list):
        (axis,) = normalize_axes(dim, out.ndim)
        n = out.shape[axis]
        s = int(shift) % n if n else 0
        if s:
            lead = (_ALL,) * axis
            out = cat([getitem(out, lead + (slice(n - s, n),)), getitem(out, lead + (slice(0, n - s),))], axis)
    return out


def _diagonal_positions(rows: int, cols: int, offset: int) -> np.ndarray:
    """Flat positions (row-major, ``cols`` wide) of the ``offset`` diagonal of a rows x cols matrix."""
    start_row, start_col = builtins.max(-offset, 0), builtins.max(offset, 0)
    length = builtins.max(builtins.min(rows - start_row, cols - start_col), 0)
    i = np.arange(length, dtype=np.int64)
    return (start_row + i) * cols + start_col + i


@composite(
    "diagonal",
    signature="diagonal(input, offset=0, dim1=0, dim2=1) -> Tensor",
    example=Example((Input((2, 4, 5)),), {"offset": 1, "dim1": 1, "dim2": 2}, rule="exact"),
    reference=lambda x, offset, dim1, dim2: np.diagonal(x, offset, dim1, dim2),
)
def diagonal(input: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:  # noqa: A002 - torch's name
    """The ``offset`` diagonal of the matrices in dims ``dim1`` and ``dim2``, as a last dimension (torch.diagonal);
    differentiable (a take, whose gradient scatters back)."""
    a, b = (normalize_axes(d, input.ndim)[0] for d in (dim1, dim2))
    if a == b:
        raise ValueError(f"diagonal(): dim1 and dim2 are both dimension {a}")
    rest = [i for i in range(input.ndim) if i not in (a, b)]
    moved = permute(input, (*rest, a, b))
    rows, cols = input.shape[a], input.shape[b]
    flat = reshape(moved, moved.shape[:-2] + (rows * cols,))
    positions = input._new_tensor(_diagonal_positions(rows, cols, int(offset)), dt.int64)
    return take(flat, positions, flat.ndim - 1)


def _diag_embed(x: Any, offset: int) -> Any:
    """(..., n) -> (..., m, m) with ``x`` on the ``offset`` diagonal, zeros elsewhere (a scatter-add)."""
    n = x.shape[-1]
    m = n + abs(offset)
    positions = x._new_tensor(_diagonal_positions(m, m, offset), dt.int64)
    flat = index_add(x, positions, x.ndim - 1, m * m)
    return reshape(flat, x.shape[:-1] + (m, m))


@composite(
    "diag_embed",
    signature="diag_embed(input, offset=0, dim1=-2, dim2=-1) -> Tensor",
    example=Example((Input((2, 3)),), {"offset": -1}, rule="exact"),
    reference=lambda x, offset: np.stack([np.diag(row, offset) for row in x]),
)
def diag_embed(input: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:  # noqa: A002 - torch's name
    """Matrices with the last dimension of ``input`` on their ``offset`` diagonal (torch.diag_embed; the matrices
    in the last two dimensions only)."""
    if normalize_axes((dim1, dim2), input.ndim + 1) != (input.ndim - 1, input.ndim):
        raise NotImplementedError("diag_embed(): only dim1=-2, dim2=-1 (the matrices last) is supported")
    return _diag_embed(input, int(offset))


@composite(
    "diag",
    signature="diag(input, diagonal=0) -> Tensor",
    example=Example((Input((4,)),), {"diagonal": 1}, rule="exact"),
    reference=lambda x, diagonal: np.diag(x, diagonal),
)
def diag(input: Any, diagonal: int = 0) -> Any:  # noqa: A002 - torch's argument name
    """torch.diag: a 1-D ``input`` on the ``diagonal`` of a square matrix, or the ``diagonal`` of a 2-D one."""
    if input.ndim == 1:
        return _diag_embed(input, int(diagonal))
    if input.ndim == 2:
        return _diagonal_of(input, int(diagonal))
    raise ValueError(f"diag() takes a 1-D or 2-D tensor, got shape {input.shape}; use diagonal() or diag_embed()")


def _diagonal_of(x: Any, offset: int) -> Any:
    rows, cols = x.shape
    positions = x._new_tensor(_diagonal_positions(rows, cols, offset), dt.int64)
    return take(reshape(x, (rows * cols,)), positions, 0)
