"""A compiled callable: guards, the cache of recorded programs, recording, replay and falling back to eager.

The life of a compiled function (as tinygrad's TinyJit's): its first call runs
eagerly as a *warm-up*, with the capturable paths on (optimizers make their
device step counters, the scaler its device counters: state a recording then
reads rather than makes); the next call with new guards is *recorded* (it runs
eagerly too, see :mod:`.record`); later calls whose guards match *replay* the
program, skipping the op layer entirely.  A call whose recording hit a break
(a host read, say) runs eagerly from then on for those guards, and
``fullgraph=True`` makes the break an error.

Guards (what must match for a replay): each input tensor's shape, dtype, device
and ``requires_grad``, each other argument (numbers and strings by value,
objects by identity), grad mode, the autocast state of this thread and the
cast policies' generation, and for a module its training flag and its
parameters' identities (:func:`ampcore.nn.module.structure_version`); then,
per replay, the state the program reads: each tensor's dtype, shape and
``requires_grad``, and whether each ``.grad`` it looked at was None.  A failed
guard records again (a recompile), counted; past ``cache_size_limit`` programs
the function warns, naming the guard, and runs eagerly for new guards.
"""

from __future__ import annotations

import types
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import syncs
from ..amp.state import thread_state
from ..autograd import grad_mode
from ..dtypes import DType
from ..hooks import CAPTURE, STATE
from ..plugins import registry
from ..policy import resolve as policy_resolve
from ..tensor_base import TENSOR_CLASS, TensorBase
from .backward import BackwardProgram, node_for, record_backward
from .fusion import fuse
from .program import Program, build_program, refs_in, runner_for
from .record import Break, Recorder, Recording, Ref

__all__ = ["CompiledFunction", "CaptureConfig", "Entry", "config", "guard_difference", "Stats"]


@dataclass
class CaptureConfig:
    """Process-wide settings (``ampcore.compiler.config``): ``cache_size_limit`` programs per compiled
    function (torch's default, 8) before it warns and runs new guards eagerly."""

    cache_size_limit: int = 8


config = CaptureConfig()


@dataclass
class Stats:
    """What a compiled function did: calls replayed, recorded (``recompiles`` of them after the first), run
    eagerly (warm-up, breaks, fallbacks), and the breaks found."""

    replays: int = 0
    recordings: int = 0
    eager_calls: int = 0
    recompiles: int = 0
    breaks: list[Break] = field(default_factory=list)
    last_guard_failure: str = ""


_SIMPLE = (int, float, str, bool, type(None), DType)


def _leaves(value: Any, out: list[Any]) -> None:
    t = type(value)
    if t in (list, tuple) or (isinstance(value, tuple) and hasattr(value, "_fields")):
        for v in value:
            _leaves(v, out)
    elif t is dict:
        for k in value:
            out.append(k)
            _leaves(value[k], out)
    else:
        out.append(value)


def _leaf_key(x: Any) -> Any:
    if isinstance(x, TensorBase):
        return ("T", x.shape, x.dtype, x.device, x.requires_grad)
    if isinstance(x, _SIMPLE):
        return (type(x), x)
    if isinstance(x, np.generic):  # a NumPy scalar: by value, as a Python number
        return (type(x), x.item())
    if isinstance(x, slice):
        return ("slice", x.start, x.stop, x.step)
    return ("id", id(x))


def _autocast_key() -> tuple[Any, ...]:
    frames = thread_state.frames
    regions = tuple(
        (name, r.enabled, r.dtype, id(r.policy), r.cache_enabled, r.fallback_ops)
        for name, r in sorted(frames.regions.items())
    )
    return (regions, frames.depth)


def _traced() -> bool:
    """Whether an autocast trace or overflow detection is on: both watch every op, so the call runs eagerly."""
    return bool(STATE.watching) or any(r.trace is not None for r in thread_state.frames.regions.values())


