"""A captured program's float8 operands handed to ``scaled_mm`` already dequantized, made by the cast that made
them.

On the widened path (:mod:`.float8`) ``scaled_mm`` turns each float8 operand back into float32, ``value(code) *
scale`` by a table lookup (and a multiply for per-row scales), before sgemm.  In a tensorwise float8 training
step each cast's codes feed two GEMMs (an activation the forward's and the weight gradient's, a weight the
forward's and the input gradient's, a gradient both backward ones), so each is looked up twice, a pass and an
allocation each time.  Here a ``quantize_float8_current`` (per tensor or per row) whose codes reach a
``scaled_mm`` (through ``transpose`` views) with that cast's own ``1 / scale`` as their dequantization scale also
writes that float32 operand, in the pass that makes the codes
(:func:`.float8.quantize_current_dequantized`), and the ``scaled_mm`` reads it: the same numbers (each the one
rounding of the same product), laid out as the lookup would lay them out (:func:`.float8.as_looked_up`).  The
codes are still made and read by everything else.  Where oneMKL's float8 GEMM runs at replay (it reads the
codes), the ``scaled_mm`` takes the codes as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ampcore import dtypes as dt
from ampcore.capture import FusedStep, Program, Ref, Step, refs_in

from . import compiled, float8

__all__ = ["dequantize_float8"]

_VIEWS = ("reshape", "transpose")


def dequantize_float8(program: Program) -> Program | None:
    """``program`` with its float8 casts' dequantized operands handed to the ``scaled_mm`` steps that read them
    (see the module docstring), or None where there are none (or numba is off)."""
    if not compiled.status().enabled:
        return None
    steps = program.steps
    made_by: dict[int, int] = {}
    for i, step in enumerate(steps):
        for s in refs_in(step.outs):
            made_by[s] = i
    casts = {i for i, step in enumerate(steps) if _cast(step)}
    reads: dict[int, list[tuple[int, list[int]]]] = {}  # scaled_mm step -> per operand: (cast, views) or none
    for j, step in enumerate(steps):
        if _gemm_name(step) != "scaled_mm":
            continue
        for k in (0, 1):
            found = _source(step, k, steps, made_by, casts)
            if found is not None:
                reads.setdefault(j, []).append((k, *found))
    if not reads:
        return None
    slots = list(program.slots)
    dequantized: dict[int, int] = {}  # cast step -> the slot of its dequantized operand
    for i in sorted({cast for found in reads.values() for _, cast, _ in found}):
        q = steps[i].outs[0].slot
        dequantized[i] = len(slots)
        slots.append(dataclasses.replace(slots[q], dtype=dt.float32, kind="output", source=i))
    new_steps: list[Step] = []
    for i, step in enumerate(steps):
        if i in dequantized:
            step = _with_dequantized(step, dequantized[i])
        elif i in reads:
            operands: list[Any] = [None, None]
            views: list[list[Any]] = [[], []]
            args = list(step.args)
            for k, cast, chain in reads[i]:
                operands[k] = Ref(dequantized[cast])
                views[k] = [steps[v].args[1] for v in chain]
                args[k] = steps[cast].outs[0]  # the codes themselves: the views are applied only where used
            step = _reading(dataclasses.replace(step, args=tuple(args)), operands, views)
        new_steps.append(step)
    kept = _without_unread_views(new_steps, set(program.results))
    return dataclasses.replace(program, slots=slots, steps=kept, removed=program.removed + len(new_steps) - len(kept))


def _without_unread_views(steps: list[Step], results: set[int]) -> list[Step]:
    """``steps`` less the views of codes that nothing reads any longer (each GEMM now views its own operands)."""
    while True:
        read = set(results)
        for step in steps:
            read.update(refs_in(step.args))
            read.update(refs_in(step.kwargs))
        unread = [
            i
            for i, step in enumerate(steps)
            if step.name in _VIEWS and isinstance(step.outs, Ref) and step.outs.slot not in read
        ]
        if not unread:
            return steps
        steps = [step for i, step in enumerate(steps) if i not in set(unread)]


def _cast(step: Step) -> bool:
    """A ``quantize_float8_current`` (per tensor or per row) with all four results in slots."""
    if (
        step.name != "quantize_float8_current"
        or step.kwargs
        or len(step.args) != 5
        or step.args[3] not in (True, False)
    ):
        return False
    return isinstance(step.outs, tuple | list) and len(step.outs) == 4 and all(isinstance(o, Ref) for o in step.outs)


def _gemm_name(step: Step) -> str | None:
    if isinstance(step, FusedStep):
        return step.gemm
    return step.name if not step.kwargs else None


def _source(
    step: Step, k: int, steps: list[Step], made_by: dict[int, int], casts: set[int]
) -> tuple[int, list[int]] | None:
    """(the cast, the transposes from its codes in order) where ``step``'s operand ``k`` is a cast's codes,
    through ``transpose`` views only, and its scale operand is that cast's own ``1 / scale``: as it is, or for a
    per-row cast's codes transposed into ``b`` (K, N), its (N, 1) inverse scales as the (1, N) row ``scaled_mm``
    takes (one reshape or transpose), so that each dequantized value is the same product as the GEMM's own."""
    operand, scale = step.args[k], step.args[2 + k]
    if not isinstance(operand, Ref) or not isinstance(scale, Ref):
        return None
    views: list[int] = []
    slot = operand.slot
    while (
        slot in made_by and steps[made_by[slot]].name == "transpose" and isinstance(steps[made_by[slot]].args[0], Ref)
    ):
        views.append(made_by[slot])
        slot = steps[made_by[slot]].args[0].slot
    i = made_by.get(slot)
    if i not in casts or steps[i].outs[0].slot != slot:
        return None
    inv = steps[i].outs[2].slot
    if scale.slot == inv and (not steps[i].args[3] or not views):
        return i, views[::-1]
    if not steps[i].args[3] or k != 1 or len(views) != 1 or tuple(steps[views[0]].args[1]) != (1, 0):
        return None
    made = steps[made_by[scale.slot]] if scale.slot in made_by else None
    if made is None or made.name not in _VIEWS or not isinstance(made.args[0], Ref) or made.args[0].slot != inv:
        return None
    shape = tuple(made.args[1])  # the transpose's axes, or the reshape's shape
    as_row = shape == (1, 0) if made.name == "transpose" else len(shape) == 2 and shape[0] == 1
    return (i, views[::-1]) if as_row else None


