"""Recording a call at the kernel boundary: every kernel, where its arrays came from, and what state it changed.

While a :class:`Recorder` runs (one eager call of a compiled function, on one
thread) it wraps every kernel of every loaded backend's table
(:meth:`ampcore.kernels.KernelTable.record_with`) and turns three attributes of
:class:`~ampcore.tensor_base.TensorBase` into logging properties, so it sees:

- each kernel call: its name, its arguments with each array named by a *slot*
  (an input of the call, a tensor's array read from state that existed before
  the call, an earlier kernel's output) and its outputs, which become slots;
- state reads: ``t._data`` of a tensor made before the call (a parameter, a
  gradient, an optimizer moment, the loss scale) and ``p.grad`` (whether it was
  None: a guard);
- state writes: ``t._data = a`` (ampcore's in-place ops, optimizers and the
  scaler rebind a tensor's array) and ``p.grad = g``: a replay writes its
  outputs back to the same tensors;
- what cannot be replayed: a host read (:mod:`ampcore.syncs` is the one door), a
  random draw made on the host, a backend that declines: each is a
  :class:`Break` with the line of user code that caused it;
- host-side effects a replay must repeat: random seeds drawn from a generator
  (drawn again, in order, so a replay's dropout masks are eager's), checks
  queued on the device (queued again), and :mod:`.dynamic` numbers.

The op path pays nothing for any of this: the wrappers and properties are
installed for the recording and removed after it.
"""

from __future__ import annotations

import linecache
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import autograd, creation, dispatch, kernels
from ..hooks import CAPTURE
from ..tensor_base import TensorBase
from ..tensor_torch import _DataAliasMixin
from .dynamic import Dynamic, plain

__all__ = ["Break", "CaptureBreakError", "Recorder", "Recording", "Ref", "Seed", "Dyn", "SlotInfo", "Step", "Write"]

_AMPCORE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Ref:
    """A slot in a step's arguments or outputs."""

    __slots__ = ("slot",)

    def __init__(self, slot: int) -> None:
        self.slot = slot

    def __repr__(self) -> str:
        return f"s{self.slot}"


class Seed:
    """The ``index``-th random seed the call drew (drawn again from the same generator on replay)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"seed{self.index}"


class Dyn:
    """The ``index``-th :class:`~ampcore.capture.dynamic.Dynamic` number (its getter called on replay)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"dyn{self.index}"


@dataclass
class SlotInfo:
    """Where a slot's array comes from: ``kind`` is ``"input"`` (``source`` the input's position),
    ``"state"`` (``source`` the tensor whose array it is), ``"grad"`` (``source`` the tensor whose ``.grad``'s
    array it is) or ``"output"`` (``source`` the step that makes it); its shape and dtype when recorded."""

    kind: str
    source: Any
    shape: tuple[int, ...] | None
    dtype: Any
    table: Any = None


@dataclass
class Step:
    """One kernel call: ``table.<name>(*args, **kwargs)`` with slots (:class:`Ref`), seeds and dynamic numbers
    in the templates, its outputs as :class:`Ref` in ``outs`` (the kernel's result structure), and the user's
    line that made it."""

    table: Any
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outs: Any
    where: str = ""


@dataclass
class Write:
    """State a replay writes: ``target.<attr>`` (``"_data"`` or ``"grad"``) set to ``value`` (a :class:`Ref`,
    None for ``grad``, or a constant object), with the dtype and shape the tensor had after the call."""

    target: Any
    attr: str
    value: Any
    dtype: Any = None
    shape: tuple[int, ...] | None = None
    requires_grad: bool = False


@dataclass(frozen=True)
class Break:
    """Why a call cannot be replayed: ``reason``, and the user's code that did it (``where``: file:line in
    function; ``line``: the source text)."""

    reason: str
    where: str
    line: str = ""

    def __str__(self) -> str:
        text = f"{self.where}: {self.reason}"
        return text + (f"\n    {self.line}" if self.line else "")


class CaptureBreakError(RuntimeError):
    """``fullgraph=True`` and the call did something a captured step cannot replay (a host read, say)."""

    def __init__(self, brk: Break) -> None:
        self.brk = brk
        super().__init__(
            f"ampcore.compile(fullgraph=True): the call cannot be captured whole: {brk.reason} at {brk.where}"
            + (f" ({brk.line.strip()})" if brk.line else "")
            + "; move it out of the compiled function, or compile without fullgraph=True to run such calls eagerly"
        )


