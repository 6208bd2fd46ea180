"""Fusing a captured program's chains of elementwise kernels into one kernel each, keeping eager's bits.

A chain is a run of elementwise steps (each a registered program of
:mod:`ampcore.expr` made only of correctly rounded functions, or a cast between
float and bool dtypes) whose intermediates nothing else reads.  It becomes one
program, composed with :meth:`ampcore.expr.Program.__call__` (each step's
program applied to the expressions of its operands), with a rounding node
(:data:`ampcore.expr.ROUNDINGS`) wherever eager stores an intermediate in
float16 or bfloat16.  Every function of such a chain is correctly rounded and
computed in float32 (float64 for float64 chains) as eager computes it, each
rounded on its own, so the fused kernel gives eager's bits: fusion changes where
values live, never what they are.  Transcendental functions (exp, tanh, erf,
pow) end a chain: a backend's SIMD implementation and its compiled loop's libm
need not agree on their last bit.

The backend compiles the fused program (:meth:`ampcore.Backend.fused_kernel`,
given each operand's dtype and the result's); a backend that declines keeps the
chain's kernels one by one.

A GEMM's epilogue fuses the same way: where a chain (of one step or more) is the
only reader of a ``matmul``'s or a ``scaled_mm``'s result, the backend may compute
the product and the chain as one kernel (:meth:`ampcore.Backend.fused_gemm_kernel`).
The program it gets reads the product as the float32 result the GEMM kernel
rounds last, and starts with the rounding eager gives a 16-bit result, so a
linear layer's bias, its activation and the autocast casts around it cost no
pass of their own, and keep eager's bits.  ``relaxed=True`` leaves the intermediate roundings
out (faster, fewer passes of rounding code, not bit-identical: opt-in, and
``explain`` says so).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import dtypes as dt
from .. import expr as E
from ..kernels import EPILOGUE_GEMMS
from .program import IN_PLACE_KERNELS, Program, refs_in
from .record import Ref, Step

__all__ = ["FUSIBLE", "FusedStep", "fuse", "MAX_OPERANDS"]

FUSIBLE = frozenset(
    {"add", "sub", "mul", "div", "sqrt", "neg", "abs", "sign", "maximum", "minimum", "select", "and", "or", "not"}
    | E.COMPARISONS
    | set(E.ROUNDINGS)
)
"""The functions a fused chain may hold: correctly rounded or exact, so any backend gives them eager's bits."""

MAX_OPERANDS = 8
_FLOAT32_FAMILY = (dt.float32, dt.float16, dt.bfloat16)
_ROUND = {dt.float16: E.round_float16, dt.bfloat16: E.round_bfloat16}


@dataclass
class _Chain:
    root: E.Expr
    leaves: list[int]  # slots, in operand order
    dtypes: list[Any]  # each leaf's dtype
    steps: list[int]  # indices of the steps it replaces
    family: Any  # float32 or float64: the compute type
    roundings: int = 0
    names: list[str] = field(default_factory=list)


@dataclass
class FusedStep(Step):
    """A fused chain: ``fn`` (the backend's kernel of ``program``) on the chain's operands.

    ``operand_dtypes`` and ``result_dtype`` are what the kernel was compiled for; for a GEMM's epilogue ``gemm``
    names the GEMM kernel (its arguments come first) and ``product_dtype`` its result's dtype (a backend that
    rewrites its own program, as the cpu backend's runner does, compiles the step again from these)."""

    fn: Callable[..., Any] | None = None
    program: Any = None
    replaces: int = 0
    operand_dtypes: tuple[Any, ...] = ()
    result_dtype: Any = None
    gemm: str | None = None
    product_dtype: Any = None


def _family(dtype: Any) -> Any:
    if dtype in _FLOAT32_FAMILY:
        return dt.float32
    if dtype == dt.float64:
        return dt.float64
    return None


def _step_program(step: Step) -> E.Program | None:
    if step.kwargs or step.name in IN_PLACE_KERNELS:
        return None
    prog = E.get(step.name)
    if prog is None or not all(n.op in FUSIBLE for n in prog.nodes):
        return None
    return prog


