"""Every elementwise primitive kernel (unary, binary, comparisons, where), called directly on device arrays,
against a float64 NumPy reference.

Inputs go to the device already in the dtype (so the placement cannot round),
are read back with ``backend.get``, and the reference is evaluated in float64
on what was read back.  Each elementwise result is judged at its own value, down
to the subnormals, by :func:`~ampcore.conformance.tolerance.assert_elementwise`:
correctly rounded ops (add, sub, mul, div, sqrt; neg, abs, sign, maximum,
minimum are exact) must give the reference rounded once to the dtype, library
functions (exp, log, ...) must stay within their documented ulps.  Inputs whose
results are small or subnormal are checked too, so a kernel that flushes them
to zero fails.  Data movement, selection, casts and integer results must match
bit for bit.

(The AMP kernels ``unscale_and_check`` / ``update_scale`` have their own module.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ampcore import dtypes as dt
from ampcore import expr as E
from ampcore.conformance import declared
from ampcore.conformance.kernel_harness import (
    assert_bits,
    exact_reference,
    layouts,
    put_rounded,
    quietly,
    result_on_host,
    seeded_rng,
    stored_values,
)
from ampcore.conformance.references import (
    ALL_NAMES,
    BINARY_REFERENCE,
    COMPARE_REFERENCE,
    FLOAT_NAMES,
    INT_NAMES,
    NUMERIC_NAMES,
    UNARY_REFERENCE,
    binary_inputs,
    edge_values,
    round_to,
    sample_values,
    subnormals,
    to_f64,
    unary_input,
)
from ampcore.conformance.tolerance import assert_elementwise, correctly_rounded
from ampcore.ops import declare

# The declared elementwise ops (ampcore/ops/decls), each checked with its declaration's domain, reference and
# error bound: a newly declared op is in every check below that fits its kinds.
UNARY = declared.unary_ops()
BINARY = declared.binary_ops()
COMPARISON = declared.comparison_ops()

# The functions NumPy evaluates in longdouble too (erf is math.erf's, float64 only): float64 results of ops made
# of these alone are held to their own ulps, not to those plus the float64 reference's.
_LONGDOUBLE = frozenset(
    {"exp", "log", "sqrt", "tanh", "sin", "cos", "pow", "log1p", "expm1", "neg", "abs", "add", "sub"}
)
_LONGDOUBLE |= frozenset({"mul", "div"})
_LONGDOUBLE |= frozenset({"select", "maximum", "minimum", *E.COMPARISONS})


def _exact(op: str, reference: Callable[..., np.ndarray], dtype: str, *values: np.ndarray) -> np.ndarray:
    """The op's reference on the stored values: in longdouble for float64 results where it can be."""
    decl = declare.get(op)
    prog = decl.program if decl is not None and decl.reference is None else None
    in_longdouble = prog is not None and all(n.op in _LONGDOUBLE for n in prog.nodes)
    extended = dtype == "float64" and in_longdouble and not correctly_rounded(op)
    return exact_reference(reference, *values, extended=extended)


# --------------------------------------------------------------------------- elementwise unary
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", UNARY)
def test_unary(backend, op, dtype):
    """Random inputs inside the op's domain, on odd shapes, views and empty arrays."""
    backend.require_compute(dtype)
    kernel = getattr(backend.kernels, op)
    for label, x, values in layouts(backend, unary_input(op, (13, 14), seeded_rng(op, dtype)), dtype):
        what = f"{op} on {label} in {dtype}"
        out = result_on_host(backend, kernel(x), dtype, what)
        assert_elementwise(out, _exact(op, UNARY_REFERENCE[op], dtype, values), dtype, op, what=what, inputs=(values,))


