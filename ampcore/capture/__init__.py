"""Captured steps: record a call once at the kernel boundary, replay it as a program of kernels.

The engine behind :func:`ampcore.compile` (the face is :mod:`ampcore.compiler`):

- :mod:`.record`: the recording of one eager call (kernels, slots, state read and written, breaks);
- :mod:`.program`: the recorded kernels as a program, and the core's reference replay of it;
- :mod:`.backward`: a captured call's backward, replayed by one autograd node;
- :mod:`.compiled`: guards, the cache of programs, warm-up, recording, replay and the eager fallback;
- :mod:`.dynamic`: host numbers a replay reads afresh (a learning rate).
"""

import threading

from ..hooks import CAPTURE
from .compiled import CaptureConfig, CompiledFunction, Stats, config
from .dynamic import Dynamic, dynamic
from .fusion import FusedStep
from .program import IN_PLACE_KERNELS, Program, draws_per_replay, reference_runner, refs_in
from .record import Break, CaptureBreakError, Recorder, Ref, SlotInfo, Step

__all__ = [
    "IN_PLACE_KERNELS",
    "draws_per_replay",
    "Break",
    "CaptureBreakError",
    "CaptureConfig",
    "CompiledFunction",
    "Dynamic",
    "FusedStep",
    "Program",
    "Recorder",
    "Ref",
    "SlotInfo",
    "Step",
    "Stats",
    "config",
    "dynamic",
    "recording",
    "reference_runner",
    "refs_in",
]


def recording() -> bool:
    """Whether this thread is recording a captured call now."""

    rec = CAPTURE.recorder
    return rec is not None and rec.thread == threading.get_ident()