def fuse(
    program: Program,
    compile_kernel: Callable[..., Any],
    *,
    relaxed: bool = False,
    compile_epilogue: Callable[..., Any] | None = None,
) -> Program:
    """``program`` with each fusible chain of two or more steps replaced by one :class:`FusedStep` whose kernel
    ``compile_kernel(fused_program, operand_dtypes, result_dtype, table)`` returns (None: the chain stays as it
    was; ``table`` is the kernel table of the chain's last step).

    ``compile_epilogue(gemm, fused_program, product_dtype, operand_dtypes, result_dtype, table)``, where given,
    is offered each chain that alone reads a GEMM's result (:func:`_epilogue`) first; None from it leaves the
    GEMM and the chain to fuse as they would without it."""
    slots = program.slots
    uses: dict[int, int] = {}
    for step in program.steps:
        for s in (*refs_in(step.args), *refs_in(step.kwargs)):
            uses[s] = uses.get(s, 0) + 1
    for s in program.results:
        uses[s] = uses.get(s, 0) + 1
    pending: dict[int, _Chain] = {}  # output slot -> the chain ending there (not yet read by another chain)
    closed: list[tuple[int, _Chain]] = []
    for i, step in enumerate(program.steps):
        if step.name in IN_PLACE_KERNELS:  # never fuse across a kernel that may write its inputs in place
            closed += pending.items()
            pending.clear()
            continue
        extended = _extend(step, i, slots, pending, uses, relaxed)
        if extended is None:
            continue
        chain, inlined = extended
        for s in inlined:
            del pending[s]
        assert isinstance(step.outs, Ref)
        pending[step.outs.slot] = chain
    replaced: dict[int, FusedStep] = {}
    drop: set[int] = set()
    fusions: list[str] = []
    products = _products(program.steps, uses) if compile_epilogue is not None else {}
    for slot, chain in [*closed, *pending.items()]:
        sink = chain.steps[-1]
        if products:
            assert compile_epilogue is not None
            epilogue = _epilogue(chain, slot, program.steps, slots, products, compile_epilogue, relaxed)
            if epilogue is not None:
                replaced[sink], gemm = epilogue
                drop |= {gemm, *chain.steps[:-1]}
                fusions.append(_describe(chain, program.steps, relaxed, program.steps[gemm].name))
                continue
        if len(chain.steps) < 2:
            continue
        fused = _compile(chain, slot, slots, compile_kernel, program.steps[sink])
        if fused is None:
            continue
        replaced[sink] = fused
        drop |= set(chain.steps[:-1])
        fusions.append(_describe(chain, program.steps, relaxed))
    steps = [replaced.get(i, step) for i, step in enumerate(program.steps) if i not in drop]
    return Program(
        program.slots,
        steps,
        program.inputs,
        program.results,
        program.seeds,
        program.dynamics,
        fusions,
        program.removed,
    )