# Inputs whose results are small, down to the subnormals (and the smallest normal), where a kernel that flushes
# small results to zero, or computes them with absolute rather than relative accuracy, is caught: exp and
# sigmoid of large negative x, the odd functions near 0 (f(x) ~ x), log near 1 and cos near pi/2.  (sqrt and
# rsqrt have no small results near representable inputs: their subnormal inputs are among the edge values.)
def _small_result_inputs(op: str, dtype: str) -> np.ndarray:
    """Inputs where the op's results are small, by its declaration's ``small_results``."""
    f = dt.finfo(dtype)
    where = declare.get(op).small_results  # type: ignore[union-attr]
    if where == "negative tail":
        low, tiny = np.log(f.smallest_subnormal), np.log(f.tiny)
        return np.concatenate([np.linspace(low, tiny + 2.0, 61), np.linspace(-8.0, -1.0, 29)])
    if where == "near one":
        return 1.0 + np.geomspace(f.eps, 2.0**-3, 40) * np.repeat([1.0, -0.5], 20)
    if where == "near pi/2":
        return np.pi / 2 + np.geomspace(f.eps, 2.0**-3, 40) * np.repeat([1.0, -1.0], 20)
    s = subnormals(dtype, 64, seed=7)  # "near zero": f(x) ~ x (or its sign) near 0
    return np.concatenate([s, -s, np.geomspace(f.tiny, 2.0**-4, 40), -np.geomspace(f.tiny, 2.0**-4, 40)])


# The ops whose declarations say where their results are small (sqrt and rsqrt have no small results near
# representable inputs: their subnormal inputs are among the edge values).
SMALL_RESULT_OPS = tuple(op for op in UNARY if declare.get(op).small_results is not None)  # type: ignore[union-attr]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", SMALL_RESULT_OPS)
def test_unary_small_results(backend, op, dtype):
    """Results near zero and subnormal are within the same ulps at their own value (an elementwise result has
    no reduction to excuse an absolute error): a flush to zero, or exp(x) = 0 for x = -9, fails."""
    backend.require_compute(dtype)
    x = put_rounded(backend, _small_result_inputs(op, dtype), dtype)
    values = stored_values(backend, x)
    what = f"{op} with small results in {dtype}"
    out = result_on_host(backend, quietly(what, getattr(backend.kernels, op), x), dtype, what)
    assert_elementwise(out, _exact(op, UNARY_REFERENCE[op], dtype, values), dtype, op, what=what, inputs=(values,))


# Kernels that must return their input's bits transformed exactly (no flush of subnormals to zero): the declared
# ops that round nothing (neg, abs, sign, relu).
EXACT_UNARY = declared.exact_ops(UNARY)
# Ops whose result on NaN the contract leaves open (their declarations say so: sign is NaN in NumPy, 0 in torch).
NAN_UNSPECIFIED = frozenset(op for op in UNARY if declare.get(op).nan_unspecified)  # type: ignore[union-attr]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", UNARY)
def test_unary_edge_values(backend, op, dtype):
    """Signed zeros, subnormals, +-max, +-inf and NaN give the IEEE results (log(0) = -inf, log(-1) = NaN,
    sqrt(-1) = NaN, rsqrt(0) = inf, exp(max) = inf ...); neg/abs keep every subnormal bit-exactly."""
    backend.require_compute(dtype)
    kernel = getattr(backend.kernels, op)
    edges = edge_values(dtype)
    x = put_rounded(backend, edges[~np.isnan(edges)] if op in NAN_UNSPECIFIED else edges, dtype)
    values = stored_values(backend, x)
    what = f"{op} on edge values in {dtype}"
    out = result_on_host(backend, quietly(what, kernel, x), dtype, what)
    assert_elementwise(out, _exact(op, UNARY_REFERENCE[op], dtype, values), dtype, op, what=what, inputs=(values,))
    if op in EXACT_UNARY:
        s = subnormals(dtype)
        x = put_rounded(backend, np.concatenate([s, -s, [0.0, -0.0]]), dtype)
        out = result_on_host(backend, kernel(x), dtype, what)
        assert_bits(
            out,
            round_to(UNARY_REFERENCE[op](stored_values(backend, x)), dtype),
            f"{op} of {dtype} subnormals and signed zeros (a flush to zero fails here)",
        )


