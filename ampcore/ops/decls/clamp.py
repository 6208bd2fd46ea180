"""clamp and its names: clamp (clip), clamp_min and clamp_max, each with its in-place form (``x.clamp_(0, 1)``).

Each bound form is one elementwise program, ``min(max(x, lo), hi)`` and its halves, so NaN stays NaN and
``lo > hi`` gives ``hi`` everywhere, as torch's.  The gradients are torch's: ``x``'s passes where
``lo <= x <= hi`` (the bounds included; not at NaN), a tensor bound's where it is the result.  A bound may be a
number or a tensor (broadcast).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import expr as E
from ..declare import Domain, Example, Input, composite, elementwise
from ..elementwise import binary, nary

_VARIANTS = ("function", "method", "inplace")
# Multiples of 1/4 offset by 1/8 against whole quarters: never equal to a bound, so gradients are checked where
# they are defined.
_X = Domain(-4, 4, grid=0.25, offset=0.125)
_LO, _HI = Domain(-2, -1, grid=0.25), Domain(1, 2, grid=0.25)


def clamp(input: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's names
    """``input`` limited to ``[min, max]`` (either may be None; numbers or tensors), as torch.clamp."""
    if min is None and max is None:
        raise ValueError("clamp() needs at least one of min and max")
    if min is None:
        return binary("clamp_max", input, max)
    if max is None:
        return binary("clamp_min", input, min)
    return nary("clamp", input, min, max)


def clamp_min(input: Any, min: Any) -> Any:  # noqa: A002 - torch's names
    """``input`` with everything below ``min`` raised to it (torch.clamp_min)."""
    return binary("clamp_min", input, min)


def clamp_max(input: Any, max: Any) -> Any:  # noqa: A002 - torch's names
    """``input`` with everything above ``max`` lowered to it (torch.clamp_max)."""
    return binary("clamp_max", input, max)


def _kept(k: Any, x: Any, lo: Any, hi: Any) -> Any:
    return k.logical_and(k.ge(x, lo), k.le(x, hi))


elementwise(
    "clamp",
    lambda x, lo, hi: E.minimum(E.maximum(x, lo), hi),
    inputs="TTT",
    grads=(
        lambda k, x, lo, hi, y, g: k.where(_kept(k, x, lo, hi), g, 0.0),
        lambda k, x, lo, hi, y, g: k.where(k.lt(x, lo), g, 0.0),
        lambda k, x, lo, hi, y, g: k.where(k.gt(x, hi), g, 0.0),
    ),
    reads=("abc", "ab", "ac"),
    variants=_VARIANTS,
    function=clamp,
    signature="clamp(input, min=None, max=None) -> Tensor",
    domains=(_X, _LO, _HI),
)
elementwise(
    "clamp_min",
    lambda x, lo: E.maximum(x, lo),
    inputs="TT",
    grads=(lambda k, x, lo, y, g: k.where(k.ge(x, lo), g, 0.0), lambda k, x, lo, y, g: k.where(k.lt(x, lo), g, 0.0)),
    reads=("ab", "ab"),
    variants=_VARIANTS,
    function=clamp_min,
    signature="clamp_min(input, min) -> Tensor",
    domains=(_X, _LO),
)
elementwise(
    "clamp_max",
    lambda x, hi: E.minimum(x, hi),
    inputs="TT",
    grads=(lambda k, x, hi, y, g: k.where(k.le(x, hi), g, 0.0), lambda k, x, hi, y, g: k.where(k.gt(x, hi), g, 0.0)),
    reads=("ab", "ab"),
    variants=_VARIANTS,
    function=clamp_max,
    signature="clamp_max(input, max) -> Tensor",
    domains=(_X, _HI),
)


@composite(
    "clip",
    variants=_VARIANTS,
    signature="clip(input, min=None, max=None) -> Tensor",
    example=Example((Input((4, 6), _X),), {"min": -0.5, "max": 1.5}, rule="exact"),
    reference=lambda x, min, max: np.clip(x, min, max),  # noqa: A006 - torch's argument names
)
def clip(input: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's names
    """torch.clip: the same as clamp."""
    return clamp(input, min, max)