def _extend(
    step: Step, index: int, slots: list[Any], pending: dict[int, _Chain], uses: dict[int, int], relaxed: bool
) -> tuple[_Chain, list[int]] | None:
    """The chain ``step`` ends: its own program over its operands, each operand an earlier chain (read only
    here: inlined) or a leaf; and the slots of the chains it inlined.  None if the step is not fusible."""
    out = step.outs
    if not isinstance(out, Ref):
        return None
    out_dtype = slots[out.slot].dtype
    if step.name == "cast":
        if len(step.args) != 2 or not isinstance(step.args[0], Ref):
            return None
        src = slots[step.args[0].slot].dtype
        target = step.args[1]
        if not isinstance(target, dt.DType) or target != out_dtype:
            return None
        apply: Callable[..., E.Expr] | None = _cast(src, target)
        if apply is None:
            return None
        dtypes_in = [src]
    else:
        prog = _step_program(step)
        if prog is None or len(step.args) != prog.arity:
            return None
        apply = prog
        dtypes_in = [slots[a.slot].dtype if isinstance(a, Ref) else None for a in step.args]
    operand_dtypes = [d for d in dtypes_in if d is not None and d != dt.bool_]
    families = {_family(d) for d in operand_dtypes} | ({_family(out_dtype)} if out_dtype != dt.bool_ else set())
    if len(families) != 1 or None in families:
        return None
    family = families.pop()
    leaves: list[int] = []
    leaf_dtypes: list[Any] = []
    steps: list[int] = []
    names: list[str] = []
    roundings = 0
    inputs: list[Any] = []
    inlined: list[int] = []
    args = step.args[:1] if step.name == "cast" else step.args
    for a in args:
        if isinstance(a, Ref):
            inner = pending.get(a.slot)
            if inner is not None and uses.get(a.slot, 0) == 1 and inner.family == family and a.slot not in inlined:
                inlined.append(a.slot)
                mapping = []
                for s, d in zip(inner.leaves, inner.dtypes):
                    if s in leaves:
                        mapping.append(leaves.index(s))
                    else:
                        leaves.append(s)
                        leaf_dtypes.append(d)
                        mapping.append(len(leaves) - 1)
                inputs.append(_relabel(inner.root, mapping))
                steps += inner.steps
                names += inner.names
                roundings += inner.roundings
                continue
            if a.slot not in leaves:
                leaves.append(a.slot)
                leaf_dtypes.append(slots[a.slot].dtype)
            inputs.append(E.Expr("input", (), leaves.index(a.slot)))
        elif isinstance(a, (bool, int, float)):
            inputs.append(E.const(a))
        else:
            return None
    if len(leaves) > MAX_OPERANDS:
        return None
    try:
        root = apply(*inputs)
    except E.ProgramError:
        return None
    if out_dtype in _ROUND and not relaxed:
        root = _ROUND[out_dtype](root)
        roundings += 1
    steps.append(index)
    names.append(step.name)
    return _Chain(root, leaves, leaf_dtypes, sorted(steps), family, roundings, names), inlined


def _cast(src: Any, target: Any) -> Callable[[E.Expr], E.Expr] | None:
    """A cast as an expression over a value already in the compute type (float16/bfloat16 widened exactly)."""
    if src == target:
        return lambda x: x
    if src == dt.bool_ and _family(target) is not None:
        return lambda x: E.select(x, 1.0, 0.0)
    if target == dt.bool_ and _family(src) is not None:
        return lambda x: E.ne(x, 0.0)
    if _family(src) is not None and _family(src) == _family(target):
        return lambda x: x  # widening is exact; narrowing is the rounding node the caller adds
    return None


def _relabel(root: E.Expr, mapping: list[int]) -> E.Expr:
    """``root`` with input ``i`` renamed ``mapping[i]`` (shared nodes stay shared)."""
    return _substitute(root, [E.Expr("input", (), m) for m in mapping])


def _compile(
    chain: _Chain, slot: int, slots: list[Any], compile_kernel: Callable[..., Any], sink: Step
) -> FusedStep | None:
    try:
        prog = E.Program(f"fused_{len(chain.steps)}", _kinds(chain.dtypes), chain.root)
    except E.ProgramError:
        return None
    fn = compile_kernel(prog, list(chain.dtypes), slots[slot].dtype, sink.table)
    if fn is None:
        return None
    return FusedStep(
        sink.table,
        f"fused[{'+'.join(chain.names)}]",
        tuple(Ref(s) for s in chain.leaves),
        {},
        Ref(slot),
        sink.where,
        fn=fn,
        program=prog,
        replaces=len(chain.steps),
        operand_dtypes=tuple(chain.dtypes),
        result_dtype=slots[slot].dtype,
    )


def _kinds(dtypes: list[Any]) -> str:
    """A fused program's operand kinds: ``b`` for a bool operand, ``T`` for one of the compute type's family."""
    return "".join("b" if d == dt.bool_ else "T" for d in dtypes)


