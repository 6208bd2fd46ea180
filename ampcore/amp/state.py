"""Per-thread autocast state: the open region per device type, nesting, and the weight-cast cache.

Every thread starts with autocast off (as in torch: state is not inherited
by new threads).  A ``Region`` is never changed once entered; entering a region saves the
previous one for its device type and leaving restores it exactly.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ..dtypes import DType
from ..policy import Policy
from .trace import Trace

__all__ = ["Region", "ThreadFrames", "thread_state", "shared_decisions"]

# (id(policy), dtype, fallback ops) -> (policy, decisions): regions with the same settings share their
# decisions, so a training step's region decides each (op, input dtypes) once per run, not once per step.
# The policy is held so its id is not reused; the table is dropped when it grows past _MAX_SHARED.
_shared: dict[tuple[int, DType, frozenset[str]], tuple[Any, dict[Any, Any]]] = {}
_MAX_SHARED = 64


def shared_decisions(policy: Policy | None, dtype: DType, fallback_ops: frozenset[str]) -> dict[Any, Any]:
    """The decisions table of regions with this policy, dtype and fallback ops (a function of them alone)."""
    key = (id(policy), dtype, fallback_ops)
    hit = _shared.get(key)
    if hit is not None and hit[0] is policy:
        return hit[1]
    if len(_shared) >= _MAX_SHARED:
        _shared.clear()
    decisions: dict[Any, Any] = {}
    _shared[key] = (policy, decisions)
    return decisions


@dataclass(eq=False, slots=True)
class Region:
    """One autocast region's settings for one device type (not reassigned once entered; not frozen because
    a frozen dataclass's ``__init__`` costs several times a slotted one's, paid by every ``with autocast``)."""

    device_type: str
    enabled: bool
    dtype: DType
    cache_enabled: bool
    policy: Policy | None
    trace: Trace | None
    fallback_ops: frozenset[str] = frozenset()
    # (op, input dtypes, ineligible) -> Decision; decisions depend on nothing else within a region.
    decisions: dict[Any, Any] = field(default_factory=dict)
    # whether an eligible op ran on tensors of a device type this region does not cover (it warns once)
    warned_uncovered: bool = False


class ThreadFrames:
    """The per-thread fields the op path reads on every call, in a plain slotted object.

    A ``threading.local`` attribute read costs about 500 instructions (CPython finds the thread's dict
    first), a slot read about 20: the router and ``with autocast`` read ``thread_state.frames`` once and
    these from it.
    """

    __slots__ = ("regions", "saved", "nesting", "depth", "cast_cache")

    def __init__(self) -> None:
        self.regions: dict[str, Region] = {}
        self.saved: list[tuple[str, Region | None]] = []
        self.nesting = 0
        self.depth = 0  # > 0 while an op body runs: ops inside it are not autocast again
        # (id(tensor), dtype, grad mode) -> (tensor, its array when cast, the cast tensor)
        self.cast_cache: dict[tuple[int, DType, bool], tuple[Any, Any, Any]] = {}


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.frames = frames = ThreadFrames()
        # The same containers as ``frames`` holds (never rebound), under their old names.
        self.regions = frames.regions
        self.saved = frames.saved
        self.cast_cache = frames.cast_cache
        # device type -> dtype of the last enabled region entered (GradScaler warns about bfloat16).
        self.last_dtype: dict[str, DType] = {}
        # device type -> the recipe a Float8Linear ran with gradients on since the last GradScaler.scale(), which
        # reads and clears it (and warns: float8 layers need no loss scale).
        self.float8_recipe: dict[str, tuple[str, DType | None]] = {}  # (recipe, the autocast dtype or None)


thread_state = _ThreadState()
