"""The two hooks amp installs into the op path, and the counters that make them free while unused.

``ampcore.amp`` installs the autocast router (called at op boundaries while an
autocast region is open on any thread) and the overflow watcher (called after
every primitive and backward step while a ``detect_overflow()`` region is
open).  The layers below amp only read this module, so they need not import
amp: while no region is open, :data:`STATE` ``.plain`` is True and an op pays
one attribute read for both hooks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = [
    "STATE",
    "set_autocast_hook",
    "set_overflow_hook",
    "region_opened",
    "watching_changed",
    "boundary_stack",
    "boundary_names",
    "CAPTURE",
    "keep_device_values",
]


class _HookState:
    """What the op path reads on every call; ``plain`` is True while neither hook can fire."""

    __slots__ = ("autocast_hook", "overflow_hook", "open_regions", "watching", "plain")

    def __init__(self) -> None:
        self.autocast_hook: Callable[..., Any] | None = None
        self.overflow_hook: Callable[..., Any] | None = None
        self.open_regions = 0  # autocast regions open on any thread
        self.watching = 0  # detect_overflow() regions open on any thread
        self.plain = True


STATE = _HookState()


class _CaptureState:
    """What the layers below the capture engine (:mod:`ampcore.capture`) read about captured steps.

    ``recorder`` is the recording in progress (None almost always): host reads, deferred checks and random
    seeds tell it what they did (one read of this slot, off the op path: the op path itself costs nothing,
    the recorder installs its own kernel wrappers).  ``active`` counts compiled calls running now: while it is
    nonzero, optimizers and the GradScaler take their capturable paths (step counts and the skip decision on
    the device), so the call a compiled step warms up with makes the state its recording then reads.
    """

    __slots__ = ("recorder", "active")

    def __init__(self) -> None:
        self.recorder: Any = None
        self.active = 0


CAPTURE = _CaptureState()


def keep_device_values(keep: Callable[..., None], *tensors: Any, arrays: bool = False) -> None:
    """Call ``keep(*tensors)``: host code keeping device values a step made, unread (float8's per-step stats).

    In a captured step (:mod:`ampcore.capture`) each replay calls ``keep`` again with its own values, so what
    the host keeps is what eager steps would have kept, with no host read.

    ``arrays=True`` hands ``keep`` the tensors' backend arrays instead, eagerly and in every replay: for host
    code that only holds them until a later read, no tensor is made per value per step (float8's nine casts
    made 18 a step; the captured digits-MLP float8 step went from about 345 to 335 µs on a 2-core AMD EPYC
    Zen 5).
    """
    keep(*[t._data for t in tensors]) if arrays else keep(*tensors)
    recorder = CAPTURE.recorder
    if recorder is not None:
        recorder.values_kept(keep, tensors, arrays)


_lock = threading.Lock()
_boundaries = threading.local()


def set_autocast_hook(hook: Callable[..., Any] | None) -> None:
    """Install the autocast router, called as ``hook(name, fn, args, kwargs, ineligible)`` at op boundaries."""
    STATE.autocast_hook = hook


def set_overflow_hook(hook: Callable[..., Any] | None) -> None:
    """Install the overflow watcher, called as ``hook(op, phase, inputs, outputs[, within])`` after each
    primitive (forward) and backward step while overflow detection is on."""
    STATE.overflow_hook = hook


def _update() -> None:
    STATE.plain = not STATE.open_regions and not STATE.watching


def region_opened(delta: int) -> None:
    """Count autocast regions entered (+1) and left (-1), across threads."""
    with _lock:
        STATE.open_regions += delta
        _update()


def watching_changed(delta: int) -> None:
    """Count detect_overflow() regions entered (+1) and left (-1), across threads."""
    with _lock:
        STATE.watching += delta
        _update()


def boundary_names() -> list[str]:
    """This thread's stack of op boundaries (mutable: the op path pushes and pops)."""
    names: list[str] = _boundaries.__dict__.setdefault("names", [])
    return names


def boundary_stack() -> tuple[str, ...]:
    """The op boundaries this thread is inside, outermost first (tracked while overflow detection is on)."""
    return tuple(getattr(_boundaries, "names", ()))