def _describe(chain: _Chain, steps: list[Step], relaxed: bool, gemm: str | None = None) -> str:
    rounding = (
        "intermediate roundings dropped (relaxed)"
        if relaxed
        else f"{chain.roundings} rounding{'s' if chain.roundings != 1 else ''} to 16 bits kept"
    )
    where = steps[chain.steps[-1]].where
    names = [gemm, *chain.names] if gemm else chain.names
    what = "kernels as one, a GEMM with its epilogue" if gemm else "kernels as one"
    return f"{' -> '.join(names)}: {len(names)} {what} ({rounding})" + (f"  # {where}" if where else "")


# --------------------------------------------------------------------------- GEMM epilogues
def _products(steps: list[Step], uses: dict[int, int]) -> dict[int, int]:
    """Slot -> index of each GEMM step (:data:`ampcore.kernels.EPILOGUE_GEMMS`) whose result one read alone uses."""
    found: dict[int, int] = {}
    for i, step in enumerate(steps):
        if (
            EPILOGUE_GEMMS.get(step.name) == len(step.args)
            and not step.kwargs
            and isinstance(step.outs, Ref)
            and all(isinstance(a, Ref) for a in step.args[:2])
            and uses.get(step.outs.slot, 0) == 1
        ):
            found[step.outs.slot] = i
    return found


def _epilogue(
    chain: _Chain,
    slot: int,
    steps: list[Step],
    slots: list[Any],
    products: dict[int, int],
    compile_epilogue: Callable[..., Any],
    relaxed: bool,
) -> tuple[FusedStep, int] | None:
    """The GEMM a chain reads and the chain as one :class:`FusedStep` (operands: the GEMM's own arguments, then
    the chain's other leaves), with the GEMM's index; None where no product qualifies or the backend declines."""
    for j, leaf in enumerate(chain.leaves):
        at = products.get(leaf)
        if at is None or _family(slots[leaf].dtype) != chain.family:
            continue
        if any(steps[k].name in IN_PLACE_KERNELS for k in range(at + 1, chain.steps[-1])):
            continue  # the fused kernel reads the GEMM's operands where the chain ends: none may change first
        gemm, sink = steps[at], steps[chain.steps[-1]]
        if getattr(gemm.table, "_backend_name", None) != getattr(sink.table, "_backend_name", None):
            continue  # a product made on another backend than the chain's: one backend's kernel cannot do both
        product_dtype = slots[leaf].dtype
        others = [k for k in range(len(chain.leaves)) if k != j]
        product = E.Expr("input", (), 0)
        if product_dtype in _ROUND and not relaxed:
            product = _ROUND[product_dtype](product)
        inputs = [product if k == j else E.Expr("input", (), 1 + others.index(k)) for k in range(len(chain.leaves))]
        operand_dtypes = [chain.family, *(chain.dtypes[k] for k in others)]
        try:
            prog = E.Program(f"epilogue_{len(chain.steps)}", _kinds(operand_dtypes), _substitute(chain.root, inputs))
        except E.ProgramError:
            return None
        fn = compile_epilogue(gemm.name, prog, product_dtype, operand_dtypes, slots[slot].dtype, sink.table)
        if fn is None:
            return None
        fused = FusedStep(
            sink.table,
            f"fused[{gemm.name}+{'+'.join(chain.names)}]",
            (*gemm.args, *(Ref(chain.leaves[k]) for k in others)),
            {},
            Ref(slot),
            sink.where,
            fn=fn,
            program=prog,
            replaces=len(chain.steps) + 1,
            operand_dtypes=tuple(operand_dtypes),
            result_dtype=slots[slot].dtype,
            gemm=gemm.name,
            product_dtype=product_dtype,
        )
        return fused, at
    return None


def _substitute(root: E.Expr, inputs: list[E.Expr]) -> E.Expr:
    """``root`` with input ``i`` replaced by the expression ``inputs[i]`` (shared nodes stay shared)."""
    done: dict[E.Expr, E.Expr] = {}

    def sub(node: E.Expr) -> E.Expr:
        if node.is_input:
            return inputs[node.value]
        if node.is_const:
            return node
        if node not in done:
            done[node] = E.Expr(node.op, tuple(sub(a) for a in node.args))
        return done[node]

    return sub(root)