def _describe_leaf(key: Any) -> str:
    if key[0] == "T":
        return f"a tensor of shape {key[1]}, {key[2].name}, on {key[3]}, requires_grad={key[4]}"
    if key[0] == "id":
        return "another object"
    return repr(key[1])


def guard_difference(old: tuple[Any, ...], new: tuple[Any, ...]) -> str:
    """Which guard differs between two keys, in words (for the recompile warning)."""
    (o_leaves, o_grad, o_auto, o_gen, o_mod), (n_leaves, n_grad, n_auto, n_gen, n_mod) = old, new
    if len(o_leaves) != len(n_leaves):
        return f"the call has {len(n_leaves)} argument leaves instead of {len(o_leaves)}"
    for i, (a, b) in enumerate(zip(o_leaves, n_leaves)):
        if a != b:
            return f"argument leaf {i} is {_describe_leaf(b)}, was {_describe_leaf(a)}"
    if o_grad != n_grad:
        return f"grad mode is {'on' if n_grad else 'off'}, was {'on' if o_grad else 'off'}"
    if o_auto != n_auto:
        return "the autocast state differs (region, dtype or policy)"
    if o_gen != n_gen:
        return "the cast policies or the registered ops changed"
    if o_mod != n_mod:
        return "the module's training flag or its parameters changed"
    return "the state the program reads changed"


@dataclass
class _Write:
    """What a replay writes after its kernels: ``target.<attr>`` (``target`` a tensor, or ``("arg", i)`` for the
    call's ``i``-th input tensor) set to result ``index`` (``-1``: the ``constant`` object; ``-2``: None), with
    the dtype, shape (``_data``) or ``requires_grad`` (a new ``.grad``) the recording left."""

    index: int
    target: Any
    attr: str
    dtype: Any = None
    shape: Any = None
    constant: Any = None
    requires_grad: bool = False


@dataclass
class _Source:
    kind: int  # 0: input tensor i, 1: state tensor's array, 2: a tensor's .grad's array
    obj: Any
    shape: tuple[int, ...] | None
    dtype: Any
    requires_grad: bool = False


