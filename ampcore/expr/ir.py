"""The expression language itself: nodes, functions, programs and the registry of named programs (see
:mod:`ampcore.expr`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Expr",
    "Function",
    "FUNCTIONS",
    "COMPARISONS",
    "Program",
    "ProgramError",
    "program",
    "as_expr",
    "const",
    "register",
    "get",
    "names",
    "generation",
    # the functions, one constructor each
    "neg",
    "abs_",
    "sign",
    "add",
    "sub",
    "mul",
    "div",
    "pow_",
    "maximum",
    "minimum",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "erf",
    "sin",
    "cos",
    "log1p",
    "expm1",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "select",
    "logical_and",
    "logical_or",
    "logical_not",
    "round_float16",
    "round_bfloat16",
    "ROUNDINGS",
]

Number = int | float | bool


class ProgramError(TypeError):
    """An expression that does not type-check: a bool where a value is needed, a wrong number of arguments."""


@dataclass(frozen=True)
class Function:
    """One function of the expression language.

    ``args`` gives the kind of each argument and ``result`` the kind of the
    result: ``"T"`` a value in the op's compute type, ``"b"`` a bool.
    ``ints``: defined on integer (and bool) values, wrapping like the dtype.
    ``exact``: an IEEE basic operation, correctly rounded, so computing it in a
    wider type and rounding once to a 16-bit dtype gives the bits it has when
    computed in that dtype (24-bit float32 keeps more than twice float16's
    precision), and the bits are the same on every backend.
    ``arithmetic``: it rounds (a comparison, a select or a sign change does not).
    """

    name: str
    args: str
    result: str
    ints: bool
    exact: bool
    arithmetic: bool = True

    @property
    def arity(self) -> int:
        return len(self.args)


ROUNDINGS = {"round_float16": "float16", "round_bfloat16": "bfloat16"}
"""The rounding functions, by name: each rounds its argument to the named 16-bit dtype (to nearest even, NaN
kept NaN) and widens the result back to the compute type."""


def _table() -> dict[str, Function]:
    f: list[Function] = []
    for name in ("neg", "abs", "sign"):  # sign changes and selections: nothing rounds
        f.append(Function(name, "T", "T", ints=True, exact=True, arithmetic=False))
    for name in ("add", "sub", "mul"):
        f.append(Function(name, "TT", "T", ints=True, exact=True))
    f.append(Function("div", "TT", "T", ints=False, exact=True))
    f.append(Function("pow", "TT", "T", ints=True, exact=False))
    for name in ("maximum", "minimum"):  # NaN from either side; a tie gives the second operand (NumPy's rule)
        f.append(Function(name, "TT", "T", ints=True, exact=True, arithmetic=False))
    f.append(Function("sqrt", "T", "T", ints=False, exact=True))
    for name in ("exp", "log", "tanh", "erf", "sin", "cos", "log1p", "expm1"):
        f.append(Function(name, "T", "T", ints=False, exact=False))
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        f.append(Function(name, "TT", "b", ints=True, exact=True, arithmetic=False))
    # Where eager stores an intermediate in 16 bits, a fused program rounds it there and widens it back (the
    # capture engine's fusion, ampcore.capture.fusion): correctly rounded, so a fused chain keeps eager's bits.
    for name in ROUNDINGS:
        f.append(Function(name, "T", "T", ints=False, exact=True))
    f.append(Function("select", "bTT", "T", ints=True, exact=True, arithmetic=False))
    f.append(Function("and", "bb", "b", ints=True, exact=True, arithmetic=False))
    f.append(Function("or", "bb", "b", ints=True, exact=True, arithmetic=False))
    f.append(Function("not", "b", "b", ints=True, exact=True, arithmetic=False))
    return {fn.name: fn for fn in f}


FUNCTIONS: dict[str, Function] = _table()
"""Every function a program may call, by name: what a backend's renderer must spell."""

COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})


