"""Small helpers shared by the functional ops: argument checks, reductions, compute dtype."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import dtypes as dt
from ...ops import elementwise as ew
from ...tensor import Tensor

REDUCTIONS = ("none", "mean", "sum")


def check_tensor(value: Any, name: str, op: str) -> Tensor:
    """``value`` itself if it is a Tensor, else TypeError naming the argument."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}() argument {name!r} must be a Tensor, got {type(value).__name__}")
    return value


def check_float(x: Tensor, name: str, op: str) -> Tensor:
    """``x`` if it is a floating tensor, else TypeError naming its dtype."""
    check_tensor(x, name, op)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}() needs a floating {name}, got dtype {x.dtype.name}")
    return x


def check_reduction(reduction: str, op: str) -> str:
    """``reduction`` if it is 'none', 'mean' or 'sum', else ValueError listing them."""
    if reduction not in REDUCTIONS:
        valid = ", ".join(repr(r) for r in REDUCTIONS)
        raise ValueError(f"{op}(): unknown reduction {reduction!r}; valid reductions are {valid}")
    return reduction


def legacy_reduction(size_average: Any, reduce: Any, reduction: str, op: str) -> str:
    """The reduction to use; the deprecated ``size_average``/``reduce`` arguments are refused."""
    if size_average is not None or reduce is not None:
        raise ValueError(
            f"{op}(): size_average and reduce are deprecated and not supported; use reduction='none' | 'mean' | 'sum'"
        )
    return check_reduction(reduction, op)


def apply_reduction(loss: Tensor, reduction: str) -> Tensor:
    """Apply a loss reduction ('none', 'mean' or 'sum')."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def opmath(x: Tensor) -> Tensor:
    """``x`` in the dtype a fused kernel would compute in: float32 for float16/bfloat16.

    Used where torch's own kernel computes internally in float32 and rounds
    once on output (softmax, normalisation statistics).
    """
    return ew.cast(x, dt.float32) if x.dtype in dt.LOW_PRECISION_DTYPES else x


def ntuple(value: Any, n: int, name: str, op: str, minimum: int = 0) -> tuple[int, ...]:
    """An int or a sequence of ``n`` ints as a tuple of ``n`` ints >= ``minimum``; ValueError otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        values: Sequence[Any] = (value,) * n
    elif isinstance(value, (tuple, list)) and len(value) == n:
        values = value
    else:
        raise ValueError(f"{op}(): {name} must be an int or a sequence of {n} ints, got {value!r}")
    if any(not isinstance(v, int) or isinstance(v, bool) or v < minimum for v in values):
        raise ValueError(f"{op}(): {name} must hold ints >= {minimum}, got {value!r}")
    return tuple(values)