class Entry:
    """One recorded program and what its replay needs: where each input comes from, what it writes, what it
    returns, and the backward programs of its differentiable outputs."""

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self.breaks: list[Break] = []
        self.program: Program | None = None
        self.run: Callable[..., tuple[Any, ...]] | None = None
        self.sources: list[_Source] = []
        self.grad_guards: list[tuple[Any, bool]] = []
        self.writes: list[_Write] = []
        self.output: Any = None
        self.checks: list[tuple[int, Callable[..., Any], list[tuple[int, Any]], Any, Any]] = []
        self.kept: list[tuple[Callable[..., None], list[int], list[tuple[Any, Any]] | None]] = []
        self.backward: list[tuple[BackwardProgram, list[int]]] = []
        self.uploads = 0
        # The recording's own outputs and arrays, kept until _reroute gives its outputs their captured backward.
        self.recorded: list[Any] = []
        self.reroute: list[tuple[Any, int]] = []

    @property
    def eager(self) -> bool:
        return self.program is None

    # ------------------------------------------------------------------ replay
    def state_guard(self) -> str | None:
        """None when the state the program reads is as recorded, else what differs."""
        for src in self.sources:
            if src.kind == 0:
                continue
            t = src.obj if src.kind == 1 else src.obj.grad
            if t is None:
                return "a parameter's .grad is None, but the program reads it"
            if (
                t.shape != src.shape
                or t.dtype is not src.dtype
                or (src.kind == 1 and t.requires_grad != src.requires_grad)
            ):
                return f"a tensor the program reads is now {t.dtype.name} {t.shape}, was {src.dtype.name} {src.shape}"
        for t, was_none in self.grad_guards:
            if (t.grad is None) != was_none:
                return "a parameter's .grad is " + ("set" if was_none else "None") + ", it was the other at recording"
        return None

    def replay(self, tensors: Sequence[Any]) -> Any:
        program = self.program
        assert program is not None and self.run is not None
        inputs = []
        for src in self.sources:
            if src.kind == 0:
                inputs.append(tensors[src.obj]._data)
            elif src.kind == 1:
                inputs.append(src.obj._data)
            else:
                inputs.append(src.obj.grad._data)
        seeds = [g.next_seed() for g in program.seeds]
        dyn = [g() for g in program.dynamics]
        results = self.run(inputs, seeds, dyn)
        wrap = TENSOR_CLASS[0]._wrap
        for w in self.writes:
            t = tensors[w.target[1]] if isinstance(w.target, tuple) else w.target
            value = results[w.index] if w.index >= 0 else w.constant
            if w.attr == "_data":
                t._data, t.dtype, t.shape = value, w.dtype, w.shape
            elif w.index >= 0:
                t.grad = wrap(value, t.device, t._backend, None, w.requires_grad)
            else:
                t.grad = value  # None (-2) or a tensor made before the call (-1)
        for index, error, cells, device, backend in self.checks:
            flag = wrap(results[index], device, backend)
            syncs.requeue_check(flag, _rebind(error, cells, results, tensors))
        for keep, indices, places in self.kept:
            if places is None:  # keep_device_values(..., arrays=True)
                keep(*[results[i] for i in indices])
            else:
                keep(*[wrap(results[i], device, backend) for i, (device, backend) in zip(indices, places)])
        return self._outputs(self.output, results, tensors)

    def _outputs(self, template: Any, results: tuple[Any, ...], tensors: Sequence[Any]) -> Any:
        kind = template[0]
        if kind == "new":
            _, index, device, backend, requires_grad, bw = template
            t = TENSOR_CLASS[0]._wrap(results[index], device, backend)
            if bw is not None:
                bp, saved_idx = self.backward[bw]
                t.grad_fn = node_for(bp, [results[i] for i in saved_idx], tensors, backend)
                t.requires_grad = True
            return t
        if kind == "arg":
            return tensors[template[1]]
        if kind == "const":
            return template[1]
        if kind == "seq":
            items = [self._outputs(t, results, tensors) for t in template[2]]
            cls = template[1]
            return cls(*items) if hasattr(cls, "_fields") else cls(items)
        if kind == "dict":
            return {k: self._outputs(v, results, tensors) for k, v in template[1]}
        raise AssertionError(kind)


def _rebind(
    error: Callable[..., Any], cells: list[tuple[int, Any]], results: tuple[Any, ...], tensors: Sequence[Any]
) -> Any:
    """``error`` (a check's message builder) with the tensors its closure holds replaced by this replay's."""
    if not cells or error.__closure__ is None:
        return error
    new = list(error.__closure__)
    wrap = TENSOR_CLASS[0]._wrap
    for i, how in cells:
        old = error.__closure__[i].cell_contents
        if how[0] == "arg":
            value = tensors[how[1]]
        else:
            value = wrap(results[how[1]], old.device, old._backend)
        new[i] = types.CellType(value)
    return types.FunctionType(error.__code__, error.__globals__, error.__name__, error.__defaults__, tuple(new))