def _with_dequantized(step: Step, slot: int) -> FusedStep:
    """The cast, also writing its dequantized operand into ``slot``."""
    return FusedStep(
        step.table,
        "quantize_float8_current+dequantized",
        step.args,
        step.kwargs,
        (*step.outs, Ref(slot)),
        step.where,
        fn=float8.quantize_current_dequantized,
        replaces=1,
    )


def _reading(step: Step, operands: list[Any], views: list[list[Any]]) -> Step:
    """``step`` (a ``scaled_mm``, plain or with its epilogue) taking its dequantized operands as two more
    arguments (None for an operand that has none), viewed as its codes are (``views``: each operand's transposes'
    axes, in order) and used in place of the codes on the widened path."""
    fn = step.fn if isinstance(step, FusedStep) and step.fn is not None else step.table.kernel(step.name)
    args = (*step.args, *operands)
    kernel = _dequantized_operands(fn, views)
    if isinstance(step, FusedStep):
        return dataclasses.replace(step, args=args, fn=kernel)
    return FusedStep(step.table, step.name, args, step.kwargs, step.outs, step.where, fn=kernel, replaces=1)


def _dequantized_operands(fn: Callable[..., Any], views: list[list[Any]]) -> Callable[..., Any]:
    views_a, views_b = views
    # A dequantized operand comes C-contiguous from its cast: with no view to take it is as the lookup lays it out.
    plain_a, plain_b = not views_a, not views_b

    def kernel(a: Any, b: Any, *rest: Any) -> Any:
        dequantized_a, dequantized_b = rest[-2], rest[-1]
        if not float8.widened_path():  # oneMKL reads the codes, viewed as the GEMM took them
            return fn(_viewed(a, views_a), _viewed(b, views_b), *rest[:-2])
        if dequantized_a is not None:
            a = dequantized_a if plain_a else float8.as_looked_up(_viewed(dequantized_a, views_a))
        if dequantized_b is not None:
            b = dequantized_b if plain_b else float8.as_looked_up(_viewed(dequantized_b, views_b))
        return fn(a, b, *rest[:-2])

    return kernel


def _viewed(x: Any, views: list[Any]) -> Any:
    for axes in views:
        x = x.transpose(axes)
    return x
