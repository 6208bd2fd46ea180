"""A captured program (``ampcore.compile``) replayed as a prebuilt list of enqueues: this backend's
``capture_runner``.

The core's reference runner calls each kernel function, and each plans its launch in Python before it enqueues
(layouts, work-group sizes, the kernel's lookup, its output's allocation): about 20 µs a launch.  On Intel's CPU
runtime the digits MLP's captured float16 step enqueued 87 launches in 1.7 ms, and the device finished its
work 0.03 ms after the last one (AMD EPYC Zen 5, 2 cores): the step was the host's planning.

Here the first replay runs the reference runner while :class:`.devices.DeviceState` reports every enqueue (a
kernel launch with its sizes and arguments, a device copy, a fill) and every allocation to a
:class:`Recorder`.  From that a :class:`LaunchListRunner` generates one Python function that enqueues the same
kernels with the same sizes and scalar arguments, in the same order, so the bits are the reference runner's.
Only the buffers change from replay to replay, each found by where it came from:

- an input's buffer: that input's buffer at this replay (a parameter, a moment, the batch), whichever array the
  caller hands (a program's inputs are read and written where they lie, as eager's kernels read them);
- a buffer the recording allocated: allocated again from the pool just before its first use and let go after its
  last one (a result's is handed back in a new array: nothing of one replay's results is written by the next);
- any other buffer (the shape tables kernels keep cached on the device): the same buffer, kept alive.

A list freezes the host's side of the kernels, so it is recorded again where that could change: a dynamic
number (a learning rate a scheduler moves; after :data:`MAX_DYNAMIC_RERECORDS` changes the reference runner
replays for good), or inputs that share buffers otherwise than at the recording (two views of one array).  It
declines, and the reference runner replays with the same bits, where a program draws random numbers (each
replay needs a new seed), where a kernel moved data to or from the host while recorded (the fused AdamW step's
path for devices without double arithmetic reads its flags on the host), or where its kernels ran on more than
one device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ampcore.capture import Program, reference_runner

from .array import CLArray
from .devices import DeviceState, cl, set_recording

__all__ = ["LaunchListRunner", "MAX_DYNAMIC_RERECORDS", "Recorder", "runner"]

MAX_DYNAMIC_RERECORDS = 2
"""Records again for a changed dynamic number (a learning rate) before replaying kernel by kernel for good."""


class Recorder:
    """What a program's kernels enqueued while it ran (see the module docstring), in order."""

    def __init__(self) -> None:
        self.ops: list[tuple[Any, ...]] = []
        self.allocated: dict[int, tuple[int, Any]] = {}  # id(buffer) -> (nbytes, buffer): kept alive, ids unique
        self.states: set[int] = set()
        self.state: DeviceState | None = None
        self.refused: str | None = None

    def _on(self, state: DeviceState) -> None:
        self.states.add(id(state))
        self.state = state

    def launch(self, state: DeviceState, kernel: Any, global_size: tuple[int, ...], local_size: Any, args: Any) -> None:
        self._on(state)
        self.ops.append(("launch", kernel, global_size, local_size, tuple(args)))

    def copy(self, state: DeviceState, dst: Any, src: Any, nbytes: int, dst_offset: int, src_offset: int) -> None:
        self._on(state)
        self.ops.append(("copy", dst, src, int(nbytes), int(dst_offset), int(src_offset)))

    def fill(self, state: DeviceState, buffer: Any, pattern: Any, nbytes: int) -> None:
        self._on(state)
        self.ops.append(("fill", buffer, pattern.copy(), int(nbytes)))

    def allocate(self, state: DeviceState, buffer: Any, nbytes: int) -> None:
        self._on(state)
        self.allocated[id(buffer)] = (int(nbytes), buffer)

    def refuse(self, reason: str) -> None:
        if self.refused is None:
            self.refused = reason


