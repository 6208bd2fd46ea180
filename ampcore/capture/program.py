"""A recorded call as a program of kernel calls, and the core's reference replay of it.

A :class:`Program` is the steps of a :class:`~ampcore.capture.record.Recording`
that produce what the call leaves behind (its outputs, the state it writes,
the flags it queues, the arrays a captured backward needs), in recorded order,
with the steps nothing reads removed.  Its slots are numbered; ``inputs`` lists
the slots a replay fills before the first step (the call's tensors, the state it
reads, a captured backward's saved arrays) and ``results`` the slots it hands
back.

:func:`reference_runner` is the replay every backend gets, a third party's too:
the kernels called back to back by one generated Python function, one line per
kernel, each array freed after its last use (eager's lifetimes), no op layer,
autograd or autocast between them.  A backend may offer a faster runner for a
program (:meth:`ampcore.Backend.capture_runner`: a CUDA graph, a prebuilt list of
enqueues); where it offers none, this one replays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..plugins import registry
from .record import Dyn, Ref, Seed, SlotInfo, Step

__all__ = [
    "Program",
    "build_program",
    "reference_runner",
    "runner_for",
    "refs_in",
    "draws_per_replay",
    "IN_PLACE_KERNELS",
]

# Kernels that may write their inputs in place (the kernel contract's): never removed as unread.
IN_PLACE_KERNELS = frozenset({"unscale_and_check", "adamw_step", "adamw_step_amp"})


def refs_in(template: Any) -> Iterator[int]:
    """The slots a step's argument or output template names, in order."""
    if isinstance(template, Ref):
        yield template.slot
    elif type(template) in (list, tuple):
        for t in template:
            yield from refs_in(t)
    elif type(template) is dict:
        for t in template.values():
            yield from refs_in(t)


def draws_per_replay(step: Step) -> bool:
    """Whether ``step`` takes a value each replay draws anew (a random seed, a dynamic number such as a learning
    rate): a runner that freezes a step's host arguments must call this one afresh each time."""

    def found(template: Any) -> bool:
        if isinstance(template, (Seed, Dyn)):
            return True
        if type(template) in (list, tuple):
            return any(found(t) for t in template)
        if type(template) is dict:
            return any(found(t) for t in template.values())
        return False

    return found(step.args) or found(step.kwargs)


@dataclass
class Program:
    """Steps over numbered slots: fill ``inputs``, run ``steps`` in order, read ``results``.

    ``seeds`` holds the generator of each :class:`~ampcore.capture.record.Seed` (drawn in this order before the
    steps run), ``dynamics`` the getter of each :class:`~ampcore.capture.record.Dyn`.  ``fused`` counts the
    chains of elementwise kernels a fusion pass turned into one kernel each (``fusions``: their descriptions).
    """

    slots: list[SlotInfo]
    steps: list[Step]
    inputs: list[int]
    results: list[int]
    seeds: list[Any] = field(default_factory=list)
    dynamics: list[Callable[[], float]] = field(default_factory=list)
    fusions: list[str] = field(default_factory=list)
    removed: int = 0  # steps removed because nothing read their outputs

    @property
    def kernel_count(self) -> int:
        return len(self.steps)

    def describe(self) -> str:
        """One line per step: ``s5 = add(s1, s3)``, with the user's line that made it."""
        lines = []
        for step in self.steps:
            args = ", ".join([_show(a) for a in step.args] + [f"{k}={_show(v)}" for k, v in step.kwargs.items()])
            where = f"    # {step.where}" if step.where else ""
            lines.append(f"{_show(step.outs)} = {step.name}({args}){where}")
        return "\n".join(lines)


def _show(template: Any) -> str:
    if isinstance(template, (Ref, Seed, Dyn)):
        return repr(template)
    if type(template) in (list, tuple):
        inner = ", ".join(_show(t) for t in template)
        return f"[{inner}]" if type(template) is list else f"({inner})"
    if type(template) is dict:
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in template.items()) + "}"
    text = repr(template)
    return text if len(text) <= 40 else f"<{type(template).__name__}>"


def build_program(
    slots: list[SlotInfo],
    steps: list[Step],
    inputs: list[int],
    results: list[int],
    seeds: list[Any],
    dynamics: list[Callable[[], float]],
) -> Program:
    """The program computing ``results`` from ``inputs``: the steps that lead to them (and every in-place
    kernel), in recorded order."""
    needed = set(results)
    kept: list[Step] = []
    for step in reversed(steps):
        outs = set(refs_in(step.outs))
        if step.name in IN_PLACE_KERNELS or outs & needed:
            kept.append(step)
            needed |= set(refs_in(step.args)) | set(refs_in(step.kwargs))
    kept.reverse()
    return Program(slots, kept, inputs, results, seeds, dynamics, removed=len(steps) - len(kept))


