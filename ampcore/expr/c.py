"""Programs as C: the statements an OpenCL C or CUDA C kernel computes a program with.

:func:`render` turns a :class:`~ampcore.expr.Program` into C statements over
operand expressions already in their compute type, one ``const`` local per
call (the compiler folds them; a node used twice is computed once), and the
local holding the result.  Loading operands and storing the result (the
16-bit conversions, rounded once) stay the backend's kernel template's, with
:func:`ampcore.cgen.load` and :func:`ampcore.cgen.store`.

The spellings follow IEEE and NumPy: integer arithmetic wraps (through the
unsigned type, never C's undefined signed overflow), ``maximum``/``minimum``
propagate NaN from either side and give the second operand on a tie,
``sign`` gives +-1, +-0 and NaN for themselves.  A backend passes
``overrides`` for a function it computes differently on its device (the
opencl backend's float32 ``erf`` in double, the cuda backend's ``log`` of a
negative subnormal), each with its reason beside it.

:func:`fused` is the body of a captured step's fused chain
(:meth:`ampcore.Backend.fused_kernel`), the same for every C dialect: each
operand loaded with its own dtype (widened exactly), the program's locals, the
result stored rounded once.  Each backend puts it in its own kernel template
(the indexing, the launch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .. import cgen
from ..cgen import Dialect
from .ir import Expr, Program

__all__ = ["Rendered", "Override", "render", "is_integer", "constant", "Fused", "FUSED_TAGS", "fused"]

Override = Callable[[Sequence[str], str], "str | None"]
"""``(argument expressions, compute type) -> C expression``, or None to keep the default spelling."""


@dataclass(frozen=True)
class Rendered:
    """``lines`` (C statements, each a declaration of one local), ``result`` (the C expression of the
    program's value) and ``helpers`` (C functions the lines call, to put before the kernel)."""

    lines: tuple[str, ...]
    result: str
    helpers: str


def is_integer(d: Dialect, compute: str) -> bool:
    """Whether ``compute`` is an integer type of dialect ``d`` (arithmetic wraps)."""
    return compute in ("int", d.i64)


def _unsigned(d: Dialect, compute: str) -> str:
    return d.u32 if compute == "int" else d.u64


def constant(d: Dialect, compute: str, value: float | int | bool) -> str:
    """A C expression of the number ``value`` in type ``compute`` (float literals with their suffix, so a
    device without doubles never sees one)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if is_integer(d, compute):
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"the constant {value!r} is not an integer, but the program computes in {compute}")
        return f"(({compute}){int(value)})"
    v = float(value)
    if math.isfinite(v):
        text = repr(v)
        if compute == "double":
            return text
        return f"{text}f" if compute == "float" else f"(({compute}){text}f)"
    bits32 = "0x7fc00000u" if math.isnan(v) else ("0x7f800000u" if v > 0 else "0xff800000u")
    if compute == "double":
        bits64 = "0x7ff8000000000000" if math.isnan(v) else ("0x7ff0000000000000" if v > 0 else "0xfff0000000000000")
        return d.bits_double.format(bits64 + d.u64_literal)
    value_text = d.bits_float.format(bits32)
    return value_text if compute == "float" else f"(({compute}){value_text})"


def _math(d: Dialect, compute: str, name: str) -> str:
    return name + (d.float_math_suffix if compute == "float" else "")


def _ipow(d: Dialect, t: str, u: str) -> tuple[str, str]:
    """(the name, the C function) of integer ``a ** b`` that wraps like NumPy; a negative exponent gives the
    truncated 1 / a**-b (1 for a = 1, +-1 for a = -1, else 0), as torch does."""
    name = f"ipow_{t.replace(' ', '_')}"
    return name, (
        f"{d.inline} {t} {name}({t} a, {t} b) {{\n"
        f"    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;\n"
        f"    {u} base = ({u})a, acc = 1;\n"
        f"    while (b) {{ if (b & 1) acc *= base; base *= base; b >>= 1; }}\n"
        f"    return ({t})acc;\n}}\n"
    )


_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_ROUND = {"round_float16": ("float_to_half", "half_to_float"), "round_bfloat16": ("float_to_bf16", "bf16_to_float")}


def _spell(d: Dialect, compute: str, op: str, a: Sequence[str], helpers: dict[str, str]) -> str:
    """The default C expression of ``op`` on the argument expressions ``a`` in ``compute``."""
    if op in _COMPARE:
        return f"({a[0]} {_COMPARE[op]} {a[1]})"
    if op == "select":
        return f"({a[0]} ? {a[1]} : {a[2]})"
    if op == "and":
        return f"({a[0]} && {a[1]})"
    if op == "or":
        return f"({a[0]} || {a[1]})"
    if op == "not":
        return f"(!{a[0]})"
    if op in _ROUND:  # the conversions of ampcore.cgen (every kernel's prelude has them)
        narrow, widen = _ROUND[op]
        value = f"double_to_float_odd({a[0]})" if compute == "double" else a[0]
        return f"(({compute}){widen}({narrow}({value})))"
    if is_integer(d, compute):
        t, u = compute, _unsigned(d, compute)
        if op in ("add", "sub", "mul"):
            return f"(({t})(({u}){a[0]} {_ARITH[op]} ({u}){a[1]}))"
        if op == "neg":
            return f"(({t})(({u})0 - ({u}){a[0]}))"
        if op == "abs":
            return f"({a[0]} < 0 ? ({t})(({u})0 - ({u}){a[0]}) : {a[0]})"
        if op == "sign":
            return f"(({t})(({a[0]} > 0) - ({a[0]} < 0)))"
        if op == "maximum":
            return f"({a[0]} > {a[1]} ? {a[0]} : {a[1]})"
        if op == "minimum":
            return f"({a[0]} < {a[1]} ? {a[0]} : {a[1]})"
        if op == "pow":
            name, text = _ipow(d, t, u)
            helpers[name] = text
            return f"{name}({a[0]}, {a[1]})"
        raise TypeError(f"{op} needs a floating compute type, got {compute}")
    zero, one = constant(d, compute, 0.0), constant(d, compute, 1.0)
    if op in _ARITH:
        return f"({a[0]} {_ARITH[op]} {a[1]})"
    if op == "neg":
        return f"(-{a[0]})"
    if op == "abs":
        return f"{_math(d, compute, 'fabs')}({a[0]})"
    if op == "sign":  # +-1, and +-0 and NaN give themselves... as NumPy: +0 for -0
        return f"({a[0]} > {zero} ? {one} : ({a[0]} < {zero} ? -{one} : ({a[0]} == {zero} ? {zero} : {a[0]})))"
    if op == "maximum":
        return f"(({a[0]} > {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})"
    if op == "minimum":
        return f"(({a[0]} < {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})"
    return f"{_math(d, compute, op)}({', '.join(a)})"  # sqrt exp log tanh erf sin cos pow


def render(
    prog: Program,
    d: Dialect,
    compute: str,
    operands: Sequence[str],
    *,
    overrides: Mapping[str, Override] | None = None,
    prefix: str = "t",
) -> Rendered:
    """C statements computing ``prog`` in ``compute`` (``"float"``, ``"double"``, ``"half"``, ``"int"`` or the
    dialect's 64-bit integer) from ``operands`` (C expressions of each operand in its compute type; a bool
    operand as an int 0 or 1).  Locals are named ``prefix`` and a number."""
    if len(operands) != prog.arity:
        raise ValueError(f"program {prog.name!r} takes {prog.arity} operands, got {len(operands)}")
    overrides = overrides or {}
    helpers: dict[str, str] = {}
    names: dict[Expr, str] = {}
    lines: list[str] = []

    def text(node: Expr) -> str:
        if node in names:
            return names[node]
        if node.is_input:
            return operands[node.value]
        return constant(d, compute, node.value)

    for i, node in enumerate(prog.nodes):
        args = [text(a) for a in node.args]
        override = overrides.get(node.op)
        spelled = override(args, compute) if override is not None else None
        if spelled is None:
            spelled = _spell(d, compute, node.op, args, helpers)
        ctype = "int" if prog.kinds[node] == "b" else compute
        lines.append(f"const {ctype} {prefix}{i} = {spelled};")
        names[node] = f"{prefix}{i}"
    return Rendered(tuple(lines), text(prog.root), "".join(helpers.values()))


# --------------------------------------------------------------------------- fused chains
FUSED_TAGS = ("f32", "f64", "f16", "bf16", "b8")
"""The dtype tags a fused chain's operands and result may have (:func:`fused`)."""


@dataclass(frozen=True)
class Fused:
    """The dialect-independent parts of a fused chain's kernel: ``params`` (the result's pointer ``out``, then
    each operand's ``x0, x1, ...`` with its own element type), ``lines`` (C statements: each operand loaded,
    the program's locals, the result stored), ``helpers`` (what goes before the kernel: the pragma that stops
    contraction where the dialect has one, and the program's helper functions) and ``compute`` (the C type
    the program computes in)."""

    params: tuple[str, ...]
    lines: tuple[str, ...]
    helpers: str
    compute: str


def fused(
    prog: Program,
    d: Dialect,
    tags: Sequence[str],
    result_tag: str,
    indices: Sequence[str],
    *,
    out_index: str = "i",
    overrides: Mapping[str, Override] | None = None,
) -> Fused:
    """The body of a kernel computing ``prog`` over operands of dtype tags ``tags`` (read at ``indices``, C
    expressions of the kernel's index) into a result of ``result_tag`` (written at ``out_index``).

    Operands may differ in dtype: each is loaded with :func:`ampcore.cgen.load` of its own tag (float16 and
    bfloat16 widened exactly to float), the program computes in float (double when a float64 is involved),
    each node rounded on its own (its rounding nodes with :mod:`ampcore.cgen`'s conversions), and the result
    is rounded once by :func:`ampcore.cgen.store`.  A bool operand (tag ``b8``) is an int 0 or 1.  ValueError
    naming the bad value for a tag outside :data:`FUSED_TAGS`, a bool where the program wants a value (or the
    reverse), or a count of tags or indices that is not the program's arity."""
    if len(tags) != prog.arity or len(indices) != prog.arity:
        raise ValueError(
            f"program {prog.name!r} takes {prog.arity} operands, got {len(tags)} dtype tags and {len(indices)} indices"
        )
    for k, tag in enumerate([*tags, result_tag]):
        if tag not in FUSED_TAGS:
            what = "the result" if k == len(tags) else f"operand {k}"
            raise ValueError(f"{what} of a fused chain has dtype tag {tag!r}; fused chains take {FUSED_TAGS}")
    for k, (tag, kind) in enumerate(zip(tags, prog.inputs)):
        if (tag == "b8") != (kind == "b"):
            want = "a bool (tag 'b8')" if kind == "b" else "a float"
            raise ValueError(f"operand {k} of program {prog.name!r} must be {want}, got dtype tag {tag!r}")
    compute = "double" if "f64" in (*tags, result_tag) else "float"
    storage = [cgen.element_type(d, t) for t in (result_tag, *tags)]
    params = [f"{d.global_}{storage[0]} *{d.restrict} out"]
    params += [f"{d.global_}const {s} *{d.restrict} x{k}" for k, s in enumerate(storage[1:])]
    loads = [
        f"const {'int' if tag == 'b8' else compute} v{k} = {cgen.load(tag, f'x{k}', index)};"
        for k, (tag, index) in enumerate(zip(tags, indices))
    ]
    rendered = render(prog, d, compute, [f"v{k}" for k in range(prog.arity)], overrides=overrides)
    value_type = "double" if compute == "double" else ""
    store = cgen.store(result_tag, storage[0], "out", out_index, rendered.result, value_type)
    return Fused(tuple(params), (*loads, *rendered.lines, store), d.no_contract + rendered.helpers, compute)
