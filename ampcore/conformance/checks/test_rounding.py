"""Rounding honesty: low-precision results are really rounded, once, to nearest-even, in the claimed dtype.

* Casts that narrow (to float16, bfloat16, float32) are bit-exact round-to-nearest-even: exhaustively over
  every 16-bit source value, and over the midpoints between neighbouring destination values and the
  source values one ulp either side of them (where truncation, round-half-up and double rounding through
  float32 differ from RNE); overflow gives inf, NaN stays NaN.  Widening casts are exact.
* add/sub/mul/div/sqrt on float16/bfloat16 equal the correctly rounded result bit for bit.
* Chains whose exact float32 answer differs from the float16/bfloat16 one catch a backend that keeps
  float32 on the device while claiming a 2-byte dtype.

Expected values come from :func:`references.round_bits`, round-to-nearest-even done with integer
arithmetic on the float64 bit pattern (not NumPy's or ml_dtypes' conversions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ampcore import dtypes as dt
from ampcore.conformance.kernel_harness import Array, result_on_host, seeded_rng
from ampcore.conformance.references import (
    BINARY_REFERENCE,
    FORMATS,
    all_values,
    bits_of,
    representable,
    round_to,
    same_bits,
    to_f64,
)

LOW = ["float16", "bfloat16"]


# --------------------------------------------------------------------------- helpers
def _hex(value: Any) -> str:
    """A value with its bit pattern, e.g. ``1.0078125 (0x3f81)``."""
    v = np.asarray(value).reshape(1)
    return f"{float(to_f64(v)[0])!r} (0x{int(bits_of(v)[0]):0{2 * v.dtype.itemsize}x})"


def _assert_rounded(actual: np.ndarray, expected: np.ndarray, inputs: tuple[np.ndarray, ...], what: str) -> None:
    """Bit-for-bit equality (signed zeros included, any NaN for NaN), naming the first few inputs that differ."""
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {actual.shape}, expected {expected.shape}")
    same = same_bits(actual, expected)
    if same.all():
        return
    bad = np.flatnonzero(~same.reshape(-1))
    examples = "; ".join(
        f"f({', '.join(_hex(np.asarray(x).reshape(-1)[i]) for x in inputs)}) gave {_hex(actual.reshape(-1)[i])}, "
        f"round-to-nearest-even gives {_hex(expected.reshape(-1)[i])}"
        for i in bad[:3]
    )
    raise AssertionError(f"{what}: {bad.size} of {same.size} results are not correctly rounded; {examples}")


# --------------------------------------------------------------------------- casts
def _neighbour_pairs(dst: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Consecutive finite values (lo, hi) of ``dst``, with 2**(emax+1) as the neighbour beyond +-max (the
    overflow threshold is the midpoint of max and that): all of them for 16-bit dtypes, else random ones
    plus the boundaries (zero, the subnormal/normal step, max)."""
    d = dt.as_dtype(dst)
    precision, emin, emax = FORMATS[d]
    beyond = 2.0 ** (emax + 1)
    if d.itemsize == 2:
        v = to_f64(all_values(d))
        v = np.unique(np.concatenate([v[np.isfinite(v)], [beyond, -beyond]]))
        return v[:-1], v[1:]
    bits = rng.integers(0, 0x7F800000, size=20000, dtype=np.int64).astype(np.uint32)
    lo = bits.view(np.float32)
    lo = np.concatenate([lo, np.array([0, 2.0**emin, np.finfo(np.float32).max], dtype=np.float32)])
    lo = np.concatenate([lo, -lo])
    with np.errstate(over="ignore"):
        hi = np.nextafter(lo, np.float32(np.inf)).astype(np.float64)
    hi[lo == np.finfo(np.float32).max] = beyond
    return lo.astype(np.float64), hi


def _near(x: np.ndarray, src: str) -> np.ndarray:
    """The ``src`` values one ulp either side of the float64 ``x`` (which must be representable in src)."""
    s = dt.as_dtype(src).numpy
    xs = x.astype(s)
    return np.concatenate([np.nextafter(xs, s.type(np.inf)), np.nextafter(xs, s.type(-np.inf))]).astype(np.float64)


