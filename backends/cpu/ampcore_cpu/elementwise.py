"""The cpu backend's ``elementwise`` primitive: every program (:mod:`ampcore.expr`) as NumPy ufuncs, and as one
compiled pass for float16/bfloat16 where its functions allow (:mod:`.loops`).

float32 and float64 programs run their ufuncs in their own dtype, each node rounded on its own, as the ops
would one kernel at a time; integers wrap as NumPy does.  float16/bfloat16 operands are widened to float32,
the program runs there and the result is rounded once.  A program that is one function on its operands in
order (``exp``, ``add``) is that ufunc itself, with no wrapper of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ampcore import expr as E
from ampcore.expr import NUMPY, direct_call, evaluator

from . import kernels as K
from . import loops

__all__ = ["FUNCTIONS", "elementwise"]


# erf in float64 (Cephes), rounded once to the program's dtype by the caller; sign keeps a bool a bool.
FUNCTIONS: dict[str, Callable[..., Any]] = {**NUMPY, "erf": K._erf, "sign": K._sign}
"""Each function of the expression language on NumPy arrays, as this backend computes it."""


def elementwise(prog: E.Program) -> Callable[..., Any]:
    """The kernel of ``prog`` on NumPy arrays (the contract's ``elementwise`` primitive)."""
    direct = direct_call(prog)
    if direct == "select":
        return K.where  # stored bits selected: NaN payloads and signed zeros kept, no widening
    fn = FUNCTIONS[direct] if direct is not None else evaluator(prog, FUNCTIONS)
    if prog.result == "b":
        return K._compare(fn, loops.loop(prog))
    if prog.arity == 1:
        return K._quiet(K._lowp_unary(fn))
    if prog.arity == 2:
        return K._quiet(K._lowp_binary(fn, loops.loop(prog)))
    return K._quiet(K._lowp(fn, loops.loop(prog)))