# --------------------------------------------------------------------------- elementwise binary
BROADCASTS: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
    ((7, 13), (7, 13)),
    ((4, 1), (1, 5)),
    ((3,), (2, 3)),
    ((2, 1, 5), (3, 1)),
    ((0, 3), (1, 3)),
    ((2, 3), ()),
]
# Python scalars for either operand (kernels.py: a number takes the array's dtype); exact in every dtype.
SCALARS: dict[str, tuple[float | int, ...]] = {
    "add": (1.5, 3),
    "sub": (0.75, 2),
    "mul": (-2.0, 3),
    "div": (4.0, 3),
    "pow": (2.0, 3),
    "maximum": (0.0, 1),
    "minimum": (0.5, -1),
}


def _check_binary(backend: Any, op: str, dtype: str, a: Any, b: Any, label: str) -> None:
    """Run ``op`` on two operands (device arrays or Python scalars) and compare with the reference."""
    stored = [
        stored_values(backend, v) if not isinstance(v, (int, float)) else to_f64(round_to(v, dtype)) for v in (a, b)
    ]
    what = f"{op} on {label} in {dtype}"
    out = result_on_host(backend, quietly(what, getattr(backend.kernels, op), a, b), dtype, what)
    exact = _exact(op, BINARY_REFERENCE[op], dtype, *stored)
    assert_elementwise(out, exact, dtype, op, what=what, inputs=tuple(stored))


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", BINARY)
def test_binary(backend, op, dtype):
    """Random operands (divisors away from 0, positive bases for pow) with broadcasting, non-contiguous
    views, empty arrays, and a Python scalar on either side."""
    backend.require_compute(dtype)
    k, rng = backend.kernels, seeded_rng(op, dtype)
    for sa, sb in BROADCASTS:
        a, b = binary_inputs(op, sa, sb, rng)
        _check_binary(
            backend, op, dtype, put_rounded(backend, a, dtype), put_rounded(backend, b, dtype), f"{sa} and {sb}"
        )
    a, b = binary_inputs(op, (13, 7), (7, 26), rng)
    a_view = k.transpose(put_rounded(backend, a, dtype), (1, 0))
    b_view = k.slice(put_rounded(backend, b, dtype), (slice(None), slice(25, None, -2)))
    _check_binary(backend, op, dtype, a_view, b_view, "a transposed view and a negative-step view")
    a, b = binary_inputs(op, (4, 5), (4, 5), rng)
    for s in SCALARS.get(op, (declared.scalar_in(op, 1),)):
        _check_binary(backend, op, dtype, put_rounded(backend, a, dtype), s, f"an array and the scalar {s!r}")
        _check_binary(backend, op, dtype, s, put_rounded(backend, b, dtype), f"the scalar {s!r} and an array")


