"""Host numbers a captured step must read afresh on every replay: a learning rate a scheduler changes.

A replay runs no Python of the step, so a number the step computed on the host
(``lr``, ``1 - lr * weight_decay``) would be frozen at its recorded value.  Code
that passes such a number to a kernel wraps it with :func:`dynamic` (an
optimizer does, for its learning rate): while a recording runs, that is a
:class:`Dynamic` float carrying a getter, arithmetic on it keeps the getter
(``1.0 - lr * wd`` replays as the same float operations on the fresh ``lr``),
and the recording takes the getter instead of the value.  Outside a recording
:func:`dynamic` returns the plain float: nothing else changes.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable
from typing import Any

from ..hooks import CAPTURE

__all__ = ["Dynamic", "dynamic", "plain"]


class Dynamic(float):
    """A float whose replayed value comes from ``getter()`` (the same float operations, on fresh inputs)."""

    __slots__ = ("getter",)
    getter: Callable[[], float]

    def __new__(cls, value: float, getter: Callable[[], float]) -> Dynamic:
        obj = super().__new__(cls, value)
        obj.getter = getter
        return obj

    def _apply(self, other: Any, op: Callable[[Any, Any], Any], reflected: bool) -> Any:
        if not isinstance(other, (int, float)) or isinstance(other, bool):
            return NotImplemented
        value = op(float(other), float(self)) if reflected else op(float(self), float(other))
        mine = self.getter
        theirs = other.getter if isinstance(other, Dynamic) else (lambda v=float(other): v)
        if reflected:
            return Dynamic(value, lambda: op(theirs(), mine()))
        return Dynamic(value, lambda: op(mine(), theirs()))

    def __add__(self, o: Any) -> Any:
        return self._apply(o, operator.add, False)

    def __radd__(self, o: Any) -> Any:
        return self._apply(o, operator.add, True)

    def __sub__(self, o: Any) -> Any:
        return self._apply(o, operator.sub, False)

    def __rsub__(self, o: Any) -> Any:
        return self._apply(o, operator.sub, True)

    def __mul__(self, o: Any) -> Any:
        return self._apply(o, operator.mul, False)

    def __rmul__(self, o: Any) -> Any:
        return self._apply(o, operator.mul, True)

    def __truediv__(self, o: Any) -> Any:
        return self._apply(o, operator.truediv, False)

    def __rtruediv__(self, o: Any) -> Any:
        return self._apply(o, operator.truediv, True)

    def __pow__(self, o: Any) -> Any:  # type: ignore[override]
        return self._apply(o, operator.pow, False)

    def __rpow__(self, o: Any) -> Any:  # type: ignore[override]
        return self._apply(o, operator.pow, True)

    def __neg__(self) -> Dynamic:
        mine = self.getter
        return Dynamic(-float(self), lambda: -mine())

    def __float__(self) -> float:
        return float.__float__(self)


def dynamic(value: float, getter: Callable[[], Any]) -> float:
    """``value`` as a float; while this thread records a captured step, a :class:`Dynamic` that replays
    as ``float(getter())``.  One read of a slot when nothing records."""
    recorder = CAPTURE.recorder
    if recorder is None or recorder.thread != threading.get_ident():
        return float(value)
    return Dynamic(float(value), lambda: float(getter()))


def plain(value: Any) -> Any:
    """``value`` with every :class:`Dynamic` in it (inside lists, tuples and dicts too) as a plain float: what a
    kernel gets (NumPy takes a float subclass as float64, not as a weak scalar)."""
    if isinstance(value, Dynamic):
        return float(value)
    if type(value) in (list, tuple):
        return type(value)(plain(v) for v in value)
    if type(value) is dict:
        return {k: plain(v) for k, v in value.items()}
    return value
