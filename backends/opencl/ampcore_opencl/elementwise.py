"""Elementwise kernels of the opencl backend: cast, unary and binary math, comparisons, where, creation.

Each kernel is generated per (op, dtype, operand layout) from the template in
:mod:`.elementwise_gen` and compiled once; Python numbers travel as kernel
arguments, so a changing scalar never recompiles.  float16/bfloat16 compute in
float32 and are rounded once on the store (or in ``half`` for the correctly
rounded ops on a device whose half arithmetic passed the probe).  float32
``erf`` and ``pow`` compute in double where the device has it: OpenCL allows
them 16 ulp, more than the contract's 2 (erf) and 4 (pow) ulps (conformance.tolerance.ELEMENTWISE_ULPS).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt
from ampcore.kernels import BINARY, COMPARISON, UNARY

from . import elementwise_create as create
from .array import CLArray, empty
from .codegen import CType, ctype
from .devices import DeviceState
from .elementwise_gen import Operand, plan, run, scalar_arg, source, storage_scalar, unsigned

__all__ = ["kernels"]


@dataclass(frozen=True)
class Op:
    """An elementwise op: its float expression, its integer expression (None: float-only), C helpers
    (``{T}`` is the work type, ``{U}`` its unsigned type), and whether float32 runs it in double."""

    fexpr: str
    iexpr: str | None = None
    fhelpers: str = ""
    ihelpers: str = ""
    f32_in_double: bool = False
    native_half: bool = False  # correctly rounded in half: may run in half where the device really can


_SIGMOID = """
inline {T} ew_sigmoid({T} x) {{
    {T} e = exp(-fabs(x));  /* never overflows */
    return x >= 0 ? ({T})1 / (({T})1 + e) : e / (({T})1 + e);
}}
"""
_SIGN = """
inline {T} ew_sign({T} x) {{ return x > 0 ? ({T})1 : x < 0 ? ({T})-1 : x == 0 ? ({T})0 : x; }}
"""
# NumPy's maximum/minimum: NaN in either operand gives NaN; ties give the second operand.  ``a != a``, not
# ``isnan(a)``: PoCL 3.0 calls that builtin out of line, which stops its vectoriser (maximum of 1M float16
# values on PoCL: 13.3 ms with isnan, 0.45 ms with a != a; Intel's runtime: the same either way).
_MAXMIN = """
inline {T} ew_maximum({T} a, {T} b) {{ return (a > b || a != a) ? a : b; }}
inline {T} ew_minimum({T} a, {T} b) {{ return (a < b || a != a) ? a : b; }}
"""
_IMAXMIN = """
inline {T} ew_maximum({T} a, {T} b) {{ return a > b ? a : b; }}
inline {T} ew_minimum({T} a, {T} b) {{ return a < b ? a : b; }}
"""
# Integer division (the core never sends it: ints divide in float32) truncates; x / 0 gives 0 instead of
# C's undefined behaviour.  Integer pow wraps like NumPy; a negative exponent, which NumPy refuses, gives
# the truncated 1 / a**-b (1 for a = 1, +-1 for a = -1, else 0), as torch does.
_IDIV = """
inline {T} ew_div({T} a, {T} b) {{
    if (b == 0) return 0;
    if (b == -1) return ({T})(({U})0 - ({U})a);
    return a / b;
}}
"""
_IPOW = """
inline {T} ew_pow({T} a, {T} b) {{
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    {U} base = ({U})a, acc = 1;
    while (b) {{ if (b & 1) acc *= base; base *= base; b >>= 1; }}
    return ({T})acc;
}}
"""

UNARY_OPS: dict[str, Op] = {
    "neg": Op("-{0}", "({T})(({U})0 - ({U}){0})"),
    "abs": Op("fabs({0})", "({0} < 0 ? ({T})(({U})0 - ({U}){0}) : {0})"),
    "exp": Op("exp({0})"),
    "log": Op("log({0})"),
    "sqrt": Op("sqrt({0})"),
    "rsqrt": Op("(({T})1 / sqrt({0}))"),  # IEEE: rsqrt(-0) = -inf, which the rsqrt builtin need not give
    "tanh": Op("tanh({0})"),
    "sigmoid": Op("ew_sigmoid({0})", fhelpers=_SIGMOID),
    "erf": Op("erf({0})", f32_in_double=True),
    "sign": Op("ew_sign({0})", "({T})(({0} > 0) - ({0} < 0))", _SIGN),
    "sin": Op("sin({0})"),
    "cos": Op("cos({0})"),
}
BINARY_OPS: dict[str, Op] = {
    "add": Op("{0} + {1}", "({T})(({U}){0} + ({U}){1})", native_half=True),
    "sub": Op("{0} - {1}", "({T})(({U}){0} - ({U}){1})", native_half=True),
    "mul": Op("{0} * {1}", "({T})(({U}){0} * ({U}){1})", native_half=True),
    "div": Op("{0} / {1}", "ew_div({0}, {1})", ihelpers=_IDIV, native_half=True),
    "pow": Op("pow({0}, {1})", "ew_pow({0}, {1})", ihelpers=_IPOW, f32_in_double=True),
    "maximum": Op("ew_maximum({0}, {1})", "ew_maximum({0}, {1})", _MAXMIN, _IMAXMIN, native_half=True),
    "minimum": Op("ew_minimum({0}, {1})", "ew_minimum({0}, {1})", _MAXMIN, _IMAXMIN, native_half=True),
}
COMPARE_OPS: dict[str, str] = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# float16/bfloat16 neg and abs flip or clear the sign bit of the stored word: exact, no conversion.
_SIGN_BIT_OPS = {"neg": "(ushort)({0} ^ 0x8000)", "abs": "(ushort)({0} & 0x7fff)"}


def _work(op: Op, ct: CType, state: DeviceState, native: bool) -> str:
    if native:
        return "half"
    if ct.tag == "f32" and op.f32_in_double and state.fp64:
        return "double"
    return ct.compute


def _store(out: CType, work: str) -> Callable[[str], str]:
    """Store a value of type ``work`` into ``out``'s storage, rounded once."""
    if work == "half":
        return lambda v: out.store("out", "i", f"(float)({v})")
    if work == "double" and out.tag == "f16":
        return lambda v: out.store("out", "i", f"double_to_float_odd({v})")
    return lambda v: out.store("out", "i", v, value_type=work)


