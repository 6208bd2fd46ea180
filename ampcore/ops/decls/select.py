"""``where``: a choice between two values by a bool condition, the values' stored bits kept (NaN payloads,
signed zeros), as a backend may select storage without converting it."""

from __future__ import annotations

from ... import expr as E
from .. import elementwise as ew
from ..declare import elementwise

elementwise(
    "where",
    E.select,
    inputs="bTT",
    grads=(
        None,
        lambda k, cond, a, b, y, g: k.where(cond, g, 0.0),
        lambda k, cond, a, b, y, g: k.where(cond, 0.0, g),
    ),
    reads=("", "a", "a"),
    function=ew.where,
    signature="where(condition, input, other) -> Tensor",
    variants=("function", "method"),
)