class CompiledFunction:
    """``fn`` compiled (see the module docstring).  ``module``: the module whose forward this is (its
    training flag and parameters join the guards).  ``warmup``: eager calls before the first recording."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        fullgraph: bool = False,
        module: Any = None,
        warmup: int = 1,
        structure_version: Callable[[], int] | None = None,
        name: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.fn = fn
        self.options = dict(options or {})
        self.fullgraph = fullgraph
        self.module = module
        self.warmup = warmup
        self.structure_version = structure_version
        self.name = name or getattr(fn, "__qualname__", repr(fn))
        self.entries: dict[tuple[Any, ...], Entry] = {}
        self.stats = Stats()
        self._calls = 0
        self._warned = False
        self._last_key: tuple[Any, ...] | None = None
        forward = getattr(type(module), "forward", None) if module is not None else None
        self._code = getattr(forward, "__code__", None) if forward is not None else getattr(fn, "__code__", None)

    # ------------------------------------------------------------------ calling
    def key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], list[Any]]:
        leaves: list[Any] = []
        _leaves(args, leaves)
        if kwargs:
            _leaves(kwargs, leaves)
        mod = None
        if self.module is not None:
            version = self.structure_version() if self.structure_version is not None else 0
            mod = (self.module.training, version)
        key = (
            tuple(_leaf_key(x) for x in leaves),
            grad_mode.enabled,
            _autocast_key(),
            policy_resolve.generation(),
            mod,
        )
        return key, [x for x in leaves if isinstance(x, TensorBase)]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if CAPTURE.recorder is not None or _traced():  # inside another recording, or every op is watched
            return self._eager(args, kwargs)
        key, tensors = self.key(args, kwargs)
        entry = self.entries.get(key)
        if entry is not None:
            if entry.eager:
                return self._eager(args, kwargs)
            failed = entry.state_guard()
            if failed is None:
                self.stats.replays += 1
                return entry.replay(tensors)
            del self.entries[key]
            self._note_recompile(failed)
        elif self._last_key is not None and self.stats.recordings:
            self._note_recompile(guard_difference(self._last_key, key))
        self._calls += 1
        if self._calls <= self.warmup:
            return self._eager(args, kwargs)
        if len(self.entries) >= config.cache_size_limit:
            self._warn_limit()
            return self._eager(args, kwargs)
        return self._record(key, tensors, args, kwargs)

    def _note_recompile(self, why: str) -> None:
        self.stats.recompiles += 1
        self.stats.last_guard_failure = why

    def _warn_limit(self) -> None:
        if self._warned:
            return
        self._warned = True
        warnings.warn(
            f"ampcore.compile: {self.name} has recorded {config.cache_size_limit} programs "
            f"(cache_size_limit); the last recompile was because {self.stats.last_guard_failure or 'of new guards'}. "
            "Calls with new guards run eagerly from now on; raise ampcore.compiler.config.cache_size_limit to "
            "record more, or keep the failing guard fixed (same shapes, dtypes, grad mode, autocast)",
            RuntimeWarning,
            stacklevel=3,
        )

    def _eager(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.stats.eager_calls += 1
        CAPTURE.active += 1
        try:
            return self.fn(*args, **kwargs)
        finally:
            CAPTURE.active -= 1

    # ------------------------------------------------------------------ recording
    def _record(self, key: tuple[Any, ...], tensors: list[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.stats.recordings += 1
        self._last_key = key
        thread_state.frames.cast_cache.clear()  # casts made before the call would read as state
        recorder = Recorder(tensors, fullgraph=self.fullgraph, code=self._code)
        # The checks queued before the call are not the program's to read (its replays see only their own): set
        # aside unread, and put back after.
        earlier = syncs.set_aside_pending()
        CAPTURE.active += 1
        try:
            with recorder:
                result = self.fn(*args, **kwargs)
        finally:
            CAPTURE.active -= 1
            syncs.put_back_pending(earlier)
        entry = Entry(key)
        rec = recorder.recording
        if not rec.breaks:
            why = _build(entry, rec, recorder, result, tensors, self.options)
            if why is not None:
                rec.breaks.append(Break(why, str(self.name)))
        made = [weakref.ref(t) for t in rec.created.values()]
        recorder.release()
        if not rec.breaks:
            result = _reroute(entry, result, tensors)
            outliving = _outliving(made, result, entry, tensors, rec.kept_ids)
            if outliving:
                rec.breaks.append(Break(_lazy_state(outliving), str(self.name)))
        if rec.breaks:
            entry.breaks = rec.breaks
            entry.program = None
            self.stats.breaks.extend(rec.breaks)
        self.entries[key] = entry
        return result


def _outliving(
    made: list[weakref.ref[Any]], result: Any, entry: Entry, tensors: list[Any], kept: set[int]
) -> list[Any]:
    """The tensors the recorded call made that are still alive though nothing of the call's result holds them:
    state made lazily inside it (an optimizer's moments on its first step), which its replays would not keep.
    Not counted: the result's tensors, a ``.grad`` the call set (replays set theirs), autocast's weight casts,
    the checks queued on the device and the values host code keeps (all replayed)."""
    alive = {id(t): t for t in (r() for r in made) if t is not None}
    if not alive:
        return []
    leaves: list[Any] = []
    _leaves(result, leaves)
    known = {id(t) for t in leaves}
    known |= {id(hit[2]) for hit in thread_state.frames.cast_cache.values()}
    known |= syncs.pending_tensor_ids()
    known |= kept
    for w in entry.writes:
        if w.attr == "grad":
            target = tensors[w.target[1]] if isinstance(w.target, tuple) else w.target
            known.add(id(target.grad))
    return [t for i, t in alive.items() if i not in known]


def _lazy_state(outliving: list[Any]) -> str:
    shapes = ", ".join(f"{t.dtype.name}{list(t.shape)}" for t in outliving[:4])
    more = f" and {len(outliving) - 4} more" if len(outliving) > 4 else ""
    return (
        f"the call made {len(outliving)} tensor(s) that outlive it ({shapes}{more}): state made lazily inside it "
        "(an optimizer's moments on its first step, a loss scale), which a replay would not keep; record after an "
        "eager warm-up call (options={'warmup': 1}, the default)"
    )


def _reroute(entry: Entry, result: Any, tensors: list[Any]) -> Any:
    """The recorded call's own outputs, their graphs replaced by the captured backward's nodes: the
    recording's backward runs the program its replays will run."""
    for t, bw in entry.reroute:
        bp, saved_idx = entry.backward[bw]
        t.grad_fn = node_for(bp, [entry.recorded[i] for i in saved_idx], tensors, t._backend)
    entry.recorded, entry.reroute = [], []
    return result


def _backend_of(table: Any) -> Any:
    return registry.get_backend(table._backend_name)


def _fused_kernel(program: Any, operand_dtypes: list[Any], result_dtype: Any, table: Any) -> Any:
    """The backend's kernel of a fused chain (:meth:`ampcore.Backend.fused_kernel`), or None."""
    return _backend_of(table).fused_kernel(program, operand_dtypes, result_dtype)


def _fused_gemm_kernel(
    gemm: str, program: Any, product_dtype: Any, operand_dtypes: list[Any], result_dtype: Any, table: Any
) -> Any:
    """The backend's kernel of a GEMM and its epilogue (:meth:`ampcore.Backend.fused_gemm_kernel`), or None."""
    return _backend_of(table).fused_gemm_kernel(gemm, program, product_dtype, operand_dtypes, result_dtype)


def _build(
    entry: Entry, rec: Recording, recorder: Recorder, result: Any, tensors: list[Any], options: dict[str, Any]
) -> str | None:
    """Fill ``entry`` from a break-free recording; None, or why it cannot be replayed."""
    results: list[int] = []
    index: dict[int, int] = {}

    def need(slot: int) -> int:
        if slot not in index:
            index[slot] = len(results)
            results.append(slot)
        return index[slot]

    arg_index = {id(t): i for i, t in enumerate(tensors)}
    # Outputs.
    backward_of: list[tuple[Any, int]] = []

    def encode(value: Any) -> Any:
        if isinstance(value, TensorBase):
            if id(value) in arg_index:
                return ("arg", arg_index[id(value)])
            if id(value) not in rec.created:
                return ("const", value)
            ref = rec.ref_of(value._data)
            if ref is None:
                return ("const", value)
            bw = None
            fn = value.grad_fn
            # An output whose graph a backward inside the call freed (a step returning its loss) has no backward
            # to capture: eager's would raise on a second backward, and the replayed output has none.
            if value.requires_grad and fn is not None and id(fn) in rec.region_nodes and not fn.freed:
                bw = len(backward_of)
                backward_of.append((value, ref.slot))
            elif value.requires_grad and value.grad_fn is None:
                return ("const", value)  # a leaf made inside the call
            return ("new", need(ref.slot), value.device, value._backend, False, bw)
        t = type(value)
        if t in (list, tuple) or (isinstance(value, tuple) and hasattr(value, "_fields")):
            return ("seq", t, [encode(v) for v in value])
        if t is dict:
            return ("dict", [(k, encode(v)) for k, v in value.items()])
        return ("const", value)

    entry.output = encode(result)
    # Writes.
    for w in rec.writes:
        target = ("arg", arg_index[id(w.target)]) if id(w.target) in arg_index else w.target
        if isinstance(w.value, Ref):
            position, constant = need(w.value.slot), None
        else:
            position, constant = (-2 if w.value is None else -1), w.value
        entry.writes.append(_Write(position, target, w.attr, w.dtype, w.shape, constant, w.requires_grad))
    # Checks queued on the device.
    for ref, error, device, backend in rec.checks:
        cells: list[tuple[int, Any]] = []
        for i, cell in enumerate(error.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, TensorBase):
                if id(value) in arg_index:
                    cells.append((i, ("arg", arg_index[id(value)])))
                elif id(value) in rec.created:
                    r = rec.ref_of(value._data)
                    if r is not None:
                        cells.append((i, ("slot", need(r.slot))))
        entry.checks.append((need(ref.slot), error, cells, device, backend))
    # Device values host code keeps (float8's stats): handed over again after each replay.
    for keeper, refs, places in rec.kept:
        entry.kept.append((keeper, [need(r.slot) for r in refs], places))
    # Backward programs of differentiable outputs.
    reroute = []
    for value, _slot in backward_of:
        bp, why = record_backward(value, rec.region_nodes, rec.slot_of, rec.slots, tensors)
        if bp is None:
            return f"the backward of an output cannot be captured: {why}"
        entry.backward.append((bp, [need(s) for s in bp.saved]))
        reroute.append((value, len(entry.backward) - 1))
    # Inputs: what a replay reads before the first step.
    program_inputs: list[int] = []
    for slot, info in enumerate(rec.slots):
        if info.kind == "input":
            entry.sources.append(_Source(0, info.source, info.shape, info.dtype))
        elif info.kind == "state":
            entry.sources.append(_Source(1, info.source, info.shape, info.dtype, info.source.requires_grad))
        elif info.kind == "grad":
            entry.sources.append(_Source(2, info.source, info.shape, info.dtype))
        else:
            continue
        program_inputs.append(slot)
    entry.grad_guards = rec.grad_guards
    entry.uploads = rec.uploads
    program = build_program(rec.slots, rec.steps, program_inputs, results, rec.seeds, rec.dynamics)
    # Drop the inputs nothing reads (a state tensor only looked at by code whose kernels were removed).
    used = {s for step in program.steps for s in (*refs_in(step.args), *refs_in(step.kwargs))} | set(results)
    keep = [i for i, s in enumerate(program_inputs) if s in used]
    program.inputs = [program_inputs[i] for i in keep]
    entry.sources = [entry.sources[i] for i in keep]
    if options.get("fusion", True):
        relaxed = bool(options.get("relaxed"))
        program = fuse(program, _fused_kernel, relaxed=relaxed, compile_epilogue=_fused_gemm_kernel)
    entry.program = program
    entry.run = runner_for(program)
    arrays = {slot: a for a, slot in _arrays_of(recorder)}
    entry.recorded = [arrays.get(s) for s in results]
    entry.reroute = reroute
    return None


def _arrays_of(recorder: Recorder) -> list[tuple[Any, int]]:
    slot_of = recorder.recording.slot_of
    return [(a, slot_of[id(a)]) for a in recorder._keep if id(a) in slot_of]