def decline_reason(program: Program) -> str | None:
    """Why ``program`` cannot replay from a list whatever its inputs, or None."""
    if not program.steps:
        return "the program has no kernels"
    if program.seeds:
        return "it draws random numbers (dropout): each replay needs a new seed, which a list would freeze"
    return None


def runner(program: Program) -> LaunchListRunner:
    """A :class:`LaunchListRunner` for ``program`` (one declined from the start where it cannot be listed)."""
    return LaunchListRunner(program)


def _sharing(inputs: Sequence[Any]) -> tuple[int, ...] | None:
    """For each input, the first input with the same buffer; None where one is not an array of this backend."""
    first: dict[int, int] = {}
    out = []
    for i, a in enumerate(inputs):
        if type(a) is not CLArray:
            return None
        out.append(first.setdefault(id(a.buffer), i))
    return tuple(out)


class LaunchListRunner:
    """``run(inputs, seeds, dynamics) -> results``: the program's enqueues replayed from a list (see the module
    docstring).

    ``replays`` counts list replays, ``recordings`` recordings, ``reference_calls`` calls the reference runner
    replayed after a decline; ``declined`` is None or why the reference replays from now on.
    """

    def __init__(self, program: Program) -> None:
        self.program = program
        self.reference = reference_runner(program)
        self.declined: str | None = decline_reason(program)
        self.replays = 0
        self.recordings = 0
        self.reference_calls = 0
        self.dynamic_rerecords = 0
        self._replay: Any = None
        self._dynamics: tuple[str, ...] = ()
        self._sharing: tuple[int, ...] | None = None

    @property
    def description(self) -> str:
        """What ``ampcore.compiler.explain`` says replays the program."""
        if self.declined is not None:
            return (
                f"the core's reference runner (kernel by kernel); the opencl backend's list declined: {self.declined}"
            )
        return "the opencl backend's prebuilt list of enqueues (recorded at the first replay)"

    def __repr__(self) -> str:
        state = f"declined: {self.declined}" if self.declined else f"{self.replays} replays"
        return f"<LaunchListRunner {len(self.program.steps)} kernels, {state}>"

    def __call__(self, inputs: Sequence[Any], seeds: Sequence[int], dynamics: Sequence[float]) -> tuple[Any, ...]:
        if self.declined is None:
            sharing = _sharing(inputs)
            if self._replay is not None and sharing == self._sharing:
                if tuple(float(v).hex() for v in dynamics) == self._dynamics:
                    self.replays += 1
                    return self._replay(inputs)  # type: ignore[no-any-return]
                self.dynamic_rerecords += 1
                if self.dynamic_rerecords > MAX_DYNAMIC_RERECORDS:
                    self._decline(
                        f"a dynamic number (a learning rate) changed more than {MAX_DYNAMIC_RERECORDS} times: a list "
                        "freezes its kernels' arguments, so every change would record again"
                    )
            if self.declined is None:
                if sharing is None:
                    self._decline("its inputs are not all opencl arrays")
                else:
                    return self._record(inputs, seeds, dynamics, sharing)
        self.reference_calls += 1
        return self.reference(inputs, seeds, dynamics)

    def _decline(self, why: str) -> None:
        self.declined = why
        self._replay = None

    def _record(
        self, inputs: Sequence[Any], seeds: Sequence[int], dynamics: Sequence[float], sharing: tuple[int, ...]
    ) -> tuple[Any, ...]:
        """Run the reference runner while recording; build the list from what it enqueued.  Its results are this
        replay's."""
        recorder = Recorder()
        set_recording(recorder)
        try:
            results = self.reference(inputs, seeds, dynamics)
        finally:
            set_recording(None)
        why = recorder.refused
        if why is None and len(recorder.states) > 1:
            why = "its kernels ran on more than one device"
        if why is None:
            replay, why = _generate(recorder, inputs, results)
        if why is not None:
            self._decline(why)
        else:
            self._replay, self._sharing = replay, sharing
            self._dynamics = tuple(float(v).hex() for v in dynamics)
            self.recordings += 1
        return results  # type: ignore[no-any-return]


