"""A captured program (``ampcore.compile``) replayed as a prebuilt list of enqueues: this backend's
``capture_runner``.

The core's reference runner calls each kernel function, and each plans its launch in Python before it enqueues
(layouts, work-group sizes, the kernel's lookup, its output's allocation): about 20 µs a launch.  On Intel's CPU
runtime the digits MLP's captured float16 step enqueued 87 launches in 1.74 ms, and the device finished its
work 0.03 ms after the last one (AMD EPYC Zen 5, 2 cores): the step was the host's planning.

Here the first replay runs the reference runner while :class:`.devices.DeviceState` reports every enqueue (a
kernel launch with its sizes and arguments, a device copy, a fill) and every allocation to a
:class:`Recorder`, step by step.  From that a :class:`LaunchListRunner` generates one Python function that
enqueues the same kernels with the same sizes and scalar arguments, in the same order, so the bits are the
reference runner's.  Only the buffers change from replay to replay, each found by where it came from:

- an input's buffer: that input's buffer at this replay (a parameter, a moment, the batch), whichever array the
  caller hands (a program's inputs are read and written where they lie, as eager's kernels read them);
- a buffer the recording allocated: planned once (:func:`_plan`), one buffer for the intermediates of one size
  whose uses do not overlap; a result's is allocated at each replay and handed back in a new array, so nothing
  of one replay's results is written by the next;
- any other buffer (the shape tables kernels keep cached on the device): the same buffer, kept alive.

A step that takes a value drawn anew at each replay (:func:`ampcore.capture.draws_per_replay`: a learning rate
a scheduler moves, dropout's seed) is not listed: the function calls its kernel as the reference runner does,
on this replay's value, and later enqueues read the arrays it returns.  The list is recorded again where inputs
share buffers otherwise than at the recording (two views of one array).  It declines, and the reference runner
replays with the same bits, where a kernel moved data to or from the host while recorded (the fused AdamW step's
path for devices without double arithmetic reads its flags on the host) or its kernels ran on more than one
device.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ampcore.capture import Program, Ref, draws_per_replay, reference_runner, refs_in

from .array import CLArray
from .devices import DeviceState, cl, set_recording

__all__ = ["LaunchListRunner", "Recorder", "runner"]


class Recorder:
    """What a program's kernels enqueued and allocated while it ran (see the module docstring), in order, each
    with the step that did it, and what each step returned."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.ops: list[tuple[Any, ...]] = []  # (step, kind, ...)
        self.allocated: dict[int, tuple[int, Any, int | None]] = {}  # id(buffer) -> (nbytes, buffer, step)
        self.outputs: dict[int, Any] = {}  # step -> what its kernel returned
        self.states: set[int] = set()
        self.state: DeviceState | None = None
        self.refused: str | None = None

    def _on(self, state: DeviceState) -> None:
        self.states.add(id(state))
        self.state = state

    def launch(self, state: DeviceState, kernel: Any, global_size: tuple[int, ...], local_size: Any, args: Any) -> None:
        self._on(state)
        self.ops.append((self.step, "launch", kernel, global_size, local_size, tuple(args)))

    def copy(self, state: DeviceState, dst: Any, src: Any, nbytes: int, dst_offset: int, src_offset: int) -> None:
        self._on(state)
        self.ops.append((self.step, "copy", dst, src, int(nbytes), int(dst_offset), int(src_offset)))

    def fill(self, state: DeviceState, buffer: Any, pattern: Any, nbytes: int) -> None:
        self._on(state)
        self.ops.append((self.step, "fill", buffer, pattern.copy(), int(nbytes)))

    def allocate(self, state: DeviceState, buffer: Any, nbytes: int) -> None:
        self._on(state)
        self.allocated[id(buffer)] = (int(nbytes), buffer, self.step)  # kept alive: ids stay unique

    def refuse(self, reason: str) -> None:
        if self.refused is None:
            self.refused = reason

    def wrap(self, i: int, kernel: Callable[..., Any]) -> Callable[..., Any]:
        """Step ``i``'s kernel, telling this recorder which step runs and what it returned."""

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.step = i
            try:
                out = self.outputs[i] = kernel(*args, **kwargs)
            finally:
                self.step = None
            return out

        return recorded


def decline_reason(program: Program) -> str | None:
    """Why ``program`` cannot replay from a list whatever its inputs, or None."""
    if not program.steps:
        return "the program has no kernels"
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
        self._replay: Any = None
        self._sharing: tuple[int, ...] | None = None

    @property
    def description(self) -> str:
        """What ``ampcore.compiler.explain`` says replays the program."""
        if self.declined is not None:
            why = self.declined
            return f"the core's reference runner (kernel by kernel); the opencl backend's list declined: {why}"
        return "the opencl backend's prebuilt list of enqueues (recorded at the first replay)"

    def __repr__(self) -> str:
        state = f"declined: {self.declined}" if self.declined else f"{self.replays} replays"
        return f"<LaunchListRunner {len(self.program.steps)} kernels, {state}>"

    def __call__(self, inputs: Sequence[Any], seeds: Sequence[int], dynamics: Sequence[float]) -> tuple[Any, ...]:
        if self.declined is None:
            sharing = _sharing(inputs)
            if self._replay is not None and sharing == self._sharing:
                self.replays += 1
                return self._replay(inputs, seeds, dynamics)  # type: ignore[no-any-return]
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
        run = reference_runner(self.program, wrap=recorder.wrap)
        set_recording(recorder)
        try:
            results = run(inputs, seeds, dynamics)
        finally:
            set_recording(None)
        why = recorder.refused
        if why is None and len(recorder.states) > 1:
            why = "its kernels ran on more than one device"
        if why is None:
            replay, why = _generate(self.program, recorder, inputs, results)
        if why is not None:
            self._decline(why)
        else:
            self._replay, self._sharing = replay, sharing
            self.recordings += 1
        return results  # type: ignore[no-any-return]


