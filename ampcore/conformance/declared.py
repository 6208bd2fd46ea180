"""The conformance suite's view of the op registry (:mod:`ampcore.ops.declare`): which elementwise ops there are,
their float64 references, input domains and error bounds, so a newly declared op is checked, forward, backward
and under autocast, on every backend, with no edit to the suite.

Each declared elementwise op's reference is its declaration's ``reference``, or else its program evaluated in
float64 (:func:`ampcore.expr.evaluator`): with NumPy's functions for values (:func:`value_reference`: NaN and
infinities as NumPy gives them), and with complex-step-safe ones for gradients (:func:`complex_reference`: the
piecewise functions decide on the real part and carry the imaginary part to first order, see
:mod:`.op_reference`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import expr as E
from ..ops import declare
from . import op_reference as R

__all__ = [
    "COMPLEX_SAFE",
    "elementwise_ops",
    "unary_ops",
    "binary_ops",
    "comparison_ops",
    "integer_ops",
    "composite_ops",
    "exact_ops",
    "value_reference",
    "complex_reference",
    "domain",
    "scalar_in",
]


def _real(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A comparison of real parts (NumPy orders complex numbers by real, then imaginary part)."""
    return lambda a, b: fn(np.real(a), np.real(b))


COMPLEX_SAFE: dict[str, Callable[..., Any]] = {
    **E.NUMPY,
    "abs": R.abs_,
    "sign": R.sign,
    "maximum": R.maximum,
    "minimum": R.minimum,
    "erf": R.erf,
    **{name: _real(E.NUMPY[name]) for name in E.COMPARISONS},
    "select": lambda c, a, b: np.where(np.real(c) != 0, a, b),
}
"""The functions of the expression language, safe for complex-step differentiation."""


def elementwise_ops(inputs: str | None = None, result: str | None = None) -> list[str]:
    """The declared elementwise ops (with operands of ``inputs`` kinds and a ``result`` kind, where given)."""
    return sorted(
        name
        for name, d in declare.declarations().items()
        if d.program is not None
        and (inputs is None or d.program.inputs == inputs)
        and (result is None or d.program.result == result)
    )


def unary_ops() -> list[str]:
    """One value in, a value out: exp, sigmoid, relu, ..."""
    return elementwise_ops("T", "T")


def binary_ops() -> list[str]:
    """Two values in (broadcasting, a Python number for either), a value out: add, pow, maximum, ..."""
    return elementwise_ops("TT", "T")


def comparison_ops() -> list[str]:
    """Two values in, a bool out."""
    return elementwise_ops("TT", "b")


def composite_ops() -> list[str]:
    """The declared composite ops with an example and a reference: the suite checks each."""
    return sorted(name for name, d in declare.declarations().items() if d.kind == "composite" and d.example is not None)


def integer_ops(names: list[str]) -> list[str]:
    """Those of ``names`` defined on integer dtypes (the core calls them on int32/int64 arrays)."""
    return [n for n in names if _program(n).ints]


def exact_ops(names: list[str]) -> list[str]:
    """Those of ``names`` that round nothing (neg, abs, sign, relu, maximum, minimum, where): their results are
    operand values, bit for bit, subnormals included."""
    return [n for n in names if _program(n).roundings == 0]


def _program(name: str) -> E.Program:
    decl = declare.get(name)
    if decl is None or decl.program is None:
        raise KeyError(f"{name!r} is not a declared elementwise op")
    return decl.program


@functools.cache
def value_reference(name: str) -> Callable[..., Any]:
    """The float64 reference of ``name`` on real values: its declaration's, or its program with NumPy's
    functions (the cpu backend's own table is not used: an independent evaluation)."""
    decl = declare.get(name)
    assert decl is not None
    if decl.reference is not None:
        return decl.reference
    return E.evaluator(_program(name), E.NUMPY, name=f"{name}_reference")


@functools.cache
def complex_reference(name: str) -> Callable[..., Any]:
    """The float64 reference of ``name`` that complex-step differentiation may perturb (:mod:`.op_reference`)."""
    decl = declare.get(name)
    assert decl is not None
    if decl.reference is not None:
        return decl.reference
    return E.evaluator(_program(name), COMPLEX_SAFE, name=f"{name}_complex_reference")


def domain(name: str, i: int) -> declare.Domain:
    """Where operand ``i`` of ``name`` is drawn."""
    decl = declare.get(name)
    assert decl is not None
    return decl.domains[i] if i < len(decl.domains) else declare.Domain()


def scalar_in(name: str, i: int, integer: bool = False) -> float | int:
    """A Python number inside operand ``i``'s domain, exact in every dtype (a multiple of 1/4; an int for an
    integer dtype): what a check passes for that operand as a scalar."""
    d = domain(name, i)
    middle = (d.lo + d.hi) / 2 + (d.hi - d.lo) / 8  # off the centre: not 0 for a symmetric domain
    if integer:
        return max(int(round(middle)), 2) if d.lo >= 0 else int(round(middle)) or 3
    value = round(middle * 4) / 4 or 0.75
    return value if not d.signed else max(value, 0.5)