class Expr:
    """A node: an input (``op == "input"``, ``value`` its index), a constant (``"const"``, ``value`` a
    Python number) or a call of :data:`FUNCTIONS` [``op``] on ``args``.

    Arithmetic operators build calls (``x + 1``, ``-x``, ``abs(x)``, ``x >= 0``,
    ``a & b``); equality is ``eq(a, b)`` (``==`` keeps its identity meaning, so
    nodes can be dictionary keys), and a node has no truth value (``select`` is
    the conditional).
    """

    __slots__ = ("op", "args", "value", "__weakref__")

    def __init__(self, op: str, args: tuple[Expr, ...] = (), value: Any = None):
        self.op = op
        self.args = args
        self.value = value

    # ------------------------------------------------------------------ what it is
    @property
    def is_input(self) -> bool:
        return self.op == "input"

    @property
    def is_const(self) -> bool:
        return self.op == "const"

    @property
    def function(self) -> Function | None:
        return FUNCTIONS.get(self.op)

    def __repr__(self) -> str:
        return f"<expr {_text(self, {})}>"

    def __bool__(self) -> bool:
        raise ProgramError(
            "an expression has no truth value: write select(cond, a, b) instead of Python's if/and/or/not"
        )

    # ------------------------------------------------------------------ operators
    def __add__(self, o: Any) -> Expr:
        return add(self, o)

    def __radd__(self, o: Any) -> Expr:
        return add(o, self)

    def __sub__(self, o: Any) -> Expr:
        return sub(self, o)

    def __rsub__(self, o: Any) -> Expr:
        return sub(o, self)

    def __mul__(self, o: Any) -> Expr:
        return mul(self, o)

    def __rmul__(self, o: Any) -> Expr:
        return mul(o, self)

    def __truediv__(self, o: Any) -> Expr:
        return div(self, o)

    def __rtruediv__(self, o: Any) -> Expr:
        return div(o, self)

    def __pow__(self, o: Any) -> Expr:
        return pow_(self, o)

    def __rpow__(self, o: Any) -> Expr:
        return pow_(o, self)

    def __neg__(self) -> Expr:
        return neg(self)

    def __abs__(self) -> Expr:
        return abs_(self)

    def __lt__(self, o: Any) -> Expr:
        return lt(self, o)

    def __le__(self, o: Any) -> Expr:
        return le(self, o)

    def __gt__(self, o: Any) -> Expr:
        return gt(self, o)

    def __ge__(self, o: Any) -> Expr:
        return ge(self, o)

    def __and__(self, o: Any) -> Expr:
        return logical_and(self, o)

    def __or__(self, o: Any) -> Expr:
        return logical_or(self, o)

    def __invert__(self) -> Expr:
        return logical_not(self)

    __hash__ = object.__hash__


def const(value: Number) -> Expr:
    """A constant: a Python number, taken to the compute type where it is used (a weak scalar); a bool is a
    bool constant."""
    if not isinstance(value, (bool, int, float)):
        raise ProgramError(f"a constant must be a Python bool, int or float, got {value!r}")
    return Expr("const", (), value)


