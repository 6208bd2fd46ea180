"""A captured call's backward, recorded once and replayed by one autograd node (AOTAutograd's idea).

When a recorded call returns a tensor that requires grad, its graph (the nodes
the call made) is walked once more, right after the call, as the backward
engine would walk it: each node's backward rule runs on a placeholder gradient
while a :class:`~ampcore.capture.record.Recorder` notes the kernels.  What the
walk hands past the call's edge (a gradient for a parameter or other leaf, or
for the node that made one of the call's inputs) becomes the program's
results.  The arrays the rules read from the forward (saved activations,
weights) are the backward program's inputs: the forward's replay keeps them.

The output then gets one :class:`CapturedBackward` node in place of the call's
graph.  The engine runs it like any node: it replays the backward program with
the incoming gradient, and routes each result where the walk sent it (a leaf's
``.grad`` is accumulated by the engine, as eager's is, contribution by
contribution in eager's order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..autograd import Context, Node, _topological_order, no_grad
from ..kernels import KernelGate
from .program import Program, build_program, refs_in, runner_for
from .record import Recorder, SlotInfo

__all__ = ["BackwardProgram", "CapturedBackward", "Edge", "node_for", "record_backward"]


@dataclass
class Edge:
    """Where one result of a backward program goes: ``kind`` ``"leaf"`` (``source``: the leaf tensor, or
    ``("arg", i)`` for the call's ``i``-th input tensor) or ``"node"`` (``source``: ``("arg", i)``, the node
    that made input ``i``)."""

    kind: str
    source: Any


@dataclass
class BackwardProgram:
    """The backward of one output: ``program`` (inputs: the incoming gradient, then ``saved``, slots of the
    forward recording), ``edges`` (one per result), ``grad_shape``/``grad_dtype`` (the placeholder's)."""

    program: Program
    run: Callable[..., tuple[Any, ...]]
    saved: list[int]
    edges: list[Edge]
    grad_shape: tuple[int, ...]
    grad_dtype: Any


class CapturedBackward:
    """The autograd op of a captured call's output: replays its :class:`BackwardProgram`."""

    differentiable = True
    name = "compiled"

    def __init__(self, backward: BackwardProgram) -> None:
        self.backward_program = backward

    def backward(self, ctx: Any, k: Any, grad: Any) -> tuple[Any, ...]:
        bp = self.backward_program
        shape, dtype = k.shape_of(grad), k.dtype_of(grad)
        if shape != bp.grad_shape:
            raise RuntimeError(
                f"a compiled call's output of shape {bp.grad_shape} got a gradient of shape {shape} in backward"
            )
        if dtype != bp.grad_dtype:
            grad = KernelGate.of(ctx.backend, "compiled backward").cast(grad, bp.grad_dtype)
        seeds = [g.next_seed() for g in bp.program.seeds]
        dyn = [g() for g in bp.program.dynamics]
        return bp.run([grad, *ctx.saved], seeds, dyn)

    def __repr__(self) -> str:
        return "<op compiled>"


def node_for(backward: BackwardProgram, saved: Sequence[Any], args: Sequence[Any], backend: Any) -> Node:
    """The autograd node of one replayed output: ``saved`` are the arrays of ``backward.saved`` from this
    call's forward, ``args`` the call's input tensors."""
    ctx = Context()
    ctx.saved = list(saved)
    ctx.backend = backend
    node = Node(CapturedBackward(backward), ctx, [])
    inputs: list[Any] = []
    fns: list[Any] = []
    for edge in backward.edges:
        target = edge.source
        if isinstance(target, tuple) and target[0] == "arg":
            target = args[target[1]]
        if edge.kind == "leaf":
            inputs.append(target)
            fns.append(None)
        else:
            inputs.append(None)
            fns.append(target.grad_fn)
    node.inputs = tuple(inputs)
    node.input_fns = tuple(fns)
    return node


def record_backward(
    output: Any,
    region: dict[int, Any],
    forward_arrays: dict[int, int],
    forward_slots: list[SlotInfo],
    args: Sequence[Any],
) -> tuple[BackwardProgram | None, str | None]:
    """Record the backward of ``output`` (a tensor the recorded call made, with a graph in ``region``, the ids
    of the nodes the call made).  ``forward_arrays`` maps id(array) -> forward slot for every array the forward
    saw; ``args`` are the call's input tensors.  Returns the program, or None and why it cannot be captured."""
    backend = output._backend
    k = backend.kernels
    placeholder = KernelGate.of(backend, "compiled backward").full(output.shape, 0.0, output.dtype, output.device.index)
    arg_leaf = {id(t): i for i, t in enumerate(args)}
    arg_node = {id(t.grad_fn): i for i, t in enumerate(args) if t.grad_fn is not None}
    recorder = Recorder([])
    rec = recorder.recording
    recorder._new_slot(SlotInfo("input", 0, output.shape, output.dtype, k), placeholder)
    saved_of: dict[int, int] = {}  # forward slot -> backward slot
    # The forward's arrays are known to the walk as inputs the replay fills in ("saved").
    for array_id, fslot in forward_arrays.items():
        info = forward_slots[fslot]
        rec.slots.append(SlotInfo("saved", fslot, info.shape, info.dtype, info.table))
        rec.slot_of[array_id] = len(rec.slots) - 1
        saved_of[fslot] = len(rec.slots) - 1
    edges: list[Edge] = []
    results: list[Any] = []
    why: str | None = None
    with recorder, no_grad():
        pending: dict[int, Any] = {id(output.grad_fn): placeholder}
        for node in _topological_order(output.grad_fn):
            if id(node) not in region:
                continue
            g = pending.pop(id(node), None)
            if g is None:
                continue
            input_grads = node.op.backward(node.ctx, k, g)
            for t, fn, gi in zip(node.inputs, node.input_fns, input_grads):
                if gi is None:
                    continue
                if fn is not None and id(fn) in region:
                    key = id(fn)
                    pending[key] = gi if key not in pending else k.add(pending[key], gi)
                elif fn is not None:
                    if id(fn) not in arg_node:
                        why = why or "a tensor with autograd history made outside the call, not passed to it"
                        continue
                    edges.append(Edge("node", ("arg", arg_node[id(fn)])))
                    results.append(gi)
                elif t is not None and t.requires_grad:
                    edges.append(Edge("leaf", ("arg", arg_leaf[id(t)]) if id(t) in arg_leaf else t))
                    results.append(gi)
    if rec.breaks or why:
        return None, why or rec.breaks[0].reason
    if rec.seeds or rec.checks:
        return None, "its backward draws random numbers or queues checks"
    result_slots = []
    for gi in results:
        ref = rec.ref_of(gi)
        if ref is None:
            return None, "a gradient made outside the kernels of its backward"
        result_slots.append(ref.slot)
    used = {s for step in rec.steps for s in (*refs_in(step.args), *refs_in(step.kwargs))}
    used |= set(result_slots)
    saved = sorted(f for f, b in saved_of.items() if b in used)
    inputs = [0] + [saved_of[f] for f in saved]
    program = build_program(rec.slots, rec.steps, inputs, result_slots, rec.seeds, rec.dynamics)
    bp = BackwardProgram(program, runner_for(program), saved, edges, output.shape, output.dtype)
    return bp, None