def _cast_inputs(src: str, dst: str) -> np.ndarray:
    """float64 values exactly representable in ``src``: every ``src`` value if it is a 16-bit dtype, else
    the midpoints between neighbouring ``dst`` values and the ``src`` values an ulp either side; plus
    +-0, +-inf, NaN and +-the source's max."""
    rng = seeded_rng("cast", src, dst)
    if dt.as_dtype(src).itemsize == 2:
        values = to_f64(all_values(src))
    else:
        lo, hi = _neighbour_pairs(dst, rng)
        mid = (lo + hi) / 2  # exact: one bit more than dst's precision
        mid = mid[np.abs(mid) <= dt.finfo(src).max]
        values = np.concatenate([mid, _near(mid, src), lo])
    f = dt.finfo(src)
    values = np.concatenate([values, [0.0, -0.0, np.inf, -np.inf, np.nan, f.max, -f.max]])
    return values[representable(values, src)]


NARROWING = [
    ("float32", "float16"),
    ("float64", "float16"),
    ("float32", "bfloat16"),
    ("float64", "bfloat16"),
    ("bfloat16", "float16"),
    ("float16", "bfloat16"),
    ("float64", "float32"),
]
WIDENING = [("float16", "float32"), ("float16", "float64"), ("bfloat16", "float32"), ("bfloat16", "float64")]


@pytest.mark.conformance(op="cast")
@pytest.mark.parametrize("src,dtype", NARROWING, ids=[f"{s}->{d}" for s, d in NARROWING])
def test_narrowing_cast_rounds_to_nearest_even(backend, src, dtype):
    """cast to a narrower float is RNE, bit for bit: ties to even, overflow to inf, underflow to
    subnormals / signed zero.  From float64 this also catches double rounding through float32."""
    backend.require_storage(src, dtype)
    values = _cast_inputs(src, dtype)
    x = backend.put(round_to(values, src), src)
    out = result_on_host(backend, backend.kernels.cast(x, dt.as_dtype(dtype)), dtype, f"cast {src} -> {dtype}")
    with np.errstate(invalid="ignore"):
        _assert_rounded(out, round_to(to_f64(backend.get(x)), dtype), (backend.get(x),), f"cast {src} -> {dtype}")


@pytest.mark.conformance(op="cast")
@pytest.mark.parametrize("src,dtype", WIDENING, ids=[f"{s}->{d}" for s, d in WIDENING])
def test_widening_cast_is_exact(backend, src, dtype):
    """Every float16/bfloat16 value (subnormals, signed zeros, inf) widens exactly."""
    backend.require_storage(src, dtype)
    values = all_values(src)
    x = backend.put(values, src)
    out = result_on_host(backend, backend.kernels.cast(x, dt.as_dtype(dtype)), dtype, f"cast {src} -> {dtype}")
    with np.errstate(invalid="ignore"):
        expected = to_f64(values).astype(dt.as_dtype(dtype).numpy)
    _assert_rounded(out, expected, (values,), f"cast {src} -> {dtype}")


# --------------------------------------------------------------------------- correctly rounded arithmetic
# Why bit-exactness is the right demand: a backend computes a float16/bfloat16 op in float32 and rounds the
# float32 result to the dtype -- two roundings.  For +, -, *, / and sqrt of p-bit operands, rounding first to
# q >= 2p + 2 bits and then to p bits gives the correctly rounded p-bit result (Figueroa, "When is double
# rounding innocuous?", 1995): q = 24 >= 2*11 + 2 = 24 for float16 and >= 2*8 + 2 = 18 for bfloat16.  (In
# the subnormal range the p-bit grid is coarser, which only helps; float32 has the exponent range of
# bfloat16, and float16's whole range is float32-normal.)  Our reference rounds the float64 result of the
# same op -- q = 53, innocuous too -- with the bit-level RNE, so any difference is the backend's.
SAMPLE = 30000