def _identities(op: str, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(a, b, exact result) over every subnormal (both signs), for ops where the result is one operand
    exactly: x + 0, x - 0, x * 1, x / 1, x ** 1, max(x, -x) = |x|, min(x, -x) = -|x|."""
    s = subnormals(dtype)
    x = np.concatenate([s, -s, [dt.finfo(dtype).tiny, -dt.finfo(dtype).max]])
    table = {
        "add": (x, np.zeros_like(x), x),
        "sub": (x, np.zeros_like(x), x),
        "mul": (x, np.ones_like(x), x),
        "div": (x, np.ones_like(x), x),
        "pow": (np.abs(x), np.ones_like(x), np.abs(x)),
        "maximum": (x, -x, np.abs(x)),
        "minimum": (x, -x, -np.abs(x)),
    }
    return table.get(op)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", BINARY)
def test_binary_edge_values(backend, op, dtype):
    """Every pair of edge values (signed zeros, subnormals, +-max, +-inf, NaN) gives the IEEE result:
    max + max = inf, inf - inf = NaN, 1 / 0 = inf, 1 / -0 = -inf, 0 / 0 = NaN, max(NaN, x) = NaN ...;
    and identities keep every subnormal bit-exactly (x + 0, x * 1, max(x, -x): a flush to zero fails)."""
    backend.require_compute(dtype)
    v = edge_values(dtype)
    _check_binary(
        backend,
        op,
        dtype,
        put_rounded(backend, np.repeat(v, v.size), dtype),
        put_rounded(backend, np.tile(v, v.size), dtype),
        "every pair of edge values",
    )
    identity = _identities(op, dtype)
    if identity is None:
        return  # no identity known for this op: its edge values above are its check
    a, b, result = identity
    device_out = getattr(backend.kernels, op)(put_rounded(backend, a, dtype), put_rounded(backend, b, dtype))
    out = result_on_host(backend, device_out, dtype, op)
    assert_bits(out, round_to(result, dtype), f"{op} identities on {dtype} subnormals (a flush to zero fails here)")


# --------------------------------------------------------------------------- integer arithmetic
# The core calls these kernels on int64/int32 operands (both integer tensors, or one and a Python int), and the
# unary neg/abs/sign on integer tensors; results are exact, in the operands' dtype.  div never sees integers:
# true division of integers promotes to float32 in the core, as torch does (floor_divide is a separate op,
# not in the contract); the float-only unary ops likewise cast integers to float32 first.
INTEGER_BINARY = declared.integer_ops(BINARY)
INTEGER_UNARY = declared.integer_ops(UNARY)


def _int_operands(op: str, dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Operands whose exact result fits ``dtype``; for int64, values beyond 2**53 where add/sub/max/min are
    defined (a kernel computing in float64 loses their low bits)."""
    big = dtype == "int64" and op in ("add", "sub", "maximum", "minimum", "neg", "abs", "sign")
    if op == "pow":
        return rng.integers(-6, 7, size=shape), rng.integers(0, 5, size=shape)
    if op == "mul":
        bound = 2**31 if dtype == "int64" else 2**15
        return rng.integers(-bound, bound, size=shape), rng.integers(-bound, bound, size=shape)
    bound = 2**61 if big else 2**29
    return rng.integers(-bound, bound, size=shape, dtype=np.int64), rng.integers(
        -bound, bound, size=shape, dtype=np.int64
    )


def _check_int(backend: Any, op: str, dtype: str, operands: tuple[Any, ...], label: str) -> None:
    d = dt.as_dtype(dtype)
    host = [np.asarray(v, dtype=d.numpy) if isinstance(v, int) else backend.get(v) for v in operands]
    what = f"{op} on {label} in {dtype}"
    out = result_on_host(backend, getattr(backend.kernels, op)(*operands), dtype, what)
    exact = np.asarray(declared.value_reference(op)(*(h.astype(np.int64) for h in host)))
    assert_bits(out, exact.astype(d.numpy), what + " (integer results are exact)")


@pytest.mark.parametrize("dtype", INT_NAMES)
@pytest.mark.parametrize("op", INTEGER_BINARY)
def test_binary_integer(backend, op, dtype):
    """Integer add/sub/mul/pow/maximum/minimum are exact in the operands' dtype, with broadcasting, views,
    empty arrays and a Python int on either side (int64 beyond 2**53 stays exact)."""
    backend.require_compute(dtype)
    rng, k = seeded_rng(op, dtype), backend.kernels
    for sa, sb in BROADCASTS:
        a, _ = _int_operands(op, dtype, sa, rng)
        _, b = _int_operands(op, dtype, sb, rng)
        _check_int(
            backend, op, dtype, (put_rounded(backend, a, dtype), put_rounded(backend, b, dtype)), f"{sa} and {sb}"
        )
    a, b = _int_operands(op, dtype, (7, 5), rng)
    view = k.transpose(put_rounded(backend, a, dtype), (1, 0))
    _check_int(backend, op, dtype, (view, put_rounded(backend, b.T, dtype)), "a transposed view")
    x = put_rounded(backend, _int_operands(op, dtype, (4, 5), rng)[0], dtype)
    for s in (2, 3):
        _check_int(backend, op, dtype, (x, s), f"an array and the scalar {s}")
        if op != "pow":
            _check_int(backend, op, dtype, (s, x), f"the scalar {s} and an array")


@pytest.mark.parametrize("dtype", INT_NAMES)
@pytest.mark.parametrize("op", INTEGER_UNARY)
def test_unary_integer(backend, op, dtype):
    """neg/abs/sign of integers are exact in their dtype (zero, +-1, the extremes but for -min)."""
    backend.require_compute(dtype)
    info = np.iinfo(dt.as_dtype(dtype).numpy)
    a, _ = _int_operands(op, dtype, (6, 7), seeded_rng(op, dtype))
    edges = np.array([0, 1, -1, info.max, info.min + 1], dtype=np.int64)
    for label, values in (("random values", a), ("edge values", edges)):
        _check_int(backend, op, dtype, (put_rounded(backend, values, dtype),), label)


@pytest.mark.parametrize("dtype", INT_NAMES)
@pytest.mark.parametrize(
    "op", [op for op in UNARY if op not in INTEGER_UNARY] + [op for op in BINARY if op not in INTEGER_BINARY]
)
def test_integer_input_promotes_to_float32(backend, op, dtype):
    """The ops the core runs in float32 on integer tensors (torch's true division and float-only math): the
    result is float32 and agrees with the float64 reference rounded to float32."""
    backend.require_compute(dtype, "float32")
    from ampcore.ops.elementwise import binary, unary

    rng = seeded_rng(op, dtype, "promotes")
    values = rng.integers(1, 50, size=(4, 5))
    x = backend.tensor(values, dtype)
    if op in BINARY:
        divisor = rng.integers(1, 9, size=(4, 5))
        out, ref = binary(op, x, backend.tensor(divisor, dtype)), BINARY_REFERENCE[op](values * 1.0, divisor * 1.0)
    else:
        out, ref = unary(op, x), UNARY_REFERENCE[op](values.astype(np.float64))
    what = f"{op} of {dtype} tensors"
    assert out.dtype == dt.float32, f"{what}: result is {out.dtype.name}, expected float32 (true division/math)"
    assert_elementwise(out.numpy(), ref, "float32", op, what=what)


# --------------------------------------------------------------------------- comparisons and where
def _compare_values(dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Values on a coarse grid, so equal pairs (the eq/le/ge boundary) are common."""
    return rng.integers(-8, 9, size=shape) / 4.0 if dtype in FLOAT_NAMES else rng.integers(-3, 4, size=shape)


def _compare_edges(dtype: str) -> np.ndarray:
    """Edge values: float specials, or integers at the dtype's extremes and around 2**53 (where a
    comparison done in float64 stops telling neighbours apart)."""
    if dtype in FLOAT_NAMES:
        return edge_values(dtype)
    info = np.iinfo(dt.as_dtype(dtype).numpy)
    big = [2**53, 2**53 + 1, -(2**53) - 1] if dtype == "int64" else [2**24, 2**24 + 1]
    return np.array([0, 1, -1, info.min, info.max, info.max - 1, *big], dtype=np.int64)


def _check_compare(backend: Any, op: str, dtype: str, a: Any, b: Any, label: str) -> None:
    def operand(v: Any) -> np.ndarray:
        return backend.get(v) if not isinstance(v, (int, float)) else np.asarray(v, dtype=dt.as_dtype(dtype).numpy)

    what = f"{op} on {label} in {dtype}"
    expected = COMPARE_REFERENCE[op](
        *(h.astype(np.float64) if dtype in FLOAT_NAMES else h for h in map(operand, (a, b)))
    )
    out = result_on_host(backend, getattr(backend.kernels, op)(a, b), "bool", what)
    assert_bits(out, np.asarray(expected), what)


@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
@pytest.mark.parametrize("op", COMPARISON)
def test_comparison(backend, op, dtype):
    """Comparisons give bool with broadcasting and scalars; NaN compares unequal to everything (itself too),
    -0 == 0, and int64 neighbours above 2**53 stay distinct."""
    backend.require_compute(dtype)
    rng = seeded_rng(op, dtype)
    for sa, sb in [((7, 13), (7, 13)), ((4, 1), (1, 5)), ((3,), (2, 3)), ((0, 3), (1, 3))]:
        a, b = _compare_values(dtype, sa, rng), _compare_values(dtype, sb, rng)
        _check_compare(
            backend, op, dtype, put_rounded(backend, a, dtype), put_rounded(backend, b, dtype), f"{sa} and {sb}"
        )
    a = put_rounded(backend, _compare_values(dtype, (4, 5), rng), dtype)
    scalar = 0.5 if dtype in FLOAT_NAMES else 1
    _check_compare(backend, op, dtype, a, scalar, f"an array and the scalar {scalar}")
    _check_compare(backend, op, dtype, scalar, a, f"the scalar {scalar} and an array")
    e = _compare_edges(dtype)
    _check_compare(
        backend,
        op,
        dtype,
        put_rounded(backend, np.repeat(e, e.size), dtype),
        put_rounded(backend, np.tile(e, e.size), dtype),
        "every pair of edge values",
    )


def _scalar_for(dtype: str) -> tuple[Any, ...]:
    """Python scalars for ``where``'s branches: -0.0 and 1.5 for floats, 7 for ints, True for bool."""
    return {"bool": (True,), "int64": (7,), "int32": (7,)}.get(dtype, (-0.0, 1.5))


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_where(backend, dtype):
    """``where`` selects bit-exactly (signed zeros, subnormals, NaN, int64 beyond 2**53) with broadcasting
    of all three operands and a Python scalar for either branch."""
    backend.require_compute(dtype)
    backend.require_storage("bool")
    k, rng, d = backend.kernels, seeded_rng("where", dtype), dt.as_dtype(dtype)

    def check(cond: np.ndarray, a: Any, b: Any, label: str) -> None:
        host = [backend.get(v) if not isinstance(v, (int, float)) else np.asarray(v, dtype=d.numpy) for v in (a, b)]
        what = f"where on {label} in {dtype}"
        out = result_on_host(backend, k.where(put_rounded(backend, cond, "bool"), a, b), dtype, what)
        assert_bits(out, np.where(cond, *host).astype(d.numpy), what)

    a, b = sample_values(d, (6, 7), rng), sample_values(d, (6, 7), rng)
    cond = rng.random((6, 7)) < 0.5
    check(cond, put_rounded(backend, a, dtype), put_rounded(backend, b, dtype), "(6, 7) arrays")
    check(cond[:, :1], put_rounded(backend, a[:1], dtype), put_rounded(backend, b, dtype), "(6, 1), (1, 7) and (6, 7)")
    check(cond, put_rounded(backend, a[0], dtype), put_rounded(backend, b, dtype), "(6, 7), (7,) and (6, 7)")
    check(
        np.zeros((0, 7), bool), put_rounded(backend, a[:0], dtype), put_rounded(backend, b[:1], dtype), "empty (0, 7)"
    )
    for s in _scalar_for(dtype):
        check(cond, put_rounded(backend, a, dtype), s, f"an array and the scalar {s!r}")
        check(cond, s, put_rounded(backend, b, dtype), f"the scalar {s!r} and an array")