def _outputs(template: Any, value: Any) -> Iterator[tuple[int, str, Any]]:
    """``(slot, path, array)`` for each slot of a step's output template, ``path`` indexing the step's result."""
    if isinstance(template, Ref):
        yield template.slot, "", value
    elif type(template) in (list, tuple):
        for k, (t, v) in enumerate(zip(template, value)):
            yield from ((slot, f"[{k}]{path}", a) for slot, path, a in _outputs(t, v))


class _Names:
    """How the generated function names each buffer and value (see :func:`_generate`), with the temporaries'
    sizes and their first and last uses."""

    def __init__(self, recorder: Recorder, inputs: Sequence[Any], env: dict[str, Any], live: set[int]) -> None:
        self.recorder, self.env, self.live = recorder, env, live
        self.known: dict[int, str] = {}
        for i, a in enumerate(inputs):
            self.known.setdefault(id(a.buffer), f"inputs[{i}].buffer")
        self.temps: dict[int, int] = {}
        self.sizes: list[int] = []
        self.first_use: dict[int, int] = {}
        self.last_use: dict[int, int] = {}
        self.bad: str | None = None
        self.constants: dict[int, str] = {}

    def __call__(self, value: Any, at: int) -> str:
        key = id(value)
        if key in self.known:
            return self.known[key]
        if key in self.recorder.allocated:
            nbytes, _, step = self.recorder.allocated[key]
            if step is None or step in self.live:
                self.bad = "an enqueue reads a buffer a step called afresh made but did not return"
                return "None"
            t = self.temps.setdefault(key, len(self.temps))
            if t == len(self.sizes):
                self.sizes.append(nbytes)
            self.first_use.setdefault(t, at)
            self.last_use[t] = at
            return f"t{t}"
        if value is None or type(value) in (bool, int, str) or (type(value) is float and math.isfinite(value)):
            return repr(value)  # exact types: NumPy's scalars (a float64 is a float) repr as np.float64(...)
        constant = self.constants.get(key)
        if constant is None:  # kept in env, so its id names it for as long as the function lives
            constant = self.constants[key] = f"c{len(self.env)}"
            self.env[constant] = value
        return constant


