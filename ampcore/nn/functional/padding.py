"""F.pad with torch's four modes: constant, reflect, replicate and circular.

``F.pad`` itself is a plain function, as torch's is: it hands each mode to its own op, so autocast decides each
as torch's does (its CPU autocast runs ``reflection_pad1d``/``2d`` and ``replication_pad1d``/``2d``/``3d`` in
float32 and leaves the others to their inputs' type).  Each non-constant pad is a declared op
(:mod:`ampcore.ops.declare`) built of slices, reversed slices, broadcasts and one concatenation per padded
dimension, so it runs on every backend and its gradient sums the copies back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ops import cat
from ...ops import pad as constant_pad
from ...ops.declare import Example, Input, composite
from ...tensor import Tensor
from ._utils import check_tensor

__all__ = ["pad", "MODES"]

MODES = ("constant", "reflect", "replicate", "circular")
_ALL = slice(None)


def _along(x: Tensor, axis: int, index: slice) -> Tensor:
    return x[(_ALL,) * axis + (index,)]


def _reflect(x: Tensor, axis: int, lo: int, hi: int) -> Tensor:
    n = x.shape[axis]
    if lo >= n or hi >= n:
        raise ValueError(f"reflect padding ({lo}, {hi}) must be below the size {n} of dimension {axis}")
    parts = [_along(x, axis, slice(lo, 0, -1))] if lo else []
    parts.append(x)
    if hi:
        stop = n - 2 - hi
        parts.append(_along(x, axis, slice(n - 2, stop if stop >= 0 else None, -1)))  # -1 would mean the last
    return cat(parts, axis) if len(parts) > 1 else x


def _replicate(x: Tensor, axis: int, lo: int, hi: int) -> Tensor:
    n = x.shape[axis]
    if n == 0:
        raise ValueError(f"replicate padding needs a non-empty dimension {axis}")

    def edge(index: slice, count: int) -> Tensor:
        one = _along(x, axis, index)
        return one.expand(one.shape[:axis] + (count,) + one.shape[axis + 1 :])

    parts = ([edge(slice(0, 1), lo)] if lo else []) + [x] + ([edge(slice(n - 1, n), hi)] if hi else [])
    return cat(parts, axis) if len(parts) > 1 else x


def _circular(x: Tensor, axis: int, lo: int, hi: int) -> Tensor:
    n = x.shape[axis]
    if lo > n or hi > n:
        raise ValueError(f"circular padding ({lo}, {hi}) must be at most the size {n} of dimension {axis}")
    parts = ([_along(x, axis, slice(n - lo, n))] if lo else []) + [x] + ([_along(x, axis, slice(0, hi))] if hi else [])
    return cat(parts, axis) if len(parts) > 1 else x


Padder = Callable[[Tensor, int, int, int], Tensor]


def _pad_last_dims(op: str, x: Tensor, padding: Sequence[int], padder: Padder, dims: int | None = None) -> Tensor:
    """``padding`` = (left, right) pairs from the last dimension backwards, applied by ``padder``."""
    check_tensor(x, "input", op)
    widths = [int(p) for p in padding]
    count = len(widths) // 2
    if len(widths) % 2 or count == 0 or (dims is not None and count != dims):
        expected = f"{2 * dims} values" if dims is not None else "an even number of values"
        raise ValueError(f"{op}(): padding {tuple(padding)} must hold {expected}, (left, right) per dimension")
    if dims is not None and x.ndim not in (dims + 1, dims + 2):
        raise ValueError(
            f"{op}(): expects a {dims + 1}-D (unbatched) or {dims + 2}-D (batched) input, got shape {x.shape}"
        )
    if any(w < 0 for w in widths):
        raise ValueError(f"{op}(): padding {tuple(padding)} must be non-negative for this mode")
    out = x
    for i in range(count):
        out = padder(out, x.ndim - 1 - i, widths[2 * i], widths[2 * i + 1])
    return out


def _np_widths(x: np.ndarray, padding: Sequence[int]) -> list[tuple[int, int]]:
    widths = [(0, 0)] * x.ndim
    for i in range(len(padding) // 2):
        widths[x.ndim - 1 - i] = (padding[2 * i], padding[2 * i + 1])
    return widths


def _declare_pad(name: str, padder: Padder, dims: int, np_mode: Any, shape: tuple[int, ...]) -> Any:
    """The op ``name`` (torch's aten op of that name): ``padder`` over the last ``dims`` dimensions."""
    padding = (1, 2, 2, 1, 1, 1)[: 2 * dims]
    # The fan-in of a gradient: an edge element replicated 2 times (plus itself) collects 3 terms.
    fan_in = 3**dims if np_mode == "edge" else 2**dims

    def op(input: Tensor, padding: Sequence[int]) -> Tensor:  # noqa: A002 - torch's argument name
        return _pad_last_dims(name, input, padding, padder, dims)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"torch's {name}: ``input`` padded in its last {dims} dimension(s) by mode {np_mode!r} of np.pad."
    return composite(
        name,
        variants=(),
        torch_function=f"_C._nn.{name}",
        signature=f"{name}(input, padding) -> Tensor",
        example=Example((Input(shape),), {"padding": padding}, rule="exact", n_grad=(fan_in,)),
        reference=lambda x, padding: np.pad(x, _np_widths(x, padding), mode=np_mode),
    )(op)


_SHAPES = {1: (2, 3, 5), 2: (2, 3, 4, 5), 3: (1, 2, 3, 4, 5)}
REFLECT = {d: _declare_pad(f"reflection_pad{d}d", _reflect, d, "reflect", _SHAPES[d]) for d in (1, 2, 3)}
REPLICATE = {d: _declare_pad(f"replication_pad{d}d", _replicate, d, "edge", _SHAPES[d]) for d in (1, 2, 3)}


@composite(
    "pad_circular",
    variants=(),
    aten="_pad_circular",
    torch_function="_C._nn._pad_circular",
    signature="pad_circular(input, pad) -> Tensor",
    example=Example((Input((2, 3, 4, 5)),), {"pad": (1, 2, 2, 1)}, rule="exact", n_grad=(4,)),
    reference=lambda x, pad: np.pad(x, _np_widths(x, pad), mode="wrap"),
)
def pad_circular(input: Tensor, pad: Sequence[int]) -> Tensor:  # noqa: A002 - torch's argument name
    """torch's circular padding: what leaves one side comes in at the other (at most the dimension's size)."""
    return _pad_last_dims("pad_circular", input, pad, _circular)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:  # noqa: A002
    """torch.nn.functional.pad: ``pad`` lists (left, right) widths from the last dimension backwards.

    ``constant`` pads any number of dimensions with ``value`` (default 0; negative widths crop);
    ``reflect`` (mirrored, the edge not repeated), ``replicate`` (the edge repeated) and ``circular``
    (wrapped) pad the last 1, 2 or 3 dimensions of a batched or unbatched input.  ValueError names a bad mode,
    width or shape.
    """
    check_tensor(input, "input", "pad")
    if mode not in MODES:
        raise ValueError(f"pad(): unknown mode {mode!r}; valid modes are {', '.join(map(repr, MODES))}")
    widths = [int(p) for p in pad]
    if mode == "constant":
        return _constant(input, widths, 0.0 if value is None else value)
    if value not in (None, 0, 0.0):
        raise ValueError(f"pad(): value={value!r} is only for mode='constant', not {mode!r}")
    dims = len(widths) // 2
    if len(widths) % 2 or dims not in (1, 2, 3) or input.ndim not in (dims + 1, dims + 2):
        raise ValueError(
            f"pad(): mode {mode!r} pads the last 1, 2 or 3 dimensions of a batched or unbatched input: padding "
            f"{tuple(pad)} with an input of shape {input.shape} does not fit"
        )
    if mode == "circular":
        return pad_circular(input, widths)
    return (REFLECT if mode == "reflect" else REPLICATE)[dims](input, widths)


def _constant(x: Tensor, widths: list[int], value: float) -> Tensor:
    """Constant padding; negative widths crop first, as torch's."""
    if len(widths) % 2 or len(widths) // 2 > x.ndim:
        raise ValueError(f"pad(): padding {tuple(widths)} must have an even length of at most 2 * ndim = {2 * x.ndim}")
    if any(w < 0 for w in widths):
        index = [_ALL] * x.ndim
        for i in range(len(widths) // 2):
            axis, lo, hi = x.ndim - 1 - i, widths[2 * i], widths[2 * i + 1]
            index[axis] = slice(max(-lo, 0), x.shape[axis] - max(-hi, 0))
        x = x[tuple(index)]
        widths = [max(w, 0) for w in widths]
    return constant_pad(x, widths, value)