def _elementwise(name: str, op: Op, operands: list[Any]) -> CLArray:
    """Run a unary or binary ``op`` on CLArrays and Python numbers (at least one array)."""
    arrays = [v for v in operands if isinstance(v, CLArray)]
    state, dtype = arrays[0].state, arrays[0].dtype
    ct = ctype(dtype)
    out_shape = tuple(np.broadcast_shapes(*(v.shape for v in arrays)))
    out = empty(state, out_shape, dtype)
    if out.size == 0:
        return out
    p = plan(out_shape, operands)
    if ct.dtype.is_floating_point and len(operands) == 1 and name in _SIGN_BIT_OPS and ct.itemsize == 2:
        ops = [Operand(ct, p.modes, ct.storage, raw=True)]
        key = (name, ct.tag, p.modes, "bits")

        def make() -> str:
            return source(
                f"ew_{name}_{ct.tag}",
                ct,
                lambda v: f"out[i] = {v};",
                ops,
                _SIGN_BIT_OPS[name],
                "",
                p.strided,
                state.fp64,
            )

        return run(state, key, f"ew_{name}_{ct.tag}", make, out, ops, operands, p)
    if not ct.dtype.is_floating_point and op.iexpr is None:
        raise TypeError(f"{name} needs a floating-point array, got {dtype.name}; cast it to float32 first")
    native = op.native_half and ct.tag == "f16" and state.half.native
    work = _work(op, ct, state, native)
    ops = [Operand(ct, m, work) for m in p.modes]
    values = [v if isinstance(v, CLArray) else scalar_arg(v, dtype, work) for v in operands]
    is_float = ct.dtype.is_floating_point
    expr = (op.fexpr if is_float else op.iexpr).replace("{T}", work).replace("{U}", unsigned(work))
    helpers = (op.fhelpers if is_float else op.ihelpers).format(T=work, U=unsigned(work))
    kname = f"ew_{name}_{ct.tag}"
    key = (name, ct.tag, p.modes, work)

    def make() -> str:
        return source(
            kname,
            ct,
            _store(ct, work),
            ops,
            expr,
            helpers,
            p.strided,
            state.fp64,
            native_half=native,
        )

    return run(state, key, kname, make, out, ops, values, p)


def _compare(name: str, a: Any, b: Any) -> CLArray:
    """``a <op> b`` -> bool, compared exactly in the operands' own compute type (int64 stays int64)."""
    arrays = [v for v in (a, b) if isinstance(v, CLArray)]
    state, dtype = arrays[0].state, arrays[0].dtype
    ct, out_ct = ctype(dtype), ctype(dt.bool_)
    out = empty(state, tuple(np.broadcast_shapes(*(v.shape for v in arrays))), dt.bool_)
    if out.size == 0:
        return out
    p = plan(out.shape, (a, b))
    ops = [Operand(ct, m, ct.compute) for m in p.modes]
    values = [v if isinstance(v, CLArray) else scalar_arg(v, dtype, ct.compute) for v in (a, b)]
    kname = f"ew_{name}_{ct.tag}"

    def make() -> str:
        return source(
            kname,
            out_ct,
            lambda v: f"out[i] = (uchar)({v});",
            ops,
            f"{{0}} {COMPARE_OPS[name]} {{1}}",
            "",
            p.strided,
            state.fp64,
        )

    return run(state, (name, ct.tag, p.modes), kname, make, out, ops, values, p)