def as_expr(value: Any) -> Expr:
    """``value`` as a node: an Expr as it is, a Python number as a constant."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float)):
        return const(value)
    raise ProgramError(f"{value!r} is not an expression or a Python number")


def _call(name: str, *args: Any) -> Expr:
    fn = FUNCTIONS[name]
    if len(args) != fn.arity:
        raise ProgramError(f"{name} takes {fn.arity} argument(s), got {len(args)}")
    return Expr(name, tuple(as_expr(a) for a in args))


def _unary(name: str) -> Callable[[Any], Expr]:
    def build(x: Any) -> Expr:
        return _call(name, x)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"The expression ``{name}(x)``."
    return build


def _binary(name: str) -> Callable[[Any, Any], Expr]:
    def build(a: Any, b: Any) -> Expr:
        return _call(name, a, b)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"The expression ``{name}(a, b)``."
    return build


neg, abs_, sign = _unary("neg"), _unary("abs"), _unary("sign")
exp, log, sqrt, tanh, erf, sin, cos = (_unary(n) for n in ("exp", "log", "sqrt", "tanh", "erf", "sin", "cos"))
log1p, expm1 = _unary("log1p"), _unary("expm1")
add, sub, mul, div, pow_ = (_binary(n) for n in ("add", "sub", "mul", "div", "pow"))
maximum, minimum = _binary("maximum"), _binary("minimum")
eq, ne, lt, le, gt, ge = (_binary(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))
logical_and, logical_or, logical_not = _binary("and"), _binary("or"), _unary("not")
round_float16, round_bfloat16 = _unary("round_float16"), _unary("round_bfloat16")


def select(cond: Any, a: Any, b: Any) -> Expr:
    """``a`` where ``cond`` holds, else ``b`` (only the chosen side's value is used)."""
    return _call("select", cond, a, b)


# --------------------------------------------------------------------------- programs
def _text(node: Expr, names: dict[Expr, str]) -> str:
    """The structural text of ``node`` (shared nodes by the names already given in ``names``)."""
    if node in names:
        return names[node]
    if node.is_input:
        return f"x{node.value}"
    if node.is_const:
        return repr(node.value)
    return f"{node.op}({','.join(_text(a, names) for a in node.args)})"


def _walk(root: Expr) -> tuple[list[Expr], dict[Expr, int]]:
    """The call nodes under ``root`` in evaluation order (each once, arguments first), and how many
    times each node is used as an argument (the root counts once)."""
    order: list[Expr] = []
    uses: dict[Expr, int] = {root: 1}
    stack: list[tuple[Expr, bool]] = [(root, False)]
    seen: set[int] = set()
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen or not node.args:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for a in reversed(node.args):
            uses[a] = uses.get(a, 0) + 1
            stack.append((a, False))
    return order, uses


@dataclass(frozen=True, eq=False)
class Program:
    """A named expression over operands of the given kinds (``inputs``: one ``"T"`` or ``"b"`` each).

    Derived facts, for renderers: ``nodes`` (the calls in evaluation order),
    ``uses`` (how many times each node is an argument: a node used more than
    once is computed into a temporary), ``result`` (``"T"`` or ``"b"``),
    ``ints`` (defined on integer dtypes: every function is, and no constant is
    fractional), ``roundings`` (how many arithmetic calls round), ``moves_only`` (the result is one of the operands or
    constants, chosen: a backend may select stored bits), and ``key`` (the
    structural text, equal for equal programs: a cache key for rendered
    kernels).
    """

    name: str
    inputs: str
    root: Expr
    nodes: tuple[Expr, ...] = field(init=False)
    uses: dict[Expr, int] = field(init=False, repr=False)
    kinds: dict[Expr, str] = field(init=False, repr=False)
    result: str = field(init=False)
    ints: bool = field(init=False)
    roundings: int = field(init=False)
    moves_only: bool = field(init=False)
    key: str = field(init=False)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ProgramError(f"a program's name must be an identifier like 'logaddexp', got {self.name!r}")
        if not self.inputs or set(self.inputs) - {"T", "b"}:
            raise ProgramError(f"inputs must be a string of 'T' (a value) and 'b' (a bool), got {self.inputs!r}")
        nodes, uses = _walk(self.root)
        kinds = _check_kinds(self, nodes)
        set_ = object.__setattr__
        set_(self, "nodes", tuple(nodes))
        set_(self, "uses", uses)
        set_(self, "kinds", kinds)
        set_(self, "result", kinds.get(self.root) or _leaf_kind(self, self.root))
        functions = [FUNCTIONS[n.op] for n in nodes]
        # An integer dtype computes in integers: a program with a constant no integer holds (inf, 0.5) cannot.
        fractional = any(isinstance(c.value, float) and not c.value.is_integer() for c in self.leaves() if c.is_const)
        set_(self, "ints", all(f.ints for f in functions) and not fractional)
        set_(self, "roundings", sum(1 for f in functions if f.arithmetic))
        set_(self, "moves_only", all(n.op == "select" for n in nodes) and self.result == "T")
        shared = [n for n in nodes if uses.get(n, 0) > 1 and n is not self.root]
        names = {n: f"t{i}" for i, n in enumerate(shared)}
        lets = ";".join(f"{names[n]}={_text_once(n, names)}" for n in shared)
        set_(self, "key", f"{self.inputs}|{lets}|{_text(self.root, names)}")

    @property
    def arity(self) -> int:
        return len(self.inputs)

    @property
    def exact(self) -> bool:
        """Every call is an IEEE basic operation and at most one rounds: computing it in float16 itself gives
        the bits of computing it in float32 and rounding once (OpenCL's native-half path relies on it)."""
        return all(FUNCTIONS[n.op].exact for n in self.nodes) and self.roundings <= 1

    def leaves(self) -> Iterator[Expr]:
        """The inputs and constants the calls read."""
        for node in self.nodes:
            for a in node.args:
                if not a.args:
                    yield a
        if not self.root.args:
            yield self.root

    def __call__(self, *args: Any) -> Expr:
        """The program's expression with its inputs replaced by ``args`` (expressions or numbers): how
        programs compose (an op written with another op's program)."""
        if len(args) != self.arity:
            raise ProgramError(f"program {self.name!r} takes {self.arity} operand(s), got {len(args)}")
        values = [as_expr(a) for a in args]
        done: dict[Expr, Expr] = {}

        def sub(node: Expr) -> Expr:
            if node.is_input:
                return values[node.value]
            if node.is_const:
                return node
            if node not in done:
                done[node] = Expr(node.op, tuple(sub(a) for a in node.args))
            return done[node]

        return sub(self.root)

    def __repr__(self) -> str:
        return f"<program {self.name}: {self.key}>"


def _text_once(node: Expr, names: dict[Expr, str]) -> str:
    """``node``'s own text with its arguments by their shared names (not its own)."""
    return f"{node.op}({','.join(_text(a, names) for a in node.args)})"


def _leaf_kind(prog: Program, node: Expr) -> str:
    if node.is_input:
        if not isinstance(node.value, int) or not 0 <= node.value < len(prog.inputs):
            raise ProgramError(f"program {prog.name!r} reads operand {node.value!r} but has {len(prog.inputs)}")
        return prog.inputs[node.value]
    return "b" if isinstance(node.value, bool) else "T"


def _check_kinds(prog: Program, nodes: list[Expr]) -> dict[Expr, str]:
    """Each call's result kind, checking every argument's kind against its function's signature."""
    kinds: dict[Expr, str] = {}
    for node in nodes:
        fn = FUNCTIONS[node.op]
        for i, (a, want) in enumerate(zip(node.args, fn.args)):
            got = kinds.get(a) or _leaf_kind(prog, a)
            if got != want and not (a.is_const and not isinstance(a.value, bool)):
                what = {"T": "a value", "b": "a bool"}
                raise ProgramError(
                    f"program {prog.name!r}: argument {i} of {node.op} must be {what[want]}, got {what[got]} "
                    f"({_text(a, {})})"
                )
        kinds[node] = fn.result
    return kinds


def program(name: str, fn: Callable[..., Any], inputs: str = "T") -> Program:
    """The program ``name`` whose result is ``fn(x0, x1, ...)`` over one input per character of ``inputs``
    (``"T"``: a value of the op's dtype, ``"b"``: a bool); ProgramError where it does not type-check."""
    args = [Expr("input", (), i) for i in range(len(inputs))]
    return Program(name, inputs, as_expr(fn(*args)))


# --------------------------------------------------------------------------- the registry
_lock = threading.Lock()
_programs: dict[str, Program] = {}
_generation = [0]


def register(prog: Program, *, replace: bool = False) -> Program:
    """Make ``prog`` the program of the kernel name ``prog.name``; ValueError if another program has the name
    already (unless ``replace``)."""
    with _lock:
        old = _programs.get(prog.name)
        if old is not None and old is not prog and old.key != prog.key and not replace:
            raise ValueError(
                f"an elementwise program named {prog.name!r} exists already ({old.key}); choose another name"
            )
        _programs[prog.name] = prog
        _generation[0] += 1
    return prog


def get(name: str) -> Program | None:
    """The registered program ``name``, or None."""
    return _programs.get(name)


def names() -> list[str]:
    """The names of every registered program."""
    return sorted(_programs)


def generation() -> int:
    """Changes whenever a program is registered: caches of rendered kernels may key on it."""
    return _generation[0]
