"""``ampcore.compiler.explain``: what capturing a call would record, and every reason it could not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..capture import CompiledFunction
from ..capture.record import Break

__all__ = ["Explanation", "explain"]


@dataclass
class Explanation:
    """What one call recorded (torch's ``ExplainOutput``, with ampcore's own fields).

    ``graph_count`` is 1 when the call can be replayed whole, 0 when it breaks (a call that breaks runs
    eagerly: ampcore does not split a function at a break); ``break_reasons`` lists every break with the line
    that caused it; ``kernels`` counts the replayed kernel calls (after fusion), ``fused`` describes each fused
    chain, ``removed`` the kernel calls nothing read, ``uploads`` the arrays made from host data inside the call
    (replayed as the recorded constants), ``seeds`` the random seeds a replay draws again, ``dynamic`` the host
    numbers it reads again (a learning rate), ``relaxed`` whether fusion may drop eager's intermediate roundings
    (``options={"relaxed": True}``: not bit-identical to eager), ``runner`` what replays the program (the
    backend's own runner, :meth:`ampcore.Backend.capture_runner`, or the core's), and ``program`` the recorded
    steps.
    """

    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list[Break] = field(default_factory=list)
    kernels: int = 0
    fused: list[str] = field(default_factory=list)
    removed: int = 0
    uploads: int = 0
    seeds: int = 0
    dynamic: int = 0
    relaxed: bool = False
    backward_kernels: list[int] = field(default_factory=list)
    runner: str = ""
    program: str = ""

    @property
    def ops_per_graph(self) -> list[int]:
        """torch's field: kernel calls per captured program (one program, or none)."""
        return [self.kernels] if self.graph_count else []

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            lines += [
                f"  Break Reason {i + 1}: {b.reason}\n    at {b.where}" + (f"\n      {b.line}" if b.line else "")
                for i, b in enumerate(self.break_reasons)
            ]
        if self.graph_count:
            lines.append(f"Kernels replayed: {self.kernels} ({self.removed} recorded calls nothing read were dropped)")
            if self.runner:
                lines.append(f"Replayed by: {self.runner}")
            for i, n in enumerate(self.backward_kernels):
                lines.append(f"Backward of output {i}: {n} kernels, replayed by one autograd node")
            if self.fused:
                lines.append(
                    f"Fused chains: {len(self.fused)}"
                    + (
                        " (relaxed: intermediate roundings dropped, not bit-identical to eager)"
                        if self.relaxed
                        else " (each rounds where eager rounds)"
                    )
                )
                lines += [f"  {f}" for f in self.fused]
            if self.seeds:
                lines.append(f"Random seeds drawn again per replay: {self.seeds}")
            if self.dynamic:
                lines.append(f"Host numbers read again per replay (learning rates): {self.dynamic}")
            if self.uploads:
                lines.append(f"Arrays uploaded from host data inside the call (replayed as constants): {self.uploads}")
        return "\n".join(lines)


def explain(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` as a compiled function's first two calls run it (eagerly: a warm-up, which
    makes any state the function creates lazily, then the recorded call) and return an :class:`Explanation` of
    the recording.  ``explain(fn)`` alone returns a function of the arguments (torch's
    ``torch._dynamo.explain(fn)(*args)`` form).  ``fn`` may be a compiled module or function: its original is
    explained."""
    if not args and not kwargs:
        return lambda *a, **k: explain(fn, *a, **k)
    target = getattr(fn, "_orig_mod", None)
    if target is not None:
        compiled = CompiledFunction(
            target.__call__,
            module=target,
            warmup=1,
            name=type(target).__name__,
            options=getattr(fn, "_compiled").options,  # noqa: B009 - fn is typed as a plain callable
        )
    else:
        inner = getattr(fn, "_compiled", None)
        original = inner.fn if inner is not None else fn
        compiled = CompiledFunction(original, warmup=1, options=inner.options if inner is not None else None)
    compiled(*args, **kwargs)  # the warm-up
    compiled(*args, **kwargs)  # the recording
    entry = next(iter(compiled.entries.values()), None)
    out = Explanation()
    if entry is None:
        return out
    out.break_reasons = list(entry.breaks)
    out.graph_break_count = len(entry.breaks)
    program = entry.program
    if program is None:
        return out
    out.graph_count = 1
    out.kernels = program.kernel_count
    out.fused = list(program.fusions)
    out.removed = program.removed
    out.uploads = entry.uploads
    out.seeds = len(program.seeds)
    out.dynamic = len(program.dynamics)
    out.relaxed = bool(compiled.options.get("relaxed"))
    out.backward_kernels = [bp.program.kernel_count for bp, _ in entry.backward]
    out.runner = _runner(entry.run)
    out.program = program.describe()
    return out


def _runner(run: Any) -> str:
    """What replays a program, in words: a backend runner's ``description`` (or its repr), or the core's."""
    if getattr(run, "source", None) is not None:  # the reference runner's generated function
        return "the core's reference runner (kernel by kernel)"
    return str(getattr(run, "description", None) or repr(run))
