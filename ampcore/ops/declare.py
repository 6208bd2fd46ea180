"""One declaration per op: the registry every surface of an op is derived from.

An op is declared once, in a module of :mod:`ampcore.ops.decls`, as JAX's
``lax.py`` declares a primitive and torch's ``native_functions.yaml`` plus
``derivatives.yaml`` declare an op::

    from ampcore import expr as E
    from ampcore.ops.declare import Domain, binary

    binary(
        "logaddexp",
        lambda a, b: (m := E.maximum(a, b), m + E.log(E.exp(a - m) + E.exp(b - m)))[-1],
        grads=(
            lambda k, a, b, y, g: k.mul(g, k.exp(k.sub(a, y))),
            lambda k, a, b, y, g: k.mul(g, k.exp(k.sub(b, y))),
        ),
        reads=("ay", "by"),
        category="fp32",
        domains=(Domain(-4, 4), Domain(-4, 4)),
    )

A declaration holds the op's name and torch's signature; its variants (a
function ``ampcore.<name>``, a Tensor method, an in-place ``<name>_``, Python
operators); its forward, an elementwise expression (:mod:`ampcore.expr`) or a
composition of other ops; its backward rule (for an expression op, one
function per operand of ``(kernels, *operands, output, grad)``, over backend
arrays, and which of them it reads so only those are kept); its autocast
category where ampcore decides it (torch's own lists decide every op they
name); and its float64 reference for the conformance suite (by default the
expression itself, evaluated in float64).

Everything else comes from this registry: the function forms
(:mod:`ampcore.functions`), the Tensor methods, ``ampcore.__all__``, the
cast policy's ampcore layer (:mod:`ampcore.policy.builtin`), the
conformance suite's cases, the CPU audit's rows for ops torch does not
register, and the public-API pin.  A backend runs an expression op with no
edit of its own: its kernel table renders the program (the ``elementwise``
primitive, :mod:`ampcore.kernels`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import expr as E
from ..dispatch import composite as composite_boundary
from ..dispatch import register_op
from . import elementwise as ew

__all__ = [
    "Domain",
    "Declaration",
    "DeclarationError",
    "elementwise",
    "unary",
    "binary",
    "comparison",
    "composite",
    "Input",
    "Example",
    "declarations",
    "get",
    "functions",
    "methods",
    "operators",
    "categories",
    "on_declare",
    "generation",
    "GENERATION",
    "CATEGORIES",
    "VARIANTS",
]

CATEGORIES = ("lower", "fp32", "promote", "unlisted")
"""The categories a declaration may give its op (banning is torch's decision alone)."""
VARIANTS = frozenset({"function", "method", "inplace"})

Grad = Callable[..., Any]


class DeclarationError(ValueError):
    """A declaration that cannot be: a duplicate name, an unknown category or variant, a bad gradient list."""


@dataclass(frozen=True)
class Domain:
    """Where the conformance suite draws an operand: uniform in ``[lo, hi)``, the sign random when ``signed``
    (so ``Domain(0.5, 2, signed=True)`` keeps divisors away from zero); with ``grid``, only multiples of it
    plus ``offset`` (exact in every dtype: ``Domain(-2, 2, grid=0.25, offset=0.125)`` against ``offset=0``
    never ties, as maximum's gradient check needs)."""

    lo: float = -4.0
    hi: float = 4.0
    signed: bool = False
    grid: float = 0.0
    offset: float = 0.0

    def sample(self, rng: Any, shape: tuple[int, ...]) -> Any:
        """float64 values of ``shape`` from this domain (``rng`` a NumPy Generator)."""
        if self.grid:
            steps = rng.integers(round(self.lo / self.grid), round(self.hi / self.grid), size=shape)
            x = steps * self.grid + self.offset
        else:
            x = rng.uniform(self.lo, self.hi, size=shape)
        return x * rng.choice([-1.0, 1.0], size=shape) if self.signed else x


@dataclass(frozen=True)
class Input:
    """One argument of a composite op's :class:`Example`: a tensor of ``shape`` drawn from ``domain`` (``kind``
    ``"float"``: the dtype under test, differentiable; ``"int64"``: indices below ``high``, no two equal where
    ``distinct`` (an op whose result a repeated index leaves undefined: index_copy, scatter); ``"bool"``: a
    random mask)."""

    shape: tuple[int, ...]
    domain: Domain = Domain()
    kind: str = "float"
    high: int = 2
    distinct: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("float", "int64", "bool"):
            raise DeclarationError(f"an Input's kind is 'float', 'int64' or 'bool', got {self.kind!r}")
        count = 1
        for n in self.shape:
            count *= n
        if self.distinct and (self.kind != "int64" or count > self.high):
            raise DeclarationError(f"distinct indices need kind 'int64' and at most high={self.high} of them")


@dataclass(frozen=True)
class Example:
    """How the conformance suite calls a composite op and judges it: its tensor ``inputs`` (positional, in
    order) and keyword ``params``; ``rule`` the tolerance rule of its result (``"composite"``: a few roundings
    and a float32 accumulation over ``n`` terms; ``"sum"``: an accumulation over ``n`` terms, judged from the
    absolute sum; ``"exact"``: it moves values, bit for bit); ``n_grad`` each float input's fan-in for its
    gradient (default 1); ``roundings`` where the composite rule's default of 8 is not its count.

    ``call(op, *tensors, **params)``, where given, is how the op (and torch's, for the CPU audit) is called when
    the tensors are not its leading positional arguments (``einsum(equation, *operands)``, ``gather(input,
    dim, index)``) or it returns more than the tensor to judge (an LSTM cell's ``(h, c)``: the suite judges
    what ``call`` returns); the reference is always ``reference(*arrays, **params)``."""

    inputs: tuple[Input, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    rule: str = "composite"
    n: int = 1
    n_grad: tuple[int, ...] = ()
    roundings: int | None = None
    call: Callable[..., Any] | None = None

    def run(self, op: Callable[..., Any], *tensors: Any) -> Any:
        """``op`` called on ``tensors`` as this example calls it."""
        if self.call is not None:
            return self.call(op, *tensors, **self.params)
        return op(*tensors, **self.params)

    def __post_init__(self) -> None:
        if self.rule not in ("composite", "sum", "exact", "elementwise"):
            raise DeclarationError(f"an Example's rule is composite, sum, exact or elementwise, got {self.rule!r}")


SMALL_RESULTS = ("negative tail", "near one", "near pi/2", "near zero")
"""Where an op's results are small, for the conformance check that small results keep their accuracy (a kernel
that flushes them to zero fails): far out on the negative side (exp, sigmoid), just around 1 (log), around
pi/2 (cos), around 0 (f(x) ~ x: tanh, sin, erf, neg, abs, sign)."""


@dataclass(frozen=True)
class Declaration:
    """One op, declared once (see the module docstring); made by :func:`elementwise` and its friends."""

    name: str
    signature: str
    kind: str  # "elementwise" (an expression) or "composite"
    function: Callable[..., Any]  # the Tensor-level op: ampcore.<name> and the method call it
    variants: frozenset[str]
    operators: tuple[str, ...] = ()  # Python operators: ``x + y`` (``__add__``)
    roperators: tuple[str, ...] = ()  # reflected Python operators, operands swapped: ``1 + x`` (``__radd__``)
    program: E.Program | None = None
    grads: tuple[Grad | None, ...] = ()
    reads: tuple[str, ...] = ()
    category: str | None = None
    reference: Callable[..., Any] | None = None
    domains: tuple[Domain, ...] = ()
    ulps: tuple[float, float, float] | None = None  # (float32, float64, the float64 reference's) error bounds
    small_results: str | None = None  # one of SMALL_RESULTS: where the op's results are small
    nan_unspecified: bool = False  # the result of a NaN input is left open (sign: NaN in NumPy, 0 in torch)
    aten: str | None = None  # torch's aten op (None: torch has no such op)
    torch_function: str = ""  # where torch has it, from ``torch.`` ("nn.functional.pad"; default: the name)
    example: Example | None = None  # a composite op's conformance call
    differentiable_: bool | None = None  # a composite's: whether the suite checks its gradients
    reflected: str | None = None  # the policy name of ``other <op> tensor`` where torch lists it apart
    module: str = ""  # the declaring module
    doc: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def differentiable(self) -> bool:
        if self.differentiable_ is not None:
            return self.differentiable_
        return any(g is not None for g in self.grads)

    @property
    def arity(self) -> int:
        return self.program.arity if self.program is not None else 0


_lock = threading.Lock()
_registry: dict[str, Declaration] = {}
_listeners: list[Callable[[Declaration], None]] = []
_generation = GENERATION = [0]  # a list, so the hot path reads declare.GENERATION[0] without a call


def _letters(arity: int) -> str:
    return "x" if arity == 1 else "abcdefgh"[:arity]


def _check(name: str, variants: frozenset[str], category: str | None) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise DeclarationError(f"an op's name must be an identifier like 'logaddexp', got {name!r}")
    if name in _registry:
        raise DeclarationError(f"op {name!r} is declared already (in {_registry[name].module}); choose another name")
    bad = variants - VARIANTS
    if bad:
        raise DeclarationError(f"op {name!r}: unknown variants {sorted(bad)}; valid ones are {sorted(VARIANTS)}")
    if category is not None and category not in CATEGORIES:
        raise DeclarationError(f"op {name!r}: unknown category {category!r}; valid ones are {', '.join(CATEGORIES)}")


def _tensor_function(name: str, prog: E.Program, doc: str) -> Callable[..., Any]:
    """The Tensor-level function of an expression op, by the kinds of its operands."""
    op: Callable[..., Any]
    if prog.inputs == "T":

        def unary(input: Any) -> Any:  # noqa: A002 - torch's argument name
            return ew.unary(name, input)

        op = unary
    elif prog.inputs == "TT" and prog.result == "b":

        def compare(input: Any, other: Any) -> Any:  # noqa: A002 - torch's argument name
            return ew.compare(name, input, other)

        op = compare
    elif prog.inputs == "TT":

        def binary(input: Any, other: Any) -> Any:  # noqa: A002 - torch's argument name
            return ew.binary(name, input, other)

        op = binary
    elif set(prog.inputs) == {"T"}:

        def nary(*args: Any) -> Any:
            return ew.nary(name, *args)

        op = nary
    else:
        raise DeclarationError(
            f"op {name!r}: no generic entry for operands {prog.inputs!r}; declare it with function= (as where is)"
        )
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


def elementwise(
    name: str,
    fn: Callable[..., Any],
    *,
    inputs: str | None = None,
    grads: tuple[Grad | None, ...] | None = None,
    reads: tuple[str, ...] | None = None,
    variants: tuple[str, ...] = ("function", "method"),
    operators: tuple[str, ...] = (),
    roperators: tuple[str, ...] = (),
    category: str | None = None,
    reference: Callable[..., Any] | None = None,
    domains: tuple[Domain, ...] | None = None,
    ulps: tuple[float, float, float] | None = None,
    small_results: str | None = None,
    nan_unspecified: bool = False,
    aten: str | None = "",
    reflected: str | None = None,
    signature: str | None = None,
    function: Callable[..., Any] | None = None,
    torch_function: str = "",
    doc: str = "",
    module: str = "",
) -> Declaration:
    """Declare the elementwise op ``name`` whose forward is the expression ``fn(*operands)``.

    ``inputs`` gives the kinds of the operands (default: as many values as ``fn`` takes); ``grads`` one
    backward rule per operand (None where it has no gradient; all None or omitted: not differentiable),
    each ``(k, *operands, y, g) -> array`` over the backend's kernels ``k``; ``reads`` for each rule the
    letters of what it reads (``x`` for a unary op's operand, ``a``, ``b``, ... otherwise, ``y`` the output),
    so forward keeps only those.  ``aten`` is torch's op (default: the same name; None if torch has none), and
    ``torch_function`` where torch's Python function is not ``torch.<name>`` (``"nn.functional.elu"``).
    """
    if inputs is None:
        inputs = "T" * fn.__code__.co_argcount if hasattr(fn, "__code__") else "T"
    prog = E.program(name, fn, inputs)
    arity = prog.arity
    grads = tuple(grads) if grads is not None else (None,) * arity
    reads = tuple(reads) if reads is not None else ("",) * arity
    if len(grads) != arity or len(reads) != arity:
        raise DeclarationError(f"op {name!r} has {arity} operands: give one gradient rule and one reads string each")
    if small_results is not None and small_results not in SMALL_RESULTS:
        raise DeclarationError(f"op {name!r}: small_results must be one of {SMALL_RESULTS}, got {small_results!r}")
    if ulps is None and not (_is_correctly_rounded(prog) or _library_function(prog)):
        raise DeclarationError(
            f"op {name!r} composes rounding functions: state its error bound, ulps=(float32, float64, the float64 "
            "reference's own), as ampcore.conformance.tolerance's docstring derives them"
        )
    letters = set(_letters(arity)) | {"y"}
    for r in reads:
        if set(r) - letters:
            raise DeclarationError(f"op {name!r}: reads {r!r} names something other than {''.join(sorted(letters))}")
    variant_set = frozenset(variants)
    _check(name, variant_set, category)
    doc = doc or f"Elementwise {name}: ``{prog.key.split('|')[-1]}`` (torch.{name})."
    if signature is None:
        params = ", ".join(["input", "other", "third", "fourth"][:arity]) if arity <= 4 else "*inputs"
        signature = f"{name}({params}) -> Tensor"
    decl = Declaration(
        name=name,
        signature=signature,
        kind="elementwise",
        function=function or _tensor_function(name, prog, doc),
        variants=variant_set,
        operators=tuple(operators),
        roperators=tuple(roperators),
        program=prog,
        grads=grads,
        reads=reads,
        category=category,
        reference=reference,
        domains=tuple(domains) if domains is not None else (Domain(),) * arity,
        ulps=ulps,
        small_results=small_results,
        nan_unspecified=nan_unspecified,
        aten=name if aten == "" else aten,
        torch_function=torch_function,
        reflected=reflected,
        module=module or _caller_module(),
        doc=doc,
    )
    _add(decl)
    return decl


def _caller_module() -> str:
    """The module whose top level is declaring (the first frame outside this module)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back  # type: ignore[assignment]
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _is_correctly_rounded(prog: E.Program) -> bool:
    """Every call an IEEE basic operation, at most one of them rounding: the result is correctly rounded."""
    return prog.exact


def _library_function(prog: E.Program) -> bool:
    """One library function (exp, log, ...) of the operands: its bound is the function's own."""
    return E.direct_call(prog) is not None


def unary(name: str, fn: Callable[[Any], Any], *, grad: Grad | None = None, reads: str = "", **kw: Any) -> Declaration:
    """Declare a one-operand elementwise op: :func:`elementwise` with ``grad(k, x, y, g)`` and ``reads``
    among ``"x"`` and ``"y"``."""
    domain = kw.pop("domain", None)
    if domain is not None:
        kw["domains"] = (domain,)
    return elementwise(name, fn, inputs="T", grads=(grad,), reads=(reads,), **kw)


def binary(name: str, fn: Callable[[Any, Any], Any], **kw: Any) -> Declaration:
    """Declare a two-operand elementwise op (broadcasting; either operand may be a Python number)."""
    return elementwise(name, fn, inputs="TT", **kw)


def comparison(name: str, fn: Callable[[Any, Any], Any], **kw: Any) -> Declaration:
    """Declare a comparison: two values to a bool tensor, not differentiable."""
    return elementwise(name, fn, inputs="TT", **kw)


def composite(
    name: str,
    *,
    example: Example | None = None,
    reference: Callable[..., Any] | None = None,
    variants: tuple[str, ...] = ("function", "method"),
    category: str | None = None,
    aten: str | None = "",
    torch_function: str = "",
    signature: str | None = None,
    differentiable: bool = True,
    doc: str = "",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the op ``name`` whose forward is the decorated Tensor-level function, built of other ops (their
    backward rules are its backward): the op boundary autocast decides it at (:func:`ampcore.dispatch.composite`),
    and ``ampcore.<name>`` / ``Tensor.<name>`` per ``variants``.  ``reference`` is its float64 NumPy reference,
    called as the op is on the ``example``'s inputs (as float64 arrays) and params: with both, the conformance
    suite checks it forward (and, ``differentiable``, backward) on every backend.  The decorated function is
    returned as the op."""

    def declare_it(fn: Callable[..., Any]) -> Callable[..., Any]:
        variant_set = frozenset(variants)
        _check(name, variant_set, category)
        if (example is None) != (reference is None):
            raise DeclarationError(f"op {name!r}: give both example= and reference= (the suite needs both) or neither")
        op = composite_boundary(name)(fn)
        text = doc or (fn.__doc__ or "").strip().split("\n\n")[0]
        decl = Declaration(
            name=name,
            signature=signature or f"{name}(...) -> Tensor",
            kind="composite",
            function=op,
            variants=variant_set,
            category=category,
            reference=reference,
            aten=name if aten == "" else aten,
            torch_function=torch_function or name,
            example=example,
            differentiable_=differentiable,
            module=_caller_module(),
            doc=text,
        )
        _add(decl)
        return op

    return declare_it


def _add(decl: Declaration) -> None:
    prog = decl.program
    with _lock:
        if decl.name in _registry:
            raise DeclarationError(f"op {decl.name!r} is declared already (in {_registry[decl.name].module})")
        if prog is not None:
            E.register(prog)
            same_dtype = prog.result == "T" and prog.inputs[0] == "T"
            ew.add_op(decl.name, decl.grads, decl.reads, same_dtype=same_dtype, float_only=not prog.ints)
        _registry[decl.name] = decl
    register_op(decl.name, "primitive")
    if decl.reflected:
        register_op(decl.reflected, "primitive")
        ew.REFLECTED_OP_NAMES[decl.name] = decl.reflected
    if "inplace" in decl.variants:
        register_op(f"{decl.name}_", "in-place")
    _generation[0] += 1
    for listener in list(_listeners):
        listener(decl)


def generation() -> int:
    """Changes whenever an op is declared: caches of what derives from the registry key on it."""
    return _generation[0]


def on_declare(listener: Callable[[Declaration], None]) -> None:
    """Call ``listener(declaration)`` for every op declared so far and every one declared later: how the
    layers above (functions, Tensor methods, the ``ampcore`` namespace) derive their parts."""
    with _lock:
        _listeners.append(listener)
        existing = list(_registry.values())
    for decl in existing:
        listener(decl)


# --------------------------------------------------------------------------- derived views
def declarations() -> dict[str, Declaration]:
    """Every declared op by name."""
    return dict(_registry)


def get(name: str) -> Declaration | None:
    """The declaration of ``name``, or None."""
    return _registry.get(name)


def functions() -> dict[str, Callable[..., Any]]:
    """``ampcore.<name>`` of every op declared with the ``function`` variant."""
    return {n: d.function for n, d in _registry.items() if "function" in d.variants}


def methods() -> dict[str, Callable[..., Any]]:
    """``Tensor.<name>`` of every op declared with the ``method`` variant."""
    return {n: d.function for n, d in _registry.items() if "method" in d.variants}


def operators() -> dict[str, tuple[str, bool]]:
    """Python operator name -> (the op, whether the operands swap: ``__radd__``) of every declared operator."""
    out: dict[str, tuple[str, bool]] = {}
    for name, d in _registry.items():
        out.update(dict.fromkeys(d.operators, (name, False)))
        out.update(dict.fromkeys(d.roperators, (name, True)))
    return out


def categories() -> dict[str, tuple[str, str]]:
    """op -> (category, the declaring module) for every op whose declaration decides its category."""
    return {n: (d.category, d.module) for n, d in _registry.items() if d.category is not None}