def _generate(
    program: Program, recorder: Recorder, inputs: Sequence[Any], results: Sequence[Any]
) -> tuple[Any, str | None]:
    """``(replay(inputs, seeds, dynamics) -> results, None)`` generated from ``recorder``'s list, or
    ``(None, why)``."""
    state = recorder.state
    if state is None:
        return None, "its kernels enqueued nothing on an opencl device"
    if any(op[0] is None for op in recorder.ops):
        return None, "something enqueued outside the program's kernels"
    env: dict[str, Any] = {"queue": state.queue, "lock": state.launch_lock, "allocate": state.allocate}
    env.update(enqueue_copy=cl().enqueue_copy, enqueue_fill=cl().enqueue_fill_buffer, CLArray=CLArray, state=state)
    name = _Names(recorder, inputs, env, {i for i, step in enumerate(program.steps) if draws_per_replay(step)})
    slot_arrays = dict(zip(program.inputs, inputs))
    for i, out in recorder.outputs.items():
        slot_arrays.update((slot, a) for slot, _, a in _outputs(program.steps[i].outs, out))
    position = {slot: j for j, slot in enumerate(program.inputs)}
    ops_of: dict[int, list[tuple[Any, ...]]] = {}
    for op in recorder.ops:
        ops_of.setdefault(op[0], []).append(op)

    def array(slot: int, at: int) -> str:
        """A slot's array at this replay: an input, a step's returned array, or a CLArray over a listed buffer."""
        if slot in position:
            return f"inputs[{position[slot]}]"
        a = slot_arrays.get(slot)
        if type(a) is not CLArray:
            name.bad = f"a step's result is not an opencl array ({type(a).__name__})"
            return "None"
        if slot in live_slots:
            return f"s{slot}"
        return f"CLArray(state, {a.shape!r}, {name(a.dtype, at)}, {name(a.buffer, at)})"

    live_slots: set[int] = set()
    calls: list[str] = []
    unlocked: set[int] = set()  # calls that run their kernels' own way, taking the launch lock themselves
    for i, step in enumerate(program.steps):
        if i in name.live:  # called afresh: its kernel on this replay's seed or dynamic number
            at = len(calls)
            slots = sorted(set(refs_in(step.args)) | set(refs_in(step.kwargs)))
            outs = list(_outputs(step.outs, recorder.outputs.get(i)))
            sub = dataclasses.replace(program, steps=[step], inputs=slots, results=[slot for slot, _, _ in outs])
            env[f"live{i}"] = reference_runner(sub)
            arrays = ", ".join(array(slot, at) for slot in slots)
            lines = [f"o = live{i}([{arrays}], seeds, dyn)"]
            for k, (slot, _, a) in enumerate(outs):
                lines.append(f"s{slot} = o[{k}]")
                live_slots.add(slot)
                if type(a) is CLArray and id(a.buffer) not in name.known:
                    name.known[id(a.buffer)] = f"s{slot}.buffer"
            unlocked.add(len(calls))
            calls.append("; ".join(lines))
            continue
        for op in ops_of.get(i, []):
            at, kind = len(calls), op[1]
            if kind == "launch":
                _, _, kernel, global_size, local_size, args = op
                names = ", ".join(name(a, at) for a in args)
                calls.append(f"{name(kernel, at)}(queue, {global_size!r}, {local_size!r}, {names})")
            elif kind == "copy":
                _, _, dst, src, nbytes, dst_offset, src_offset = op
                calls.append(
                    f"enqueue_copy(queue, {name(dst, at)}, {name(src, at)}, byte_count={nbytes}, "
                    f"src_offset={src_offset}, dst_offset={dst_offset})"
                )
            else:
                _, _, buffer, pattern, nbytes = op
                calls.append(f"enqueue_fill(queue, {name(buffer, at)}, {name(pattern, at)}, 0, {nbytes})")
    end = len(calls)
    handed: list[str] = []
    for slot, r in zip(program.results, results):
        whole = [i for i, a in enumerate(inputs) if a is r]
        if whole:
            handed.append(f"inputs[{whole[0]}]")
        elif slot in live_slots and r is slot_arrays.get(slot):
            handed.append(f"s{slot}")
        elif type(r) is not CLArray:
            return None, f"a result is not an opencl array ({type(r).__name__})"
        elif id(r.buffer) not in name.known and id(r.buffer) not in recorder.allocated:
            return None, "a result is neither an input's memory nor made by the program"
        else:
            handed.append(f"CLArray(state, {r.shape!r}, {name(r.dtype, end)}, {name(r.buffer, end)})")
    if name.bad is not None:
        return None, name.bad
    planned = _plan(name, calls, unlocked, end, state)
    env.update(planned)
    lines = ["def replay(inputs, seeds, dyn):"]
    for at, call in enumerate(calls):
        # listed enqueues under the launch lock (kernel objects hold their arguments until enqueued); a step
        # called afresh takes it in its own kernels
        indent = "    " if at in unlocked else "        "
        if at not in unlocked and (at == 0 or at - 1 in unlocked):
            lines.append("    with lock:")
        lines += [
            f"{indent}t{t} = p{t}" if f"p{t}" in planned else f"{indent}t{t} = allocate({name.sizes[t]})"
            for t, first in name.first_use.items()
            if first == at
        ]
        lines.append(f"{indent}{call}")
        dead = [f"t{t}" for t, last in name.last_use.items() if last == at]
        if dead:
            lines.append(f"{indent}del {', '.join(dead)}")
    lines += [f"    t{t} = allocate({name.sizes[t]})" for t, first in name.first_use.items() if first == end]
    lines.append(f"    return ({', '.join(handed)}{',' if len(handed) == 1 else ''})")
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<opencl launch list>", "exec"), env)
    replay = env["replay"]
    replay.source = source
    return replay, None


def _plan(name: _Names, calls: Sequence[str], unlocked: set[int], end: int, state: DeviceState) -> dict[str, Any]:
    """Buffers for the temporaries, made once: ``{"p<t>": buffer}``, one buffer shared by temporaries of one size
    whose uses do not overlap (the queue runs in order, so a later kernel may reuse what an earlier one is done
    with).  Not planned, so allocated at each replay: a result's (handed back, so each replay's must be its own)
    and any a step called afresh reads (it may return a view of it)."""
    read_live = {int(t) for at in unlocked for t in re.findall(r"\bt(\d+)\b", calls[at])}
    free: dict[int, list[Any]] = {}
    planned: dict[str, Any] = {}
    ends: dict[int, list[int]] = {}
    for t, last in name.last_use.items():
        ends.setdefault(last, []).append(t)
    starts: dict[int, list[int]] = {}
    for t, first in name.first_use.items():
        if name.last_use[t] < end and t not in read_live:
            starts.setdefault(first, []).append(t)
    for at in range(end):
        for t in starts.get(at, []):
            size = name.sizes[t]
            pile = free.get(size)
            planned[f"p{t}"] = pile.pop() if pile else state.allocate(size)
        for t in ends.get(at, []):
            if f"p{t}" in planned:
                free.setdefault(name.sizes[t], []).append(planned[f"p{t}"])
    return planned