def _generate(recorder: Recorder, inputs: Sequence[Any], results: Sequence[Any]) -> tuple[Any, str | None]:
    """``(replay(inputs) -> results, None)`` generated from ``recorder``'s list, or ``(None, why)``."""
    state = recorder.state
    if state is None:
        return None, "its kernels enqueued nothing on an opencl device"
    of_input: dict[int, int] = {}
    for i, a in enumerate(inputs):
        of_input.setdefault(id(a.buffer), i)
    temps: dict[int, int] = {}  # id(buffer) -> temp number
    sizes: list[int] = []
    first_use: dict[int, int] = {}
    last_use: dict[int, int] = {}
    env: dict[str, Any] = {"queue": state.queue, "lock": state.launch_lock, "allocate": state.allocate}
    env.update(enqueue_copy=cl().enqueue_copy, enqueue_fill=cl().enqueue_fill_buffer, CLArray=CLArray, state=state)

    def name_of(value: Any, at: int) -> str:
        """How the generated code names an argument: an input's buffer, a temporary, or a kept constant."""
        key = id(value)
        if key in of_input:
            return f"inputs[{of_input[key]}].buffer"
        if key in recorder.allocated:
            t = temps.setdefault(key, len(temps))
            if t == len(sizes):
                sizes.append(recorder.allocated[key][0])
            first_use.setdefault(t, at)
            last_use[t] = at
            return f"t{t}"
        if value is None or type(value) in (bool, int, str) or (type(value) is float and math.isfinite(value)):
            return repr(value)  # exact types: NumPy's scalars (a float64 is a float) repr as np.float64(...)
        constant = f"c{len(env)}"
        env[constant] = value
        return constant

    calls: list[str] = []
    for at, op in enumerate(recorder.ops):
        kind = op[0]
        if kind == "launch":
            _, kernel, global_size, local_size, args = op
            names = ", ".join(name_of(a, at) for a in args)
            calls.append(f"{name_of(kernel, at)}(queue, {global_size!r}, {local_size!r}, {names})")
        elif kind == "copy":
            _, dst, src, nbytes, dst_offset, src_offset = op
            calls.append(
                f"enqueue_copy(queue, {name_of(dst, at)}, {name_of(src, at)}, byte_count={nbytes}, "
                f"src_offset={src_offset}, dst_offset={dst_offset})"
            )
        else:
            _, buffer, pattern, nbytes = op
            calls.append(f"enqueue_fill(queue, {name_of(buffer, at)}, {name_of(pattern, at)}, 0, {nbytes})")
    end = len(recorder.ops)
    handed: list[str] = []
    for r in results:
        if type(r) is not CLArray:
            return None, f"a result is not an opencl array ({type(r).__name__})"
        whole = [i for i, a in enumerate(inputs) if a is r]
        if whole:
            handed.append(f"inputs[{whole[0]}]")
            continue
        if id(r.buffer) not in of_input and id(r.buffer) not in recorder.allocated:
            return None, "a result is neither an input's memory nor made by the program"
        buffer = name_of(r.buffer, end)
        handed.append(f"CLArray(state, {r.shape!r}, {name_of(r.dtype, end)}, {buffer})")
    lines = ["def replay(inputs):", "    with lock:"]
    for at, call in enumerate(calls):
        lines += [f"        t{t} = allocate({sizes[t]})" for t, first in first_use.items() if first == at]
        lines.append(f"        {call}")
        dead = [f"t{t}" for t, last in last_use.items() if last == at]
        if dead:
            lines.append(f"        del {', '.join(dead)}")
    lines += [f"        t{t} = allocate({sizes[t]})" for t, first in first_use.items() if first == end]
    lines.append(f"    return ({', '.join(handed)}{',' if len(handed) == 1 else ''})")
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<opencl launch list>", "exec"), env)
    replay = env["replay"]
    replay.source = source
    return replay, None