def _random_values(dtype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` float64 values of ``dtype``: a third random bit patterns (every exponent, subnormals, inf and
    zero), a third in [-4, 4), a third in [1, 2) (operands of one binade: cancellation, ties)."""
    k = n // 3
    patterns = to_f64(rng.integers(0, 1 << 16, size=k, dtype=np.int64).astype(np.uint16).view(dt.as_dtype(dtype).numpy))
    patterns[np.isnan(patterns)] = 1.0  # NaN in, NaN out: nothing to learn
    mixed = to_f64(round_to(rng.uniform(-4, 4, k), dtype))
    unit = to_f64(round_to(rng.uniform(1, 2, n - 2 * k), dtype))
    return np.concatenate([patterns, mixed, unit])[:n]


def _ties(dtype: str, a: np.ndarray) -> np.ndarray:
    """For each ``a``: half an ulp of it, times 1 or 3 with a random sign -- so a + b lands exactly on a
    midpoint (where round-half-up or truncation differ from RNE)."""
    precision = FORMATS[dt.as_dtype(dtype)][0]
    exponent = np.frexp(np.where(np.isfinite(a) & (a != 0), a, 1.0))[1]
    half_ulp = np.ldexp(1.0, exponent - precision - 1)
    factor = np.resize([1.0, 3.0, -1.0, -3.0], a.size)
    return to_f64(round_to(half_ulp * factor, dtype))


def _operands(op: str, dtype: str) -> tuple[np.ndarray, ...]:
    """float64 operands, all exactly representable in ``dtype``: random pairs plus hard cases per op."""
    rng = seeded_rng(op, dtype)
    if op == "sqrt":  # exhaustive: every value of the dtype (negatives give NaN)
        return (to_f64(all_values(dtype)),)
    a, b = _random_values(dtype, SAMPLE, rng), _random_values(dtype, SAMPLE, rng)[rng.permutation(SAMPLE)]
    base = _random_values(dtype, 3000, rng)
    if op in ("add", "sub"):
        hard_b = _ties(dtype, base)
        hard_b = -hard_b if op == "sub" else hard_b
    else:  # small multipliers/divisors: products/quotients with few bits, many exact ties and near-ties
        hard_b = np.resize([3.0, 5.0, 1.5, 0.75, 7.0, 10.0, 1.0 + 2.0**-5, 0.0, -0.0], base.size)
    specials = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf])
    sa, sb = np.repeat(specials, specials.size), np.tile(specials, specials.size)
    return np.concatenate([a, base, sa]), np.concatenate([b, hard_b, sb])


UNARY_EXACT: dict[str, Callable[[np.ndarray], np.ndarray]] = {"sqrt": np.sqrt}


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "sqrt"])
def test_arithmetic_is_correctly_rounded(backend, op, dtype):
    """add/sub/mul/div (random pairs, exact ties, zeros, infs) and sqrt (every value) in float16/bfloat16
    equal the correctly rounded result bit for bit (see the comment above on why that is fair)."""
    backend.require_compute(dtype)
    operands = _operands(op, dtype)
    inputs = [backend.put(round_to(x, dtype), dtype) for x in operands]
    stored = tuple(backend.get(x) for x in inputs)
    reference = UNARY_EXACT.get(op) or BINARY_REFERENCE[op]
    with np.errstate(all="ignore"):
        expected = round_to(reference(*(to_f64(s) for s in stored)), dtype)
    what = f"{op} in {dtype}"
    out = result_on_host(backend, getattr(backend.kernels, op)(*inputs), dtype, what)
    _assert_rounded(out, expected, stored, what)


# --------------------------------------------------------------------------- no silent float32
# Below half an ulp of 1: 1 + TINY rounds back to 1 in the dtype, but not in float32.
TINY: dict[str, float] = {"float16": 2.0**-12, "bfloat16": 2.0**-9}


def _chain_add_sub(backend: Any, dtype: str) -> tuple[list[Array], np.ndarray]:
    k, one = backend.kernels, backend.put(np.ones(8), dtype)
    s = k.add(one, backend.put(np.full(8, TINY[dtype]), dtype))
    return [s, k.sub(s, one)], np.zeros(8)


def _chain_scalar(backend: Any, dtype: str) -> tuple[list[Array], np.ndarray]:
    k, one = backend.kernels, backend.put(np.ones(8), dtype)
    s = k.add(one, TINY[dtype])  # the scalar takes the array's dtype; the sum is rounded to it
    return [s, k.sub(s, 1.0)], np.zeros(8)


def _chain_view(backend: Any, dtype: str) -> tuple[list[Array], np.ndarray]:
    k, one = backend.kernels, backend.put(np.ones((2, 4)), dtype)
    s = k.add(one, backend.put(np.full((2, 4), TINY[dtype]), dtype))
    t = k.transpose(k.reshape(s, (4, 2)), (1, 0))
    return [s, t, k.sub(t, 1.0)], np.zeros((2, 4))


def _chain_sum(backend: Any, dtype: str) -> tuple[list[Array], np.ndarray]:
    k = backend.kernels
    s = k.sum(backend.put(np.tile([1.0, TINY[dtype]], (8, 1)), dtype), (1,), False)
    return [s, k.sub(s, 1.0)], np.zeros(8)


def _chain_cumsum(backend: Any, dtype: str) -> tuple[list[Array], np.ndarray]:
    k = backend.kernels
    s = k.cumsum(backend.put(np.array([1.0, TINY[dtype], TINY[dtype]]), dtype), 0)
    return [s, k.sub(s, 1.0)], np.zeros(3)  # 1, 1 + t, 1 + 2t: all round to 1 (1 + 2t is a tie, to even)


def _chain_matmul(backend: Any, dtype: str) -> tuple[list[Array], np.ndarray]:
    k = backend.kernels
    s = k.matmul(backend.put(np.tile([1.0, TINY[dtype]], (3, 1)), dtype), backend.put(np.ones((2, 1)), dtype))
    return [s, k.sub(s, 1.0)], np.zeros((3, 1))


def _chain_mul_div(backend: Any, dtype: str) -> tuple[list[Array], np.ndarray]:
    """(x * 3) / 3 for every x of the dtype in [1, 2): float32 gives x back; the dtype rounds x * 3 first."""
    k = backend.kernels
    precision = FORMATS[dt.as_dtype(dtype)][0]
    x = round_to(1.0 + np.arange(2 ** (precision - 1)) * 2.0 ** (1 - precision), dtype)
    p = k.mul(backend.put(x, dtype), 3.0)
    with np.errstate(all="ignore"):
        expected = to_f64(round_to(to_f64(round_to(to_f64(x) * 3.0, dtype)) / 3.0, dtype))
    return [p, k.div(p, 3.0)], expected


CHAINS: dict[str, Callable[[Any, str], tuple[list[Array], np.ndarray]]] = {
    "add,sub": _chain_add_sub,
    "add scalar,sub": _chain_scalar,
    "add,reshape,transpose,sub": _chain_view,
    "sum,sub": _chain_sum,
    "cumsum,sub": _chain_cumsum,
    "matmul,sub": _chain_matmul,
    "mul,div": _chain_mul_div,
}


@pytest.mark.conformance(op="no_silent_float32")
@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("chain", list(CHAINS))
def test_no_silent_float32(backend, chain, dtype):
    """Each step's result is a ``dtype`` array on the device and the host, and the chain's answer is the
    dtype's, not float32's (e.g. (1 + 2**-12) - 1 is 0 in float16; a float32 intermediate gives 2**-12)."""
    backend.require_compute(dtype)
    steps, expected = CHAINS[chain](backend, dtype)
    hosts = [result_on_host(backend, s, dtype, f"step {i + 1} of {chain} in {dtype}") for i, s in enumerate(steps)]
    result = to_f64(hosts[-1])
    assert result.shape == expected.shape, f"{chain} in {dtype}: shape {result.shape}, expected {expected.shape}"
    differ = result != expected
    if differ.any():
        i = tuple(int(v) for v in np.argwhere(differ)[0])
        raise AssertionError(
            f"{chain} in {dtype}: {int(differ.sum())} of {differ.size} results differ; at {i} got {result[i]!r}, "
            f"the dtype's answer is {expected[i]!r} -- an intermediate was kept wider than {dtype} "
            "(float32 gives this)"
        )
