"""A captured program's float16 and bfloat16 values kept widened in float32, where every kernel that reads them
takes them so.

This CPU has no float16 arithmetic: each kernel widens its float16 operands to float32 on the way in and rounds
its result back on the way out (:mod:`.kernels`).  Inside a captured program a value another kernel of the
same program reads is widened once per reader, and the value a fused loop stored in 2 bytes is read back and
widened again.  Here such a value is stored as its float32 widening instead (exactly the same number: every
float16 is a float32): its producer rounds to float16 and widens in the same pass (a fused chain's last
rounding node, or a cast's), and its readers load float32.  The bits of every value are eager's; only where a
value lives changes, as with fusion.

A value is kept widened only where its producer and every reader are among the kernels below, it is neither
an input nor a result of the program (those keep the dtype their tensors have), and the GEMM path is the
widened sgemm (where oneMKL's float16 GEMM runs, it reads 2-byte operands as they are):

- producers: a fused chain or GEMM epilogue whose program ends in its float16 rounding; a float32 -> float16
  ``cast``; a ``matmul`` (its product rounded and widened in one pass); a float16 ``sum``; ``reshape`` and
  ``transpose`` of a kept value;
- readers: a fused chain's operand; a ``matmul``'s or a matmul epilogue's operand (its product is then sgemm's
  on the same float32 values the widened path makes, laid out as its copy would be: BLAS sums a transposed
  operand in another order); a ``sum``, whose reduction then runs on the float32 value its float16 path widens to;
  ``reshape`` and ``transpose``, whose result is kept too.  A value a view made is read widened only by a
  GEMM: elsewhere its float32 copy's memory order, and so a result's, could differ.

bfloat16 values take part in the same way (:func:`widen_bfloat16`), but never through a ``sum``: bfloat16's
reduces the 2-byte array with NumPy's buffered casting, whose order a float32 reduction need not repeat.  Its
widening is only a shift, but a pass all the same: on ``ampcore bench``'s mlp, widening bfloat16 took the
captured bfloat16 AMP step from 14.39 to 13.80 ms, 0.91x to 0.95x the captured float32 step's speed (2-core AMD
EPYC Zen 5, the three interleaved in one process).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import dtypes as dt
from ampcore import expr as E
from ampcore.capture import FusedStep, Program, Ref, Step, refs_in
from ampcore.kernels import EPILOGUE_GEMMS

from . import compiled, fusion, halfconv, kernels
from .kernels import BF16, BLOCKED_GEMM_ELEMENTS, F16, F32, _down, _up

__all__ = ["widen_16bit", "widen_float16", "widen_bfloat16"]

_VIEWS = ("reshape", "transpose")


def widen_16bit(program: Program) -> Program | None:
    """``program`` with its float16 and its bfloat16 values kept widened where they may be, or None where none
    are."""
    widened = widen_float16(program) or program
    widened = widen_bfloat16(widened) or widened
    return None if widened is program else widened


def widen_float16(program: Program) -> Program | None:
    """``program`` with the float16 values it may keep in float32 kept so (see the module docstring), or None
    where it keeps none (or numba is off: the NumPy fallback's kernels gain nothing from it)."""
    return _widen(program, dt.float16)


def widen_bfloat16(program: Program) -> Program | None:
    """:func:`widen_float16` for bfloat16 values (no ``sum`` takes part)."""
    return _widen(program, dt.bfloat16)


def _widen(program: Program, dtype: Any) -> Program | None:
    if not compiled.status().enabled or kernels.gemm_choice(dtype.numpy).mkl:
        return None
    steps, slots = program.steps, program.slots
    producer: dict[int, int] = {}
    readers: dict[int, list[tuple[int, int]]] = {}
    for i, step in enumerate(steps):
        if isinstance(step.outs, Ref):
            producer[step.outs.slot] = i
        for position, arg in enumerate(step.args):
            if isinstance(arg, Ref):
                readers.setdefault(arg.slot, []).append((i, position))
            else:  # an operand inside a list (cat's, the optimizer's): the kernel takes it as it is
                for s in refs_in(arg):
                    readers.setdefault(s, []).append((i, -1))
        for s in refs_in(step.kwargs):
            readers.setdefault(s, []).append((i, -1))  # a keyword operand: never kept widened
    fixed = set(program.inputs) | set(program.results)
    kept = {
        s
        for s, i in producer.items()
        if s not in fixed and slots[s].dtype == dtype and _produces(steps[i], slots, dtype)
    }
    changed = True
    while changed:  # drop a value a reader cannot take widened, and a view's result whose source was dropped
        changed = False
        for s in sorted(kept):
            step = steps[producer[s]]
            view_of_dropped = step.name in _VIEWS and step.args[0].slot not in kept
            reads = readers.get(s, [])
            if view_of_dropped or not all(
                _reads(steps[i], p, s, kept, slots, producer, steps, dtype) for i, p in reads
            ):
                kept.discard(s)
                changed = True
    if not kept:
        return None
    new_steps = [_rewrite(step, kept, dtype) for step in steps]
    new_slots = [dataclasses.replace(info, dtype=dt.float32) if s in kept else info for s, info in enumerate(slots)]
    return dataclasses.replace(program, slots=new_slots, steps=new_steps)


# --------------------------------------------------------------------------- which steps take part
def _ends_rounded(step: FusedStep, dtype: Any) -> bool:
    """Whether a fused program's result is its own rounding to ``dtype`` (not so in the relaxed mode)."""
    return step.program is not None and step.program.root.op == f"round_{dtype.name}"


def _produces(step: Step, slots: list[Any], dtype: Any) -> bool:
    if isinstance(step, FusedStep):
        return _ends_rounded(step, dtype)
    if step.name == "cast":
        return isinstance(step.args[0], Ref) and slots[step.args[0].slot].dtype == dt.float32
    if step.name == "sum":
        return dtype == dt.float16 and isinstance(step.args[0], Ref) and slots[step.args[0].slot].dtype == dtype
    if step.name == "matmul":
        return len(step.args) == 2 and not step.kwargs and _widenable_gemm(step, slots, dtype)
    return step.name in _VIEWS


def _widenable_gemm(step: Step, slots: list[Any], dtype: Any) -> bool:
    """Whether a matmul's (or a matmul epilogue's) operands are both ``dtype`` slots small enough for the
    widened path's one product (a larger one goes block by block, rounding each block)."""
    a, b = step.args[0], step.args[1]
    if not (isinstance(a, Ref) and isinstance(b, Ref)):
        return False
    sizes = [np.prod(slots[r.slot].shape or ()) for r in (a, b)]
    return all(slots[r.slot].dtype == dtype for r in (a, b)) and max(sizes) < BLOCKED_GEMM_ELEMENTS


def _reads(
    step: Step,
    position: int,
    slot: int,
    kept: set[int],
    slots: list[Any],
    producer: dict[int, int],
    steps: list[Step],
    dtype: Any,
) -> bool:
    """Whether ``step`` can take its operand at ``position`` (``slot``) as float32."""
    if position < 0:
        return False
    from_view = steps[producer[slot]].name in _VIEWS
    if isinstance(step, FusedStep):
        if step.gemm is None or position >= EPILOGUE_GEMMS[step.gemm]:
            # one of the chain's own operands: not a view, whose float32 copy's layout (and so the chain's
            # result's, where it falls back to NumPy's ufuncs) could differ from the widened float16 one's
            return not from_view
        return step.gemm == "matmul" and _widenable_gemm(step, slots, dtype)
    if step.name == "matmul":
        return position < 2 and len(step.args) == 2 and not step.kwargs and _widenable_gemm(step, slots, dtype)
    if step.name == "sum":
        return dtype == dt.float16 and not from_view
    if step.name in _VIEWS:
        return position == 0 and isinstance(step.outs, Ref) and step.outs.slot in kept
    return False


# --------------------------------------------------------------------------- the rewritten steps
def _rewrite(step: Step, kept: set[int], dtype: Any) -> Step:
    out_kept = isinstance(step.outs, Ref) and step.outs.slot in kept
    in_kept = [isinstance(a, Ref) and a.slot in kept for a in step.args]
    if not out_kept and not any(in_kept):
        return step
    if isinstance(step, FusedStep):
        return _refused(step, in_kept, out_kept, dtype.numpy)
    if step.name == "cast":
        return _step(step, "widened[cast]", _cast(_rounding(step.args[1]), dtype.numpy))
    if step.name == "sum":
        return _step(step, "widened[sum]", _sum(out_kept))
    if step.name == "matmul":
        return _step(step, "widened[matmul]", _matmul(_rounding(dtype) if out_kept else None, dtype.numpy))
    return step  # a view: the same kernel on the float32 value


def _step(step: Step, name: str, fn: Callable[..., Any]) -> FusedStep:
    return FusedStep(step.table, name, step.args, step.kwargs, step.outs, step.where, fn=fn, replaces=1)


def _refused(step: FusedStep, in_kept: list[bool], out_kept: bool, low: np.dtype) -> FusedStep:
    """``step`` compiled again for its float32 operands and result."""
    result = dt.float32 if out_kept else step.result_dtype
    if step.gemm is None:
        dtypes = [dt.float32 if k else d for k, d in zip(in_kept, step.operand_dtypes)]
        fn = fusion.fused_kernel(step.program, dtypes, result)
    else:
        arity = EPILOGUE_GEMMS[step.gemm]
        rest = [dt.float32 if k else d for k, d in zip(in_kept[arity:], step.operand_dtypes[1:])]
        dtypes = [step.operand_dtypes[0], *rest]
        fn = fusion.fused_gemm_kernel(step.gemm, step.program, step.product_dtype, dtypes, result)
        if fn is not None and any(in_kept[:2]):
            fn = _widened_operands(fn, low)
    assert fn is not None, f"the cpu backend compiled {step.name} before and must again"
    return dataclasses.replace(step, fn=fn, result_dtype=result)


def _widened_operands(fn: Callable[..., Any], low: np.dtype) -> Callable[..., Any]:
    """A matmul epilogue whose GEMM operands may come kept in float32: both as float32 on the widened path (the
    float32 copies it would make), both as ``low`` where oneMKL's GEMM runs now (another thread count)."""

    def kernel(a: np.ndarray, b: np.ndarray, *rest: Any) -> Any:
        if kernels.gemm_choice(low).mkl:
            return fn(_narrow(a, low), _narrow(b, low), *rest)
        return fn(_as_widened(a, low), _as_widened(b, low), *rest)

    return kernel


def _narrow(x: np.ndarray, low: np.dtype) -> np.ndarray:
    return _down(x, low) if x.dtype == F32 else x  # exact: a kept value is a 16-bit value widened


def _as_widened(x: np.ndarray, low: np.dtype) -> np.ndarray:
    """A GEMM operand as the widened path's float32 copy of its 16-bit value would be laid out (:func:`._up`):
    BLAS sums a transposed operand in another order than a contiguous one, so the layout must be the copy's.
    A C- or F-contiguous value is as its copy would be; another view is copied as ``_up`` copies it: in the
    same memory order (ml_dtypes' cast: every bfloat16 one, float16 below :data:`.halfconv.SMALL_UP` elements),
    else in C order."""
    if x.dtype != F32:
        return _up(x)
    if x.flags.c_contiguous or x.flags.f_contiguous:
        return x
    return x.astype(F32) if low == BF16 or x.size < halfconv.SMALL_UP else np.ascontiguousarray(x)


def _rounding(target: Any) -> Callable[[np.ndarray], np.ndarray]:
    """float32 -> ``target`` (float16 or bfloat16) -> float32 in one compiled pass (the cast's rounding, kept
    widened)."""
    rounding = {dt.float16: E.round_float16, dt.bfloat16: E.round_bfloat16}[target]
    prog = E.Program("widened_cast", "T", rounding(E.Expr("input", (), 0)))
    fn = fusion.fused_kernel(prog, [dt.float32], dt.float32)
    assert fn is not None
    return fn


def _cast(rounding: Callable[[np.ndarray], np.ndarray], low: np.dtype) -> Callable[..., np.ndarray]:
    """The cast kept widened, laid out as the cast's own result (a C-contiguous copy of a C-contiguous source;
    another source's layout is the cast kernel's, which its widening keeps)."""

    def widened_cast(x: np.ndarray, dtype: Any) -> np.ndarray:
        if x.flags.c_contiguous:
            return rounding(x)  # one compiled pass, C-contiguous as the cast's result
        return _up(_down(x, low))

    return widened_cast


def _matmul(rounding: Callable[[np.ndarray], np.ndarray] | None, low: np.dtype) -> Callable[..., np.ndarray]:
    """A 16-bit matmul whose operands or product are kept widened: sgemm on the float32 operands the widened
    path makes (laid out as its copies), rounded once to ``low`` and widened again where the product is kept
    (``rounding``, one compiled pass); the 16-bit operands where oneMKL's GEMM runs now."""

    def widened_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if kernels.gemm_choice(low).mkl:
            product = kernels.matmul(_narrow(a, low), _narrow(b, low))
            return product if rounding is None else _up(product)
        sums = kernels.matmul(_as_widened(a, low), _as_widened(b, low))
        return _down(sums, low) if rounding is None else rounding(sums)

    return widened_matmul


def _sum(out_kept: bool) -> Callable[..., np.ndarray]:
    """A float16 sum of a float32-kept value: the backend's float32 sum of it (the reduction its float16 path
    runs on its widened copy) rounded to float16, kept widened or not; a float16 operand takes that path."""

    def widened_sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        summed = kernels.reduce_sum(x, axes, keepdims)
        rounded = summed if summed.dtype == F16 else _down(summed, F16)
        return _up(rounded) if out_kept else rounded

    return widened_sum
