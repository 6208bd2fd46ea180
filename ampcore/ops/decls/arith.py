"""The two-operand arithmetic ops: add, sub, mul, div, pow, maximum and minimum (broadcasting; either operand
may be a Python number, which takes the tensor's dtype)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ... import expr as E
from ..declare import Domain, binary

Scalar = (int, float, bool)


def _pow_base(k: Any, a: Any, b: Any, y: Any, g: Any) -> Any:
    return k.mul(g, k.mul(b, k.pow(a, k.sub(b, 1.0) if not isinstance(b, Scalar) else b - 1.0)))


def _pow_exponent(k: Any, a: Any, b: Any, y: Any, g: Any) -> Any:
    # d(a**b)/db = a**b * log(a); define it as 0 where a == 0 (torch does the same for b > 0).
    if isinstance(a, Scalar):
        return k.mul(g, k.mul(y, math.log(a))) if a != 0 else k.mul(g, 0.0)
    return k.mul(g, k.where(k.eq(a, 0.0), 0.0, k.mul(y, k.log(a))))


def _tie_split(k: Any, a: Any, b: Any, g: Any, win: Callable[[Any, Any], Any]) -> Any:
    """Gradient to ``a`` of max/min: all of it where ``a`` wins, half on ties (as torch)."""
    return k.where(win(a, b), g, k.where(k.eq(a, b), k.mul(g, 0.5), 0.0))


binary(
    "add",
    E.add,
    grads=(lambda k, a, b, y, g: g, lambda k, a, b, y, g: g),
    operators=("__add__",),
    roperators=("__radd__",),
)
binary(
    "sub",
    E.sub,
    grads=(lambda k, a, b, y, g: g, lambda k, a, b, y, g: k.neg(g)),
    operators=("__sub__",),
    roperators=("__rsub__",),
)
binary(
    "mul",
    E.mul,
    grads=(lambda k, a, b, y, g: k.mul(g, b), lambda k, a, b, y, g: k.mul(g, a)),
    reads=("b", "a"),
    operators=("__mul__",),
    roperators=("__rmul__",),
)
binary(
    "div",
    E.div,
    grads=(lambda k, a, b, y, g: k.div(g, b), lambda k, a, b, y, g: k.neg(k.div(k.mul(g, y), b))),
    reads=("b", "by"),
    operators=("__truediv__",),
    roperators=("__rtruediv__",),
    reflected="__rtruediv__",
    domains=(Domain(), Domain(0.25, 4, signed=True)),
)
binary(
    "pow",
    E.pow_,
    grads=(_pow_base, _pow_exponent),
    reads=("ab", "aby"),
    operators=("__pow__",),
    roperators=("__rpow__",),
    reflected="__rpow__",
    domains=(Domain(0.25, 4), Domain(-3, 3)),
)
# Multiples of 1/4 offset by 1/8 against plain ones: exact in every dtype and never tied, so the gradient
# (split in half on a tie) is checked where it is defined.
_NO_TIES = (Domain(-4, 4, grid=0.25, offset=0.125), Domain(-4, 4, grid=0.25))
binary(
    "maximum",
    E.maximum,
    grads=(lambda k, a, b, y, g: _tie_split(k, a, b, g, k.gt), lambda k, a, b, y, g: _tie_split(k, b, a, g, k.gt)),
    reads=("ab", "ab"),
    domains=_NO_TIES,
)
binary(
    "minimum",
    E.minimum,
    grads=(lambda k, a, b, y, g: _tie_split(k, a, b, g, k.lt), lambda k, a, b, y, g: _tie_split(k, b, a, g, k.lt)),
    reads=("ab", "ab"),
    domains=_NO_TIES,
)