# --------------------------------------------------------------------------- the reference replay
def reference_runner(
    program: Program, wrap: Callable[[int, Callable[..., Any]], Callable[..., Any]] | None = None
) -> Callable[[Sequence[Any], Sequence[int], Sequence[float]], tuple[Any, ...]]:
    """``run(inputs, seeds, dynamics) -> results``: the program's kernels called back to back.

    One generated Python function: each step is one line calling the kernel (the backend table's callable, as
    eager code calls it, so a backend failure is still a KernelError naming the kernel), each slot a local
    deleted after its last use.  ``inputs`` are the arrays of ``program.inputs``, in order; ``seeds`` and
    ``dynamics`` the values drawn for this replay.  ``wrap(i, kernel)``, where given, is called instead of
    step ``i``'s kernel (a backend runner that records what each step does, a profiler).
    """
    env: dict[str, Any] = {}
    last_use: dict[int, int] = {}
    for i, step in enumerate(program.steps):
        for s in (*refs_in(step.args), *refs_in(step.kwargs)):
            last_use[s] = i
    results = set(program.results)
    lines = ["def run(inputs, seeds, dyn):"]
    if program.inputs:
        names = ", ".join(f"s{s}" for s in program.inputs)
        lines.append(f"    {names}{',' if len(program.inputs) == 1 else ''} = inputs")
    for i, step in enumerate(program.steps):
        fn = getattr(step, "fn", None)
        if fn is None:
            fn = step.table.kernel(step.name) if hasattr(step.table, "kernel") else getattr(step.table, step.name)
        env[f"k{i}"] = fn if wrap is None else wrap(i, fn)
        args = [_render(a, env) for a in step.args]
        args += [f"{k}={_render(v, env)}" for k, v in step.kwargs.items()]
        call = f"k{i}({', '.join(args)})"
        if isinstance(step.outs, Ref):
            lines.append(f"    s{step.outs.slot} = {call}")
        else:
            lines.append(f"    o = {call}")
            lines.extend(f"    s{slot} = o{path}" for slot, path in _paths(step.outs, ""))
        dead = [s for s, last in last_use.items() if last == i and s not in results]
        dead += [s for s in refs_in(step.outs) if s not in last_use and s not in results]
        if dead:
            lines.append(f"    del {', '.join(f's{s}' for s in sorted(set(dead)))}")
    body = ", ".join(f"s{s}" for s in program.results)
    lines.append(f"    return ({body}{',' if len(program.results) == 1 else ''})")
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<captured program>", "exec"), env)
    run: Any = env["run"]
    run.source = source
    return run


def runner_for(program: Program) -> Callable[[Sequence[Any], Sequence[int], Sequence[float]], tuple[Any, ...]]:
    """The backend's own runner for ``program`` (:meth:`ampcore.Backend.capture_runner`) where it offers one and
    all steps run on that backend, else the core's :func:`reference_runner`."""
    tables = {id(step.table): step.table for step in program.steps}
    if len(tables) == 1:
        table = next(iter(tables.values()))
        own = registry.get_backend(table._backend_name).capture_runner(program)
        if own is not None:
            return own
    return reference_runner(program)


def _paths(template: Any, prefix: str) -> Iterator[tuple[int, str]]:
    if isinstance(template, Ref):
        yield template.slot, prefix
    elif type(template) in (list, tuple):
        for i, t in enumerate(template):
            yield from _paths(t, f"{prefix}[{i}]")


def _render(template: Any, env: dict[str, Any]) -> str:
    if isinstance(template, Ref):
        return f"s{template.slot}"
    if isinstance(template, Seed):
        return f"seeds[{template.index}]"
    if isinstance(template, Dyn):
        return f"dyn[{template.index}]"
    t = type(template)
    if t is list:
        return "[" + ", ".join(_render(v, env) for v in template) + "]"
    if t is tuple:
        inner = ", ".join(_render(v, env) for v in template)
        return f"({inner}{',' if len(template) == 1 else ''})"
    if t is dict:
        return "{" + ", ".join(f"{k!r}: {_render(v, env)}" for k, v in template.items()) + "}"
    if template is None or t is bool or t is int or t is str or (t is float and math.isfinite(template)):
        return repr(template)
    name = f"c{len(env)}"
    env[name] = template
    return name