@dataclass
class Recording:
    """What one recorded call did (see :class:`Recorder`)."""

    slots: list[SlotInfo] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    grad_guards: list[tuple[Any, bool]] = field(default_factory=list)  # (tensor, its .grad was None)
    breaks: list[Break] = field(default_factory=list)
    seeds: list[Any] = field(default_factory=list)  # the generator of each seed, in draw order
    dynamics: list[Callable[[], float]] = field(default_factory=list)
    # (flag Ref, error, device, backend) of each check queued on the device
    checks: list[tuple[Any, Callable[[], Exception], Any, Any]] = field(default_factory=list)
    # (keep, [Ref], [(device, backend)], or None where keep takes arrays) of each keep_device_values call, and the
    # ids of the tensors it kept
    kept: list[tuple[Callable[..., None], list[Any], list[tuple[Any, Any]] | None]] = field(default_factory=list)
    kept_ids: set[int] = field(default_factory=set)
    uploads: int = 0  # arrays made from host data inside the call (taken as constants)
    created: dict[int, Any] = field(default_factory=dict)  # id -> tensor made during the call
    region_nodes: dict[int, Any] = field(default_factory=dict)  # id -> autograd node made during the call
    slot_of: dict[int, int] = field(default_factory=dict)  # id(array) -> slot, for arrays seen

    def ref_of(self, array: Any) -> Ref | None:
        """The slot holding ``array`` (an array the call saw), or None."""
        slot = self.slot_of.get(id(array))
        return None if slot is None else Ref(slot)


_DATA = TensorBase.__dict__["_data"]
_GRAD = TensorBase.__dict__["grad"]
_WRAP = TensorBase.__dict__["_wrap"]
_NODE_INIT = autograd.Node.__init__


# Why the host read, by the reason syncs.to_host was given, in the words explain prints.
_READS = {
    "read": "a tensor's value read on the host (.item(), bool(), float(), .tolist(), .numpy(), printing)",
    "boolean mask": "a boolean mask's selection, whose shape depends on the values (a data-dependent shape)",
    "sort": "a sort on the host (sort, argsort, topk, unique)",
}


