"""Finding where an overflow started: an opt-in debug mode (beyond torch).

When GradScaler skips a step, torch tells you only that *some* gradient held
inf or NaN.  Inside ``detect_overflow()`` every primitive op's output, and
every backward step's gradients, are checked as they are made (float8 casts
and ``quantize_float8`` too: an unsaturated e4m3fn overflow is NaN); the first one
that went non-finite from finite inputs is recorded with its name, shapes,
dtypes and the composite ops it ran inside, and a skipped ``scaler.step``
names it in a warning::

    with ampcore.amp.detect_overflow() as watch:
        with ampcore.autocast("cpu", dtype="float16"):
            loss = model(x).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)     # skipped: RuntimeWarning naming e.g. 'mul' inside 'linear', forward
    print(watch.first)

Each check reads a flag from the device (counted as "overflow-debug" host
syncs), so this is for debugging, not for training runs.  The watch is per
thread, like autocast.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import dispatch
from .. import dtypes as dt
from ..syncs import to_host
from ..tensor import Tensor

__all__ = ["detect_overflow", "OverflowRecord"]

_state = threading.local()
_REASON = "overflow-debug"


@dataclass(frozen=True)
class OverflowRecord:
    """Where a non-finite value first appeared: an op's forward output or its backward's gradients."""

    op: str
    phase: str  # "forward" or "backward"
    inputs: tuple[str, ...]  # "float16[64, 10]" per tensor input (backward: the incoming gradient first)
    outputs: tuple[str, ...]
    within: tuple[str, ...] = ()  # enclosing op boundaries, outermost first
    device: str = ""

    def __str__(self) -> str:
        inside = f" inside {' > '.join(repr(w) for w in self.within)}" if self.within else ""
        return (
            f"{self.op!r}{inside}, {self.phase}, on {self.device}: {', '.join(self.inputs) or 'no tensor inputs'}"
            f" -> {', '.join(self.outputs)} went non-finite from finite inputs"
        )


class detect_overflow:
    """Context manager: record the first op whose output (forward or backward) went non-finite.

    ``first`` is that :class:`OverflowRecord` (None while nothing overflowed);
    ``records`` keeps every op where a new non-finite value appeared, up to
    ``limit``.  Regions nest; the innermost collects.
    """

    def __init__(self, limit: int = 16):
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        self.limit = limit
        self.records: list[OverflowRecord] = []

    @property
    def first(self) -> OverflowRecord | None:
        return self.records[0] if self.records else None

    def reset(self) -> None:
        """Forget what was recorded (say, after a skipped step was reported)."""
        self.records.clear()

    def __enter__(self) -> detect_overflow:
        _stack().append(self)
        dispatch.watching_changed(+1)
        return self

    def __exit__(self, *exc: Any) -> None:
        _stack().remove(self)
        dispatch.watching_changed(-1)

    def _add(self, record: OverflowRecord) -> None:
        if len(self.records) < self.limit:
            self.records.append(record)


def _stack() -> list[detect_overflow]:
    if not hasattr(_state, "watches"):
        _state.watches = []
    return _state.watches


def active() -> detect_overflow | None:
    """This thread's innermost watch, if any."""
    stack = getattr(_state, "watches", None)
    return stack[-1] if stack else None


def _describe(t: Any) -> str:
    return f"{t.dtype.name}[{', '.join(map(str, t.shape))}]"


def _finite(t: Any) -> bool:
    """Whether every element of a float tensor is finite: x - x is 0 exactly where x is finite."""
    if not isinstance(t, Tensor) or not t.dtype.is_floating_point or t.numel() == 0:
        return True
    k = dispatch.guarded_kernels(t._backend, "detect_overflow")
    data = k.cast(t._data, dt.float32) if t.dtype in dt.FLOAT8_DTYPES else t._data  # float8 is storage only
    bad = k.sum(k.ne(k.sub(data, data), 0.0), tuple(range(t.ndim)), False)
    return int(to_host(Tensor._wrap(bad, t.device, t._backend), _REASON)) == 0


def check(
    op: str, phase: str, inputs: Sequence[Any], outputs: Sequence[Any], within: tuple[str, ...] | None = None
) -> None:
    """Record ``op`` if one of ``outputs`` is non-finite while every tensor of ``inputs`` is finite.

    ``within``: the composite ops it ran inside (default: the boundaries open now, right for forward).
    """
    watch = active()
    if watch is None or len(watch.records) >= watch.limit:
        return
    tensors_out = [t for t in outputs if t is not None and hasattr(t, "dtype")]
    if all(_finite(t) for t in tensors_out):
        return
    tensors_in = [t for t in inputs if t is not None and hasattr(t, "dtype")]
    if not all(_finite(t) for t in tensors_in):
        return
    within = dispatch.boundary_stack() if within is None else within
    if within and within[-1] == op:  # a primitive's own boundary
        within = within[:-1]
    watch._add(
        OverflowRecord(
            op,
            phase,
            tuple(map(_describe, tensors_in)),
            tuple(map(_describe, tensors_out)),
            within,
            str(tensors_out[0].device),
        )
    )