def where(cond: CLArray, a: Any, b: Any) -> CLArray:
    """``a`` where ``cond`` else ``b``, selecting storage bits (NaN payloads, -0.0 and int64 kept exactly)."""
    dtype = next(v.dtype for v in (a, b) if isinstance(v, CLArray))
    state, ct = cond.state, ctype(dtype)
    shapes = [v.shape for v in (cond, a, b) if isinstance(v, CLArray)]
    out = empty(state, tuple(np.broadcast_shapes(*shapes)), dtype)
    if out.size == 0:
        return out
    p = plan(out.shape, (cond, a, b))
    ops = [Operand(ctype(dt.bool_), p.modes[0], "uchar", raw=True)] + [
        Operand(ct, m, ct.storage, raw=True) for m in p.modes[1:]
    ]
    values = [cond] + [v if isinstance(v, CLArray) else storage_scalar(v, dtype) for v in (a, b)]
    kname = f"ew_where_{ct.tag}"

    def make() -> str:
        return source(
            kname,
            ct,
            lambda v: f"out[i] = {v};",
            ops,
            "{0} ? {1} : {2}",
            "",
            p.strided,
            state.fp64,
        )

    return run(state, ("where", ct.tag, p.modes), kname, make, out, ops, values, p)


# --------------------------------------------------------------------------- cast
def _convert(src: CType, dst: CType, v: str) -> tuple[str, str]:
    """(C expression, its type) converting ``v`` (in ``src``'s compute type) so that ``dst``'s store
    rounds it exactly once."""
    if dst.tag == "b8" or (src.dtype.is_floating_point and not dst.dtype.is_floating_point):
        return v, src.compute  # the bool store tests != 0; a C cast to an integer truncates, like astype
    if not src.dtype.is_floating_point:  # integer or bool -> float: one rounding (to odd first where a second follows)
        if dst.tag in ("f16", "bf16", *cgen.FLOAT8_TAGS):
            return f"long_to_float_odd((long)({v}))", "float"
        if dst.tag in ("f32", "f64"):
            return f"convert_{dst.compute}_rte({v})", dst.compute
        return f"({dst.compute})({v})", dst.compute
    if src.tag == "f64" and dst.tag == "f16":
        return f"double_to_float_odd({v})", "float"
    if src.tag == "f64" and dst.tag == "f32":
        return f"convert_float_rte({v})", "float"
    return v, src.compute


def cast(x: CLArray, dtype: Any) -> CLArray:
    """``x`` converted to ``dtype`` in a new array: floats round to nearest-even once (float64 -> bfloat16
    too), floats to integers truncate like NumPy's astype, anything to bool is ``!= 0``."""
    dtype = dt.as_dtype(dtype)
    state, src, dst = x.state, x.ctype, ctype(dtype)
    out = empty(state, x.shape, dtype)
    if out.size == 0:
        return out
    if dtype == x.dtype:
        with state.launch_lock:
            import pyopencl as cl

            cl.enqueue_copy(state.queue, out.buffer, x.buffer, byte_count=x.nbytes)
        return out
    expr, typ = _convert(src, dst, "{0}")
    ops = [Operand(src, "c", src.compute)]
    kname = f"ew_cast_{src.tag}_{dst.tag}"

    def make() -> str:
        return source(
            kname,
            dst,
            lambda v: dst.store("out", "i", v, value_type=typ),
            ops,
            expr,
            "",
            False,
            state.fp64,
        )

    return run(state, ("cast", src.tag, dst.tag), kname, make, out, ops, [x], plan(x.shape, [x]))


# --------------------------------------------------------------------------- table
def _unary(name: str) -> Callable[[CLArray], CLArray]:
    op = UNARY_OPS[name]

    def kernel(x: CLArray) -> CLArray:
        return _elementwise(name, op, [x])

    kernel.__name__ = name
    kernel.__doc__ = f"Elementwise {name}; the output has the input's dtype."
    return kernel


def _binary(name: str) -> Callable[[Any, Any], CLArray]:
    op = BINARY_OPS[name]

    def kernel(a: Any, b: Any) -> CLArray:
        return _elementwise(name, op, [a, b])

    kernel.__name__ = name
    kernel.__doc__ = f"Elementwise {name} with broadcasting; a Python number takes the array's dtype."
    return kernel


def _comparison(name: str) -> Callable[[Any, Any], CLArray]:
    def kernel(a: Any, b: Any) -> CLArray:
        return _compare(name, a, b)

    kernel.__name__ = name
    kernel.__doc__ = f"Elementwise {name} with broadcasting -> bool."
    return kernel


def kernels() -> dict[str, Callable[..., Any]]:
    """The elementwise and creation kernels, keyed by contract name."""
    table: dict[str, Callable[..., Any]] = {name: _unary(name) for name in UNARY}
    table.update({name: _binary(name) for name in BINARY})
    table.update({name: _comparison(name) for name in COMPARISON})
    table.update(cast=cast, where=where, **create.kernels())
    return table