def user_location(skip_code: Any = None) -> tuple[str, str]:
    """``("file:line in function", source line)`` of the innermost frame of user code (outside ampcore's
    package and the backends), or of the compiled function's own code."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if (skip_code is not None and frame.f_code is skip_code) or not _internal(filename):
            line = linecache.getline(filename, frame.f_lineno).strip()
            return f"{filename}:{frame.f_lineno} in {frame.f_code.co_name}", line
        frame = frame.f_back
    return "<unknown>", ""


def _internal(filename: str) -> bool:
    """Whether ``filename`` is ampcore's own code: its package, a backend's (a package named ``ampcore_*``), or
    code ampcore generated (a replay's runner, a program's evaluator)."""
    if filename.startswith(("<captured program", "<program ")):
        return True
    path = os.path.abspath(filename)
    return path.startswith(_AMPCORE_DIR) or os.path.basename(os.path.dirname(path)).startswith("ampcore_")


class Recorder:
    """Records one call (see the module docstring): ``with recorder: fn(*args)``, then :attr:`recording`.

    ``inputs`` are the call's tensors, in order (slot ``i`` is ``inputs[i]``'s array).  ``fullgraph``: the
    first break raises :class:`CaptureBreakError` instead of being noted.  ``code``: the compiled
    function's code object, so a break inside it names its line.
    """

    def __init__(self, inputs: list[TensorBase], *, fullgraph: bool = False, code: Any = None) -> None:
        self.thread = threading.get_ident()
        self.fullgraph = fullgraph
        self.code = code
        self.recording = rec = Recording()
        self._keep: list[Any] = []  # every array and tensor seen, so no id is reused while recording
        self._written: dict[int, Any] = {}  # id -> pre-existing tensor whose _data was set
        self._grad_written: dict[int, Any] = {}
        self._grad_read: dict[int, Any] = {}
        self._grad_owner: dict[int, Any] = {}
        self._state: dict[int, Any] = {}  # id -> pre-existing tensor read (for guards)
        self._pending_seeds: dict[int, int] = {}  # seed value -> its index
        self._depth = 0
        self._tables: list[Any] = []
        self.inputs = inputs
        for i, t in enumerate(inputs):
            array = _DATA.__get__(t)
            if id(array) not in rec.slot_of:
                self._new_slot(SlotInfo("input", i, t.shape, t.dtype), array)

    # ------------------------------------------------------------------ install / remove
    def __enter__(self) -> Recorder:
        if CAPTURE.recorder is not None:
            raise RuntimeError("another captured call is being recorded; ampcore records one call at a time")
        CAPTURE.recorder = self
        rec = self.recording
        me = self

        def data_get(t: Any) -> Any:
            a = _DATA.__get__(t)
            if me._depth == 0 and threading.get_ident() == me.thread:
                me._on_data_read(t, a)
            return a

        def data_set(t: Any, a: Any) -> None:
            _DATA.__set__(t, a)
            if threading.get_ident() == me.thread and id(t) not in rec.created:
                me._written[id(t)] = t

        def grad_get(t: Any) -> Any:
            g = _GRAD.__get__(t)
            if threading.get_ident() == me.thread and id(t) not in rec.created and id(t) not in me._grad_written:
                if id(t) not in me._grad_read:
                    me._grad_read[id(t)] = (t, g is None)
                if g is not None:
                    me._grad_owner[id(g)] = t
            return g

        def grad_set(t: Any, g: Any) -> None:
            _GRAD.__set__(t, g)
            if threading.get_ident() == me.thread and id(t) not in rec.created:
                me._grad_written[id(t)] = t

        def new_object(cls: type) -> Any:
            obj: Any = object.__new__(cls)
            if threading.get_ident() == me.thread:
                rec.created[id(obj)] = obj
            return obj

        def wrap(cls: type, *args: Any, **kwargs: Any) -> Any:
            t = _WRAP.__func__(cls, *args, **kwargs)
            if threading.get_ident() == me.thread:
                rec.created[id(t)] = t
            return t

        def node_init(node: Any, *args: Any, **kwargs: Any) -> None:
            _NODE_INIT(node, *args, **kwargs)
            if threading.get_ident() == me.thread:
                rec.region_nodes[id(node)] = node

        _swap(
            (TensorBase, "_data", property(data_get, data_set)),
            (TensorBase, "grad", property(grad_get, grad_set)),
            (TensorBase, "_wrap", classmethod(wrap)),
            (dispatch, "_new_object", new_object),
            (autograd.Node, "__init__", node_init),
        )
        self._tables = list(kernels._tables)
        for table in self._tables:
            table.record_with(self._wrapper)
        _clear_gate_caches()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            for table in self._tables:
                table.record_with(None)
        finally:
            _swap(
                (TensorBase, "_data", _DATA),
                (TensorBase, "grad", _GRAD),
                (TensorBase, "_wrap", _WRAP),
                (dispatch, "_new_object", object.__new__),
                (autograd.Node, "__init__", _NODE_INIT),
            )
            CAPTURE.recorder = None
            _clear_gate_caches()
        if exc[0] is None:
            self._finish()

    # ------------------------------------------------------------------ kernels
    def _wrapper(self, table: Any, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        me = self

        def kernel(*args: Any, **kwargs: Any) -> Any:
            if me._depth or threading.get_ident() != me.thread:
                return fn(*args, **kwargs)
            clean_args, clean_kwargs = plain(args), plain(kwargs) if kwargs else kwargs
            me._depth += 1
            try:
                out = fn(*clean_args, **clean_kwargs)
            finally:
                me._depth -= 1
            me._on_kernel(table, name, args, kwargs, out)
            return out

        kernel.__name__ = name
        kernel.__wrapped__ = fn  # type: ignore[attr-defined]
        return kernel

    def _on_kernel(self, table: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        rec = self.recording
        arg_t = tuple(self._template(a) for a in args)
        kw_t = {k: self._template(v) for k, v in kwargs.items()}
        index = len(rec.steps)
        outs = self._outputs(table, out, index)
        rec.steps.append(Step(table, name, arg_t, kw_t, outs, user_location(self.code)[0]))

    def _template(self, value: Any) -> Any:
        if isinstance(value, Dynamic):
            self.recording.dynamics.append(value.getter)
            return Dyn(len(self.recording.dynamics) - 1)
        t = type(value)
        if t in (list, tuple):
            return t(self._template(v) for v in value)
        if t is dict:
            return {k: self._template(v) for k, v in value.items()}
        if t is int and value in self._pending_seeds:
            return Seed(self._pending_seeds.pop(value))
        slot = self.recording.slot_of.get(id(value))
        if slot is not None:
            return Ref(slot)
        return value  # a constant: a number, a dtype, a shape, or an array made outside (kept as it is)

    def _outputs(self, table: Any, out: Any, step: int) -> Any:
        t = type(out)
        if t in (list, tuple):
            return t(self._outputs(table, o, step) for o in out)
        if out is None or isinstance(out, (bool, int, float, str)):
            return out
        try:
            shape, dtype = table.shape_of(out), table.dtype_of(out)
        except Exception:  # noqa: BLE001 - not an array of this backend: kept as a constant
            return out
        return Ref(self._new_slot(SlotInfo("output", step, shape, dtype, table), out))

    def _new_slot(self, info: SlotInfo, array: Any) -> int:
        rec = self.recording
        rec.slots.append(info)
        slot = len(rec.slots) - 1
        rec.slot_of[id(array)] = slot
        self._keep.append(array)
        return slot

    # ------------------------------------------------------------------ tensors
    def _on_data_read(self, t: Any, array: Any) -> None:
        rec = self.recording
        if id(array) in rec.slot_of or id(t) in rec.created or id(t) in self._written:
            return
        owner = self._grad_owner.get(id(t))
        table = t._backend.kernels
        if owner is not None:
            self._new_slot(SlotInfo("grad", owner, t.shape, t.dtype, table), array)
        else:
            self._new_slot(SlotInfo("state", t, t.shape, t.dtype, table), array)
            self._state[id(t)] = t
        self._keep.append(t)

    # ------------------------------------------------------------------ host effects
    def host_read(self, reason: str) -> None:
        """A read of device data by the host: the call cannot be replayed (syncs._read calls this)."""
        if threading.get_ident() == self.thread and not self._depth:
            what = _READS.get(reason, f"a host read ({reason})")
            self.add_break(f"{what}: a replay cannot give the host a value")

    def add_break(self, reason: str) -> None:
        """Note that the call cannot be replayed, and why; raises under ``fullgraph=True``."""
        where, line = user_location(self.code)
        brk = Break(reason, where, line)
        self.recording.breaks.append(brk)
        if self.fullgraph:
            raise CaptureBreakError(brk)

    def seed_drawn(self, generator: Any, seed: int) -> None:
        """A random seed drawn from ``generator`` (creation.Generator.next_seed calls this)."""
        if threading.get_ident() != self.thread:
            return
        rec = self.recording
        rec.seeds.append(generator)
        self._pending_seeds[seed] = len(rec.seeds) - 1

    def upload(self) -> None:
        """An array made from host data: a replay reuses the recorded one."""
        if threading.get_ident() == self.thread:
            self.recording.uploads += 1

    def check_queued(self, flag: Any, error: Callable[[], Exception]) -> None:
        """A device-side check queued (syncs.defer_check calls this): a replay queues it again."""
        if threading.get_ident() != self.thread:
            return
        ref = self.recording.ref_of(_DATA.__get__(flag))
        if ref is None:
            self.add_break("a check queued on a flag computed outside the call")
            return
        self.recording.checks.append((ref, error, flag.device, flag._backend))

    def values_kept(self, keep: Callable[..., None], tensors: tuple[Any, ...], arrays: bool = False) -> None:
        """Device values host code kept (hooks.keep_device_values calls this): a replay hands it its own, as
        tensors, or as their arrays with ``arrays`` (then no places are kept: None)."""
        if threading.get_ident() != self.thread:
            return
        refs = [self.recording.ref_of(_DATA.__get__(t)) for t in tensors]
        if any(r is None for r in refs):
            self.add_break("host code kept a device value computed outside the call")
            return
        self.recording.kept.append((keep, refs, None if arrays else [(t.device, t._backend) for t in tensors]))
        self.recording.kept_ids.update(id(t) for t in tensors)

    # ------------------------------------------------------------------ finishing
    def _finish(self) -> None:
        rec = self.recording
        if self._pending_seeds:
            self.add_break(
                "random numbers drawn on the host (randint, randperm, a shuffle): a replay would repeat them"
            )
        for t in self._written.values():
            if id(t) in rec.created:  # set while it was being made (_wrap sets _data before it returns)
                continue
            a = _DATA.__get__(t)
            ref = rec.ref_of(a)
            rec.writes.append(Write(t, "_data", ref if ref is not None else a, t.dtype, t.shape))
        for t in self._grad_written.values():
            if id(t) in rec.created or isinstance(t, _DataAliasMixin):  # made here; or a t.data alias's own
                continue
            g = _GRAD.__get__(t)
            if g is None:
                rec.writes.append(Write(t, "grad", None))
            elif id(g) in rec.created:
                ref = rec.ref_of(_DATA.__get__(g))
                value = ref if ref is not None else _DATA.__get__(g)
                rec.writes.append(Write(t, "grad", value, g.dtype, g.shape, g.requires_grad))
            else:
                rec.writes.append(Write(t, "grad", g))
        rec.grad_guards = [(t, was_none) for t, was_none in self._grad_read.values()]

    def release(self) -> None:
        """Drop what the recording kept alive (every array and tensor it saw), once its program is built."""
        self._keep.clear()
        for table in (self._written, self._grad_written, self._grad_read, self._grad_owner, self._state):
            table.clear()
        self.recording.created.clear()

    def state_tensors(self) -> Iterator[Any]:
        """The tensors made before the call whose arrays it read."""
        return iter(self._state.values())


def _swap(*changes: tuple[Any, str, Any]) -> None:
    """Set each ``(owner, attribute, value)``: the recording's logging properties and creation hooks, in and out."""
    for owner, name, value in changes:
        setattr(owner, name, value)


def _clear_gate_caches() -> None:
    """Creation keeps one kernel gate per (backend, op), holding the kernels it fetched: drop them, so a gate
    made while recording is not kept after it (nor one made before used during it)."""
    creation._gates.clear()
