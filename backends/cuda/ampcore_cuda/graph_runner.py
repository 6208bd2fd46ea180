"""A captured program (``ampcore.compile``) replayed as one CUDA-graph launch: this backend's ``capture_runner``.

:func:`runner` returns a :class:`GraphRunner` with the signature of the core's reference runner
(``run(inputs, seeds, dynamics) -> results``).  Its first call captures the program's kernels (the reference
runner's generated function, called on the arrays below) with :func:`.graphs.capture`; every call launches the
graph once.  A graph's addresses are fixed, so each input of the program is, at capture:

- *bound* (a tensor's state: a parameter, an optimizer moment, the scaler's counters, a ``.grad`` read before
  the call; a captured backward's saved arrays): the graph reads and writes the caller's array itself, as
  eager's kernels do, in place, and no copy is made.  A later call that hands a different array for it (state a
  step rebinds to a new array, an autocast copy of a weight saved for backward, ``load_state_dict``) captures
  again with that input *static*, once per input;
- *static* (the call's tensors: a batch, a captured backward's incoming gradient and saved activations): the
  graph reads a buffer of its own, into which each call copies the caller's array, device to device; where a
  kernel of the program writes it in place, the buffer is copied back into the caller's array after the launch.

Results: one that is an input's array (an in-place kernel's output) is handed back as the caller's array, as the
reference runner hands it, and a view of a bound input as it is (it views the caller's memory); every other
result lives in the graph's pool, rewritten by the next launch, so each call returns a fresh copy of it (a loss
or gradient kept from an earlier step must not change).

A graph freezes its kernels' host arguments, so the steps that take a value drawn anew each replay must run
outside it: a program with random seeds (dropout draws a new one per call) gets a :class:`StagedRunner` (graphs
around those steps, which run between the launches), and a :mod:`ampcore.capture.dynamic` number (a learning
rate a scheduler changes) captures again when it changes, and after :data:`MAX_DYNAMIC_RECAPTURES` recaptures
hands the program to a :class:`StagedRunner` too.  A graph also declines where
:func:`.graphs.capture` declines or the capture fails (nvmath-python missing, a kernel that reads the host), and
where a kernel would run another path in the graph than eagerly (``eager_bits=True``: a float32 or float64 GEMM,
a bfloat16 one without bfloat16 tensor cores: CuPy's matmul eagerly, cublasGemmEx in a graph).  Declined, the
reference runner replays, with the same bits; :attr:`GraphRunner.declined` says why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ampcore.capture import IN_PLACE_KERNELS, Program, draws_per_replay, reference_runner, refs_in

from . import graphs
from .array import CuArray
from .runtime import import_cupy

__all__ = ["GraphRunner", "StagedRunner", "MAX_DYNAMIC_RECAPTURES", "runner", "decline_reason"]

MAX_DYNAMIC_RECAPTURES = 2
"""Captures again for a changed dynamic number (a learning rate) before handing the program to a StagedRunner."""

_BOUND_KINDS = frozenset({"state", "grad", "saved"})


def decline_reason(program: Program) -> str | None:
    """Why ``program`` cannot be a CUDA graph whatever its inputs, or None."""
    if not program.steps:
        return "the program has no kernels"
    if program.seeds:
        return "it draws random numbers (dropout): each replay needs a new seed, which a graph would freeze"
    return None


def runner(program: Program) -> GraphRunner | StagedRunner | None:
    """A :class:`GraphRunner` for ``program``, or a :class:`StagedRunner` where some of its steps take a value
    each replay draws anew (a learning rate a schedule moves, dropout's seed); one declined from the start (the
    reference replays, and the runner says why) where the program cannot be graphed; None where this backend has
    no CUDA graphs at all (its ``capture_support`` says why)."""
    if not graphs.support()[0]:
        return None
    if program.steps and program.seeds:  # a new seed each replay: the steps that draw it run between graphs
        return StagedRunner(program)
    run = GraphRunner(program)
    why = decline_reason(program)
    if why is not None:
        run.declined = why
    return run


def _key(array: Any) -> tuple[Any, ...]:
    """Where and how an array lies: a graph bound to it reads exactly this memory."""
    data = array.data
    return (int(data.data.ptr), tuple(data.shape), tuple(data.strides), array.dtype)


def _span(array: Any) -> tuple[int, int]:
    data = array.data
    start = int(data.data.ptr)
    return start, start + int(data.nbytes)


class GraphRunner:
    """``run(inputs, seeds, dynamics) -> results`` as one CUDA-graph launch (see the module docstring).

    ``launches`` counts graph launches, ``captures`` captures, ``reference_calls`` calls the reference runner
    replayed (after a decline); ``declined`` is None or why the reference replays from now on.
    """

    def __init__(self, program: Program) -> None:
        self.program = program
        self.reference = reference_runner(program)
        self.declined: str | None = None
        self.launches = 0
        self.captures = 0
        self.reference_calls = 0
        self.dynamic_recaptures = 0
        self.staged: StagedRunner | None = None  # replays once a changing learning rate made it decline
        positions = {slot: i for i, slot in enumerate(program.inputs)}
        written: set[int] = set()
        for step in program.steps:
            if step.name in IN_PLACE_KERNELS:
                written |= {positions[s] for s in (*refs_in(step.args), *refs_in(step.kwargs)) if s in positions}
        self._written = written
        self._static_only = {i for i, slot in enumerate(program.inputs) if program.slots[slot].kind not in _BOUND_KINDS}
        self._graph: graphs.CapturedGraph[Any] | None = None
        self._bound: dict[int, tuple[Any, tuple[Any, ...]]] = {}  # position -> (array, its key)
        self._static: dict[int, Any] = {}  # position -> the graph's own buffer
        self._copy_back: list[int] = []
        self._results: list[tuple[str, Any]] = []  # ("input", position), ("view", array) or ("graph", array)
        self._dynamics: tuple[str, ...] = ()

    @property
    def description(self) -> str:
        """What ``ampcore.compiler.explain`` says replays the program."""
        if self.staged is not None:
            return f"{self.staged.description} (one graph declined: {self.declined})"
        if self.declined is not None:
            return f"the core's reference runner (kernel by kernel); the cuda backend's graph declined: {self.declined}"
        return "the cuda backend's CUDA graph: one launch per replay (captured at the first replay)"

    def __repr__(self) -> str:
        state = f"declined: {self.declined}" if self.declined else f"{self.launches} launches"
        return f"<GraphRunner {len(self.program.steps)} kernels, {state}>"

    # ------------------------------------------------------------------ replay
    def __call__(self, inputs: Sequence[Any], seeds: Sequence[int], dynamics: Sequence[float]) -> tuple[Any, ...]:
        if self.declined is None:
            wanted = self._stale(inputs, dynamics)
            if wanted is not None:
                self._capture(inputs, dynamics, wanted)
        if self.staged is not None:
            return self.staged(inputs, seeds, dynamics)
        if self.declined is not None:
            self.reference_calls += 1
            return self.reference(inputs, seeds, dynamics)
        cupy = import_cupy()
        graph = self._graph
        assert graph is not None
        with cupy.cuda.Device(graph.device):
            for i, buffer in self._static.items():
                cupy.copyto(buffer.data, inputs[i].data)
            graph.replay()
            self.launches += 1
            for i in self._copy_back:
                cupy.copyto(inputs[i].data, self._static[i].data)
            return tuple(
                inputs[where]
                if kind == "input"
                else where
                if kind == "view"
                else CuArray(where.data.copy(order="K"), where.dtype)
                for kind, where in self._results
            )

    def _stale(self, inputs: Sequence[Any], dynamics: Sequence[float]) -> set[int] | None:
        """None where the graph can replay these inputs, else the positions to make static at the recapture."""
        if self._graph is None:
            return set()
        moved = {i for i, (array, key) in self._bound.items() if inputs[i] is not array and _key(inputs[i]) != key}
        if moved:
            return moved
        for i, buffer in self._static.items():
            a = inputs[i]
            if a.dtype != buffer.dtype or a.shape != buffer.shape:
                return set()  # the guards keep shapes; a mismatch is a bug, so capture afresh rather than misread
        if tuple(float(v).hex() for v in dynamics) != self._dynamics:
            self.dynamic_recaptures += 1
            if self.dynamic_recaptures > MAX_DYNAMIC_RECAPTURES:
                self._decline(
                    f"a dynamic number (a learning rate) changed more than {MAX_DYNAMIC_RECAPTURES} times: a graph "
                    "freezes its kernels' arguments, so the steps that read it now run between graphs"
                )
                self.staged = StagedRunner(self.program)
                return None
            return set()
        return None

    def _decline(self, why: str) -> None:
        self.declined = why
        self._graph = None
        self._bound, self._static, self._results, self._copy_back = {}, {}, [], []

    # ------------------------------------------------------------------ capture
    def _capture(self, inputs: Sequence[Any], dynamics: Sequence[float], make_static: set[int]) -> None:
        self._static_only |= make_static
        self._graph = None
        cupy = import_cupy()
        try:
            devices = {a.device_index for a in inputs if isinstance(a, CuArray)}
            if len(devices) > 1 or any(not isinstance(a, CuArray) for a in inputs):
                self._decline("its inputs are not all cuda arrays on one device")
                return
            device = devices.pop() if devices else 0
            bound: dict[int, tuple[Any, tuple[Any, ...]]] = {}
            static: dict[int, Any] = {}
            with cupy.cuda.Device(device):
                for i, a in enumerate(inputs):
                    if i in self._static_only:
                        if not a.data.flags.c_contiguous:
                            self._decline(f"input {i} is not C-contiguous (a graph's own buffer would be)")
                            return
                        buffer = CuArray(cupy.empty(a.data.shape, dtype=a.data.dtype), a.dtype)
                        cupy.copyto(buffer.data, a.data)
                        static[i] = buffer
                    else:
                        bound[i] = (a, _key(a))
                # The warm-up runs the program eagerly, on copies of the caller's arrays: a kernel may write its
                # inputs in place (those of IN_PLACE_KERNELS, and update_scale's, which the contract allows).
                scratch = [CuArray(a.data.copy(), a.dtype) if i in bound else static[i] for i, a in enumerate(inputs)]
            real = [static[i] if i in static else a for i, a in enumerate(inputs)]
            frozen = [float(v) for v in dynamics]
            calls = [scratch, real]

            def body() -> tuple[Any, ...]:
                arrays = calls.pop(0) if len(calls) > 1 else calls[0]
                return self.reference(arrays, [], frozen)

            graph = graphs.capture(body, device=device, warmup=1, eager_bits=True)
        except Exception as exc:  # noqa: BLE001 - any failure to capture replays kernel by kernel, with the reason
            reason = exc.reason if isinstance(exc, graphs.CaptureDeclinedError) else f"{type(exc).__name__}: {exc}"
            self._decline(f"the capture failed: {reason}")
            return
        results = self._place(graph.outputs, real, set(bound))
        if results is None:
            return
        self._graph, self._bound, self._static, self._results = graph, bound, static, results
        # A static input written in place goes back to the caller's array: one an in-place kernel names, or one
        # handed back as a result (an in-place output, update_scale's scale).
        handed = {where for kind, where in results if kind == "input"}
        self._copy_back = sorted(i for i in static if i in self._written or i in handed)
        self._dynamics = tuple(float(v).hex() for v in dynamics)
        self.captures += 1

    def _place(self, outputs: tuple[Any, ...], real: list[Any], bound: set[int]) -> list[tuple[str, Any]] | None:
        """Each result as ``("input", position)`` (an input's own array), ``("view", array)`` (a view of a bound
        input: the caller's own memory, handed back as it is) or ``("graph", array)`` (copied out at each call);
        None (declined) where a result is part of a static input or two results share memory."""
        spans = [_span(a) for a in real]
        placed: list[tuple[str, Any]] = []
        seen: list[tuple[int, int]] = []
        for r in outputs:
            if not isinstance(r, CuArray):
                self._decline(f"a result is not a cuda array ({type(r).__name__})")
                return None
            whole = [i for i, a in enumerate(real) if a is r or _key(a) == _key(r)]
            if whole:
                placed.append(("input", whole[0]))
                continue
            lo, hi = _span(r)
            inside = [i for i, (a, b) in enumerate(spans) if a <= lo and hi <= b]
            if hi > lo and inside and all(i in bound for i in inside):
                placed.append(("view", r))
                continue
            if hi > lo and any(lo < b and a < hi for a, b in (*spans, *seen)):
                self._decline("a result is a view of an input or of another result (a graph's buffers are fixed)")
                return None
            seen.append((lo, hi))
            placed.append(("graph", r))
        return placed


class StagedRunner:
    """A program whose steps take values drawn anew each replay (:func:`ampcore.capture.draws_per_replay`: a
    learning rate a schedule moves, dropout's seed), which a graph would freeze: the runs of steps between them
    are CUDA graphs (a :class:`GraphRunner` each, on the part of the program they make), and each such step is
    called afresh between the launches, as the core's runner calls it, on this replay's value.  Slots pass from
    stage to stage as arrays; a graph reads what an earlier stage made from its own buffer, copied in device to
    device (a static input), as it reads a call's tensors.  The bits are the reference runner's.

    ``launches`` counts graph launches, ``captures`` captures, ``reference_calls`` replays the core's runner ran
    (a declined graph's), over all the graphs; ``declined`` is None or why every graph declined.
    """

    def __init__(self, program: Program) -> None:
        self.program = program
        self.stages: list[tuple[str, Any, list[int], list[int]]] = []  # (kind, runner, input slots, result slots)
        later_reads: list[set[int]] = []
        reads_after: set[int] = set(program.results)
        for step in reversed(program.steps):
            later_reads.append(set(reads_after))
            reads_after |= set(refs_in(step.args)) | set(refs_in(step.kwargs))
        later_reads.reverse()  # later_reads[i]: the slots read after step i (or handed back)
        run: list[int] = []
        for i, step in enumerate(program.steps):
            if draws_per_replay(step):
                self._add_graph(run, later_reads[i - 1] if i else set())
                run = []
                self._add(i, "live", later_reads[i])
            else:
                run.append(i)
        self._add_graph(run, set(program.results))

    def _sub(self, indices: list[int], needed_after: set[int]) -> tuple[Program, list[int], list[int]]:
        steps = [self.program.steps[i] for i in indices]
        made: set[int] = set()
        inputs: list[int] = []
        for step in steps:
            for slot in (*refs_in(step.args), *refs_in(step.kwargs)):
                if slot not in made and slot not in inputs:
                    inputs.append(slot)
            made |= set(refs_in(step.outs))
        results = [slot for slot in sorted(made) if slot in needed_after]
        # seeds and dynamics stay: a step called afresh reads them by index from the whole program's lists
        return dataclasses.replace(self.program, steps=steps, inputs=inputs, results=results), inputs, results

    def _add_graph(self, indices: list[int], needed_after: set[int]) -> None:
        if indices:
            sub, inputs, results = self._sub(indices, needed_after)
            graph = GraphRunner(dataclasses.replace(sub, seeds=[], dynamics=[]))
            self.stages.append(("graph", graph, inputs, results))

    def _add(self, i: int, kind: str, needed_after: set[int]) -> None:
        sub, inputs, results = self._sub([i], needed_after | set(refs_in(self.program.steps[i].outs)))
        self.stages.append((kind, reference_runner(sub), inputs, results))

    @property
    def _graphs(self) -> list[GraphRunner]:
        return [run for kind, run, _, _ in self.stages if kind == "graph"]

    @property
    def launches(self) -> int:
        return sum(g.launches for g in self._graphs)

    @property
    def captures(self) -> int:
        return sum(g.captures for g in self._graphs)

    @property
    def reference_calls(self) -> int:
        return sum(g.reference_calls for g in self._graphs)

    @property
    def declined(self) -> str | None:
        graphs_ = self._graphs
        reasons = [g.declined for g in graphs_]
        if graphs_ and all(r is not None for r in reasons):
            return "; ".join(dict.fromkeys(r for r in reasons if r is not None))
        return None

    @property
    def description(self) -> str:
        """What ``ampcore.compiler.explain`` says replays the program."""
        live = [self.program.steps[i].name for i, step in enumerate(self.program.steps) if draws_per_replay(step)]
        graphs_ = self._graphs
        declined = [g.declined for g in graphs_ if g.declined is not None]
        text = (
            f"the cuda backend's CUDA graphs: {len(graphs_)} launches per replay, around the step(s) that take a value "
            f"drawn anew each replay ({', '.join(live)}), called between them"
        )
        return text + (f"; {len(declined)} declined: {declined[0]}" if declined else "")

    def __repr__(self) -> str:
        return f"<StagedRunner {len(self.program.steps)} kernels, {len(self._graphs)} graphs>"

    def __call__(self, inputs: Sequence[Any], seeds: Sequence[int], dynamics: Sequence[float]) -> tuple[Any, ...]:
        values = dict(zip(self.program.inputs, inputs))
        for kind, run, slots, results in self.stages:
            args = [values[slot] for slot in slots]
            out = run(args, seeds, dynamics) if kind == "live" else run(args, [], [])
            values.update(zip(results, out))
        return tuple(values[slot] for slot in self.program.results)


_FUSED = (
    "elementwise chains fused into one CUDA kernel each (mixed dtypes, broadcast operands, eager's 16-bit roundings "
    "kept, --ftz=false)"
)


def support() -> str:
    """What ``ampcore info`` says this backend's captured steps do."""
    ok, how = graphs.support()
    if not ok:
        return f"kernels called back to back (the core's runner): no CUDA graphs here, {how}; {_FUSED}"
    return (
        f"each replay one CUDA-graph launch ({how}); programs that draw random numbers (dropout) or whose learning "
        f"rate changes more than {MAX_DYNAMIC_RECAPTURES} times replay as graphs around the steps that read those "
        f"values; those that run a GEMM through CuPy's matmul eagerly (float32, float64) replay kernel by kernel "
        f"(the core's runner); {_FUSED}"
    )
