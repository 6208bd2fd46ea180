"""Programs as Python functions over a backend's array functions: how NumPy-like backends render them.

:func:`evaluator` writes a program out as the source of one Python function
that calls, for each node, the array function a table gives for its
:data:`~ampcore.expr.FUNCTIONS` name (``{"add": np.add, "exp": np.exp,
"select": np.where, ...}``), with constants as Python numbers (so NumPy takes
them as weak scalars: a float32 array stays float32).  The function is made
once per program and table; calling it costs the array calls alone.

:data:`NUMPY` is the table for NumPy arrays; the float64 references of the
conformance suite and the cpu, fake and Array API backends start from it and
replace the entries they compute differently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import ml_dtypes
import numpy as np

from .ir import FUNCTIONS, Expr, Program

__all__ = ["NUMPY", "evaluator", "direct_call"]


def _sign(x: Any) -> Any:
    return np.sign(x) if getattr(x, "dtype", None) != np.bool_ else x.copy()


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x: Any) -> Any:
    """erf in float64 (math.erf per element, correctly rounded to ~1 ulp): NumPy has no erf ufunc."""
    x = np.asarray(x, np.float64)
    return _ERF(x) if x.size else np.zeros(x.shape)


def _rounding(dtype: Any) -> Callable[[Any], Any]:
    def round_to(x: Any) -> Any:
        x = np.asarray(x)
        return x.astype(dtype).astype(x.dtype)

    return round_to


NUMPY: dict[str, Callable[..., Any]] = {
    "neg": np.negative,
    "abs": np.abs,
    "sign": _sign,
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "sqrt": np.sqrt,
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "erf": _erf,
    "sin": np.sin,
    "cos": np.cos,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "select": np.where,
    "and": np.logical_and,
    "or": np.logical_or,
    "not": np.logical_not,
    "round_float16": _rounding(np.float16),
    "round_bfloat16": _rounding(ml_dtypes.bfloat16),
}
"""Each function of the expression language as NumPy computes it (erf: math.erf in float64)."""


def _leaf(node: Expr, env: dict[str, Any]) -> str:
    if node.is_input:
        return f"x{node.value}"
    value = node.value
    if isinstance(value, float) and not math.isfinite(value):
        name = f"c{len(env)}"
        env[name] = value
        return name
    return repr(value)


def direct_call(prog: Program) -> str | None:
    """The one function ``prog`` calls when it is a single call on its operands in order (``add(x0, x1)``),
    else None: a backend may then use that function itself, without a wrapper."""
    root = prog.root
    if len(prog.nodes) == 1 and all(a.is_input and a.value == i for i, a in enumerate(root.args)):
        if len(root.args) == prog.arity:
            return root.op
    return None


def evaluator(prog: Program, table: Mapping[str, Callable[..., Any]], name: str | None = None) -> Callable[..., Any]:
    """A Python function of ``prog.arity`` operands computing ``prog`` with ``table``'s functions.

    A node used more than once is computed once, into a local.  KeyError names
    a function the table lacks.
    """
    missing = sorted({n.op for n in prog.nodes} - set(table))
    if missing:
        raise KeyError(f"no array function for {', '.join(missing)} (program {prog.name!r})")
    env: dict[str, Any] = {f"f_{fn}": table[fn] for fn in {n.op for n in prog.nodes} if fn in FUNCTIONS}
    names: dict[Expr, str] = {}
    lines: list[str] = []

    def text(node: Expr) -> str:
        if node in names:
            return names[node]
        if not node.args:
            return _leaf(node, env)
        return f"f_{node.op}({', '.join(text(a) for a in node.args)})"

    for i, node in enumerate(prog.nodes):
        if prog.uses.get(node, 0) > 1 and node is not prog.root:
            lines.append(f"    t{i} = {text(node)}")
            names[node] = f"t{i}"
    lines.append(f"    return {text(prog.root)}")
    fname = name or prog.name
    params = ", ".join(f"x{i}" for i in range(prog.arity))
    source = f"def {fname}({params}):\n" + "\n".join(lines) + "\n"
    namespace: dict[str, Any] = dict(env)
    exec(compile(source, f"<program {prog.name}>", "exec"), namespace)
    fn = namespace[fname]
    fn.__doc__ = f"The program {prog.name!r}: {prog.key}"
    fn.source = source
    return fn
