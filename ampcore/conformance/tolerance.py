"""The tolerance rules of the conformance suite (ampcore's own tests use them too): the error a correct kernel can
make, derived from how the contract says it computes, term by term.

Notation.  ``D`` is the result's dtype, ``p`` its precision (significand bits, the implicit one included) and
``u_D = 2**-p`` its unit roundoff; ``ulp_D(x)`` is the spacing of D's values at ``|x|``:
``2**(max(e, emin) - p + 1)`` for ``2**e <= |x| < 2**(e + 1)``, constant through the subnormals, so every
bound below holds down to them.  ``gamma_n(u) = n u / (1 - n u)`` (Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., 2002, eq. (3.8)).  The reference is float64 NumPy on the inputs exactly as
the device holds them: a 16-bit or float32 input widens to float64 exactly, so the reference's own error is
that of float64 arithmetic, ``u64 = 2**-53`` per operation, and it is counted wherever it is not negligible.

**1. Elementwise results** (:func:`assert_elementwise`).  An elementwise op has no reduction to excuse an
error, so each result is judged at its own value, however small:

- *Correctly rounded ops* (add, sub, mul, div, sqrt; neg, abs, sign, maximum, minimum are exact): the result
  must equal the float64 value rounded once to D (compared by value: NaN matches NaN, the sign of a zero is
  not demanded).  IEEE 754 makes these correctly rounded in float32 and float64; a 16-bit result computed in
  float32 and rounded once is correctly rounded too, because double rounding is innocuous for +, -, *, / and
  sqrt when the wider format has at least 2p + 2 bits (Figueroa, "When is double rounding innocuous?",
  SIGNUM Newsl. 30(3), 1995): 24 >= 2 * 11 + 2 for float16 and 2 * 8 + 2 for bfloat16.
- *Library functions* (exp, log, tanh, ...): at most ``k`` ulps of D from the correctly rounded result, ``k``
  per function in :data:`ELEMENTWISE_ULPS`: the CUDA C++ Programming Guide's maximum ulp errors of its math
  library (appendix "Mathematical Functions", tables of single- and double-precision standard functions),
  the tighter of the two documented bounds ampcore's device backends live with; OpenCL 1.2's table (section
  7.4, e.g. exp and log <= 3 ulp in float32) is looser, and ampcore asks its OpenCL kernels for CUDA's.
  Composed functions (sigmoid, gelu) state the bound of their composition; a function whose definition
  rounds an intermediate argument (gelu's x / sqrt 2) may add its condition in that argument
  (:data:`ELEMENTWISE_CONDITION`), in working-precision ulps.  In float64 a float64 reference is a libm
  result itself, so its documented error (glibc's manual, "Known Maximum Errors in Math Functions", x86_64)
  is added, ``k64 + ref``, unless the check evaluates the reference in longdouble (64 significand bits on
  x86-64, where NumPy has the function): then ``k64`` alone.
- *16-bit results* are computed in float32 and rounded once (the backend contract), so
  ``|computed - exact| <= ulp_D(exact) / 2 + (k32 + 1/2) ulp_32(exact)``: the final rounding, plus the float32
  function's error, which is tiny against a 16-bit ulp (2**-13 of it for float16, 2**-16 for bfloat16).

**2. Sums** (:func:`assert_accumulated`: reductions, GEMMs, convolutions, anything that adds ``n`` terms or
products in an accumulator).  With ``S = sum |term_i|``, which the reference computes alongside the value:

- accumulation: ``|fl(sum) - sum| <= gamma_n(u_acc) S`` (Higham, eq. (3.4) and section 4.2: recursive
  summation gives gamma_{n-1}; an inner product of length n, its products rounded, gamma_n; any order and
  any blocking obeys the recursive bound, since every term passes through at most n - 1 additions).
  ``u_acc`` is the accumulator's unit roundoff: float32's ``2**-24`` for float32 and 16-bit results (the
  contract: never a 16-bit accumulator), float64's ``2**-53`` for float64.  NVIDIA's tensor cores add with
  round-toward-zero (Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ
  Comput. Sci. 7:e330, 2021), whose error per addition is up to ``2 u |partial sum|``: their bound is
  ``2 u sum_k |s_k|`` over the partial sums, within ``gamma_n(u) S`` as long as the partial sums average at
  most half of S, which holds for the suite's data (random signs: they stay near sqrt(k); one sign and
  evenly spread: they average S / 2), though not for an adversary's;
- the reference's own float64 sum: ``gamma_n(u64) S``;
- intermediate roundings to D of partial results (a composed ``linear`` rounds ``x @ w.T`` before adding the
  bias), when the caller counts them: ``roundings * u_D * S``;
- the final rounding to D: ``ulp_D(|exact| + B) / 2``, B the sum of the terms above.

*Worst case n, not sqrt(n).*  The probabilistic bound ``lambda sqrt(n) u S`` (Higham and Mary, SIAM J. Sci.
Comput. 41(5), 2019) holds only while rounding errors are independent and of mean zero.  Correct kernels
break that: summing 10**6 copies of 0.1 in float32 one at a time errs by 0.96 % (its rounding errors share a
sign), 160 times ``sqrt(n) u``, yet well within ``gamma_n`` (6 %).  A conformance suite must not fail a
correct kernel for the order it sums in or the data it is given, so the bound is the worst case.  It still
has teeth: for a bfloat16 (m, 1500) @ (1500, n) product of uniform [-1, 1) values, ``gamma_n(2**-24) S`` is
0.38 % of the result's magnitude at the median (S is about 43 times the result there), 0.69 % with the final
half ulp, where the old rule allowed 121 %; a result 1 % off fails in most elements.  And the checks choose
data that make it sharp: long sums of same-sign terms, where ``S = |sum|``, the bound is ``n u`` of the
result, and a 16-bit accumulator, which stalls once the partial sum outgrows the terms, is far outside it.

**3. Composites** (:func:`assert_close`: multi-stage functions such as softmax, layer_norm, losses, attention,
optimizer steps, composed by the core from primitives that each round to D, or fused and rounded once):
``|computed - exact| <= (r u_D + gamma_n(u_acc) + gamma_n(u64)) (|exact| + M)``, M the largest finite
magnitude of the result (at least ``scale``, the magnitude of the inputs it came from, for results that
cancel toward zero).  ``r`` counts the roundings to D on the way (default 8), each a relative perturbation
of a value no larger than ``|exact| + M``; ``n`` is the fan-in of the sums inside.  Unlike the old rule
(``4 eps_D sqrt(n)``), D's epsilon no longer grows with the reduction length: the accumulator is float32.

Non-finite reference values are not approximated: where the reference (rounded to D) is +inf, -inf or NaN
the result must be exactly that (IEEE semantics).  No check loosens a rule; a backend that needs more is
listed in its known-gaps file with the measured reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from .. import dtypes as dt
from .. import expr as E
from ..ops import declare
from .references import FORMATS, round_to

__all__ = [
    "EPS",
    "ELEMENTWISE_ULPS",
    "ELEMENTWISE_CONDITION",
    "CORRECTLY_ROUNDED",
    "unit_roundoff",
    "ulp",
    "gamma",
    "accumulator_roundoff",
    "ulps_apart",
    "elementwise_allowed",
    "correctly_rounded",
    "ulp_bound",
    "accumulation_bound",
    "tolerance",
    "assert_elementwise",
    "assert_accumulated",
    "assert_close",
    "assert_same_nonfinite",
]

# Machine epsilon (spacing at 1.0) of each float dtype.
EPS: dict[dt.DType, float] = {dt.float64: 2.0**-52, dt.float32: 2.0**-23, dt.float16: 2.0**-10, dt.bfloat16: 2.0**-7}

# Exact or correctly rounded in every dtype: the result must be the float64 value rounded once to D.  So is every
# declared op whose program is one correctly rounded operation on its operands (program.exact: relu, where, ...).
CORRECTLY_ROUNDED = frozenset(
    {"add", "sub", "mul", "div", "sqrt", "neg", "abs", "sign", "maximum", "minimum", "round_float16", "round_bfloat16"}
)

# function or op -> (k32, k64, ref64): the maximum error in ulps from the correctly rounded result of the float32
# and the float64 function (CUDA C++ Programming Guide's tables: expf 2, exp 1; logf 1, log 1; tanhf 2, tanh 2;
# sinf/cosf 2, sin/cos 2; powf 4, pow 2; erff 2, erf 2; log1pf 1, log1p 1; expm1f 1, expm1 1), and ref64, the
# float64 reference's own error (glibc's documented x86_64 maxima: exp, log, sin, cos, pow, erf, log1p, expm1 1;
# tanh 2).  A declared op that is one of these
# functions of its operands has the function's bound; a declared composition states its own (its declaration's
# ``ulps``: rsqrt's and sigmoid's are derived there).  The fused kernels' compositions:
# - gelu = x Phi(x) = x erfc(-x / sqrt 2) / 2: erfc's 4 ulps (CUDA's erfcf; erfc 5) and the product's
#   rounding: 6; the reference (references.gelu_exact) is within 3 of the true value (measured against
#   mpmath at 200 bits; glibc's erfc is documented at 5): 5.  A form 1 + erf(x / sqrt 2) cancels for x < -1
#   and fails this.  Plus ELEMENTWISE_CONDITION.
# - gelu.tanh = x sigmoid(2 y), y = sqrt(2/pi) (x + 0.044715 x**3): sigmoid's 3 and the product: 4; the
#   reference is computed in extended precision, 1.  The form x (1 + tanh y) / 2 cancels for x < -2 and
#   fails this.  Plus ELEMENTWISE_CONDITION.
ELEMENTWISE_ULPS: dict[str, tuple[float, float, float]] = {
    "exp": (2, 1, 1),
    "log": (1, 1, 1),
    "tanh": (2, 2, 2),
    "sin": (2, 2, 1),
    "cos": (2, 2, 1),
    "pow": (4, 2, 1),
    "erf": (2, 2, 1),
    "log1p": (2, 1, 1),  # CUDA's log1pf is 1 ulp; NumPy's AVX-512 float32 log1p (the cpu backend's): 2 measured
    "expm1": (2, 1, 1),  # likewise expm1f 1 in CUDA, NumPy's 2 (max over 2.4M arguments in [-8, 8], tiny ones too)
    "gelu": (6, 6, 5),
    "gelu.tanh": (4, 4, 1),
}

_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def _gelu_condition(x: np.ndarray) -> np.ndarray:
    """|x phi(x) / Phi(x)|: how much a relative error in the argument x / sqrt 2, which every implementation
    rounds once in its working precision, is amplified in gelu(x) (about x**2 for x << 0)."""
    with np.errstate(all="ignore"):
        phi_over_cdf = np.sqrt(2.0 / math.pi) * np.exp(-0.5 * x * x) / _ERFC(-x / math.sqrt(2.0))
        return np.where(np.isfinite(phi_over_cdf), np.abs(x) * phi_over_cdf, x * x + 1.0)


def _gelu_tanh_condition(x: np.ndarray) -> np.ndarray:
    """5 |2 y (1 - sigmoid(2 y))|: the five roundings of y = sqrt(2/pi) (x + 0.044715 x**3) (terms of one sign:
    each moves y by at most its unit roundoff), amplified through x sigmoid(2 y)."""
    with np.errstate(all="ignore"):
        y2 = 2.0 * math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        one_minus = np.where(y2 < 0, 1.0 / (1.0 + np.exp(y2)), np.exp(-y2) / (1.0 + np.exp(-y2)))
        return np.nan_to_num(5.0 * np.abs(y2 * one_minus))


# op -> the condition of the function in an intermediate argument its definition rounds (in the working
# precision: float32 for 16-bit and float32 results, float64 for float64 ones), as a function of the input:
# a result may be that many more working-precision ulps off.  Nothing else rounds an argument: exp, sin, ...
# take the input itself, which is exact.
ELEMENTWISE_CONDITION: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gelu": _gelu_condition,
    "gelu.tanh": _gelu_tanh_condition,
}

_U64 = 2.0**-53  # the float64 reference's unit roundoff
DEFAULT_ROUNDINGS = 8


def unit_roundoff(dtype: dt.DType | str) -> float:
    """``u_D = 2**-p``: the largest relative error of one rounding to nearest in ``dtype``."""
    return 2.0 ** -FORMATS[dt.as_dtype(dtype)][0]


def ulp(x: np.ndarray | float, dtype: dt.DType | str) -> np.ndarray:
    """The spacing of ``dtype``'s values at ``|x|`` (float64; subnormal spacing below the smallest normal, the
    spacing just below 2**(emax + 1) beyond the largest finite value; NaN for NaN)."""
    p, emin, emax = FORMATS[dt.as_dtype(dtype)]
    a = np.abs(np.asarray(x, np.float64))
    with np.errstate(invalid="ignore"):
        exponent = np.frexp(np.where(np.isfinite(a), a, 0.0))[1].astype(np.int64) - 1  # floor(log2 |x|)
    exponent = np.clip(np.where(a > 0, exponent, emin), emin, emax)
    return np.where(np.isnan(a), np.nan, np.ldexp(1.0, (exponent - p + 1).astype(np.int32)))


def gamma(n: int, u: float) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)``; ValueError where ``n u >= 1`` (no bound exists)."""
    n = max(int(n), 0)
    if n * u >= 1.0:
        raise ValueError(
            f"no worst-case bound for {n} terms at unit roundoff {u:.3g} (n u >= 1); a sum this long is "
            "judged by its algorithm's depth (e.g. blocked: block length + log2 of the number of blocks)"
        )
    return n * u / (1.0 - n * u)


def accumulator_roundoff(dtype: dt.DType | str) -> float:
    """The unit roundoff of the accumulator of ``dtype`` results: float32's (2**-24) for float32 and 16-bit
    results, float64's (2**-53) for float64."""
    return unit_roundoff(dt.float64 if dt.as_dtype(dtype) is dt.float64 else dt.float32)


def _ordinal(x: np.ndarray, d: dt.DType) -> np.ndarray:
    """Position of each (representable, non-NaN) value among ``d``'s values: consecutive values differ by one,
    +0 and -0 share 0, and +-inf sits one past +-max."""
    bits = np.ascontiguousarray(np.asarray(x, np.float64).astype(d.numpy))
    raw = bits.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[d.itemsize]).astype(np.uint64)
    sign = np.uint64(1) << np.uint64(8 * d.itemsize - 1)
    magnitude = (raw & ~sign).astype(np.int64)
    return np.where((raw & sign) != 0, -magnitude, magnitude)


def ulps_apart(a: np.ndarray, b: np.ndarray, dtype: dt.DType | str) -> np.ndarray:
    """How many of ``dtype``'s values separate ``a`` and ``b`` (both representable in it; NaN where either is)."""
    d = dt.as_dtype(dtype)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    nan = np.isnan(a) | np.isnan(b)
    a, b = np.where(nan, 0.0, a), np.where(nan, 0.0, b)
    return np.where(nan, np.nan, np.abs(_ordinal(a, d) - _ordinal(b, d)).astype(np.float64))


def correctly_rounded(op: str) -> bool:
    """Whether ``op``'s result must be the reference rounded once: :data:`CORRECTLY_ROUNDED`, or a declared op
    whose program is one correctly rounded operation."""
    if op in CORRECTLY_ROUNDED:
        return True
    decl = declare.get(op)
    return decl is not None and decl.program is not None and decl.ulps is None and decl.program.exact


def ulp_bound(op: str) -> tuple[float, float, float]:
    """``(k32, k64, ref64)`` of ``op``: a declared op's own ``ulps``, or its library function's, or the table's."""
    decl = declare.get(op)
    if decl is not None and decl.program is not None:
        if decl.ulps is not None:
            return decl.ulps
        op = E.direct_call(decl.program) or op
    if op not in ELEMENTWISE_ULPS:
        raise KeyError(f"no elementwise error bound for {op!r}; known ones are {sorted(ELEMENTWISE_ULPS)}")
    return ELEMENTWISE_ULPS[op]


def elementwise_allowed(op: str, dtype: dt.DType | str) -> float:
    """``k``: the ulps of ``dtype`` a result of ``op`` may be from the correctly rounded one (0: correctly
    rounded; for 16-bit dtypes, the float32 function's ``k32``, see :func:`assert_elementwise`)."""
    if correctly_rounded(op):
        return 0.0
    k32, k64, ref64 = ulp_bound(op)
    return k64 + ref64 if dt.as_dtype(dtype) is dt.float64 else k32


def accumulation_bound(abs_sum: np.ndarray | float, n: int, dtype: dt.DType | str, roundings: int = 0) -> np.ndarray:
    """``B = (gamma_n(u_acc) + gamma_n(u64) + roundings u_D) S``: everything but the final rounding (rule 2)."""
    d = dt.as_dtype(dtype)
    factor = gamma(n, accumulator_roundoff(d)) + gamma(n, _U64) + roundings * unit_roundoff(d)
    return factor * np.asarray(abs_sum, np.float64)


def tolerance(dtype: dt.DType | str, n: int = 1, roundings: int = DEFAULT_ROUNDINGS) -> float:
    """``r u_D + gamma_n(u_acc) + gamma_n(u64)``: the relative error rule 3 allows a composite result."""
    d = dt.as_dtype(dtype)
    n = max(int(n), 1)
    return roundings * unit_roundoff(d) + gamma(n, accumulator_roundoff(d)) + gamma(n, _U64)


def assert_same_nonfinite(actual: np.ndarray, expected: np.ndarray, what: str = "result") -> None:
    """Where ``expected`` is inf/-inf/NaN, ``actual`` is exactly that, and it is finite elsewhere."""
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    bad = (np.isnan(e) != np.isnan(a)) | (np.isposinf(e) != np.isposinf(a)) | (np.isneginf(e) != np.isneginf(a))
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: at index {i} got {a[i]!r} where the float64 reference gives {e[i]!r} "
            f"({int(bad.sum())} of {bad.size} elements differ in inf/NaN)"
        )


def _inputs_at(inputs: Sequence[np.ndarray], shape: tuple[int, ...], index: tuple[int, ...]) -> str:
    return ", ".join(repr(float(np.broadcast_to(x, shape)[index])) for x in inputs)


def _shapes_match(a: np.ndarray, e: np.ndarray, what: str) -> None:
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shape {a.shape} where the reference has {e.shape}")


def _condition(op: str, inputs: Sequence[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """ELEMENTWISE_CONDITION of ``op`` at its (first) input, broadcast to the result; 0 for other ops."""
    if op not in ELEMENTWISE_CONDITION:
        return np.zeros(shape)
    if not inputs:
        raise ValueError(f"the elementwise rule for {op!r} depends on its input: pass inputs=(x,)")
    return np.broadcast_to(ELEMENTWISE_CONDITION[op](np.asarray(inputs[0], np.float64)), shape)


def assert_elementwise(
    actual: np.ndarray,
    exact: np.ndarray,
    dtype: dt.DType | str,
    op: str,
    *,
    what: str = "result",
    inputs: Sequence[np.ndarray] = (),
) -> None:
    """Each element of ``actual`` (a ``dtype`` result of the elementwise ``op``) within rule 1 of the float64
    ``exact`` value: equal to it rounded once to ``dtype`` for correctly rounded ops, else within
    :func:`elementwise_allowed` ulps of that, or for 16-bit dtypes within ``ulp_D / 2 + (k32 + 1/2) ulp_32`` of
    ``exact``.  ``inputs`` (broadcastable to the result) name the arguments of the worst element.

    An ``exact`` in longdouble wider than float64 (kernel_harness.exact_reference's ``extended``) is a reference
    with no error of its own: a float64 result is then held to ``k64`` alone, as
    ``|actual - exact| <= (k64 + 1/2) ulp``, the reference's ulps not added."""
    d = dt.as_dtype(dtype)
    if d is dt.float64 and np.asarray(exact).dtype == np.longdouble and np.finfo(np.longdouble).nmant > 52:
        _assert_against_extended(actual, np.asarray(exact), op, what, inputs)
        return
    a, e = np.asarray(actual, np.float64), np.asarray(exact, np.float64)
    _shapes_match(a, e, what)
    rounded = np.asarray(round_to(e, d), np.float64)
    assert_same_nonfinite(a, rounded, what)
    finite = np.isfinite(rounded)
    k = elementwise_allowed(op, d)
    condition = _condition(op, inputs, e.shape)
    if d.itemsize == 2 and k > 0:
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.where(finite, np.abs(a - e), 0.0)
            allowed = 0.5 * ulp(e, d) + (k + 0.5 + condition) * ulp(e, dt.float32)
            over = finite & (err > allowed)
            spent = np.where(over, err / ulp(e, d), 0.0)
        rule = f"ulp/2 + ({k:g} + 1/2) float32 ulps (a float32 {op} rounded once)"
    else:
        spent = np.where(finite, ulps_apart(a, rounded, d), 0.0)
        over = spent > k + condition
        rule = "correctly rounded" if k == 0 else f"{k:g} ulps from the correctly rounded result"
    if op in ELEMENTWISE_CONDITION:
        rule += f", plus {op}'s condition in its rounded argument ({float(np.max(condition, initial=0)):.3g} at most)"
    if over.any():
        i = tuple(int(v) for v in np.unravel_index(np.argmax(np.where(over, spent, -1.0)), a.shape))
        args = f" = {op}({_inputs_at(inputs, a.shape, i)})" if inputs else ""
        raise AssertionError(
            f"{what}: {int(over.sum())} of {a.size} elements outside the elementwise rule for {op} in {d.name} "
            f"({rule}); worst at {i}{args}: got {a[i]!r}, exact {e[i]!r} (rounded {rounded[i]!r}), "
            f"{spent[i]:.3g} ulps of {d.name} away"
        )


def _assert_against_extended(
    actual: np.ndarray, exact: np.ndarray, op: str, what: str, inputs: Sequence[np.ndarray]
) -> None:
    """float64 ``actual`` within ``(k64 + 1/2) ulp`` of the longdouble ``exact`` (k64 = 0: correctly rounded)."""
    a = np.asarray(actual, np.float64)
    _shapes_match(a, exact, what)
    with np.errstate(over="ignore"):  # beyond float64's range: inf, as the rounding gives
        rounded = exact.astype(np.float64)  # round to nearest: the correctly rounded result, but at near-ties
    assert_same_nonfinite(a, rounded, what)
    finite = np.isfinite(rounded)
    k = 0.0 if correctly_rounded(op) else ulp_bound(op)[1]
    condition = _condition(op, inputs, a.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        spent = np.where(finite, np.abs(a.astype(np.longdouble) - exact) / ulp(rounded, dt.float64), 0.0)
    over = finite & (spent.astype(np.float64) > k + 0.5 + 2.0**-10 + condition)  # 2**-10: longdouble's own error
    if over.any():
        i = tuple(int(v) for v in np.unravel_index(np.argmax(np.where(over, spent, -1.0)), a.shape))
        args = f" = {op}({_inputs_at(inputs, a.shape, i)})" if inputs else ""
        raise AssertionError(
            f"{what}: {int(over.sum())} of {a.size} elements outside the elementwise rule for {op} in float64 "
            f"({k:g} ulps from the correctly rounded result, against a longdouble reference); worst at {i}{args}: "
            f"got {a[i]!r}, exact {float(exact[i])!r}, {float(spent[i]):.3g} ulps away"
        )


def assert_accumulated(
    actual: np.ndarray,
    exact: np.ndarray,
    abs_sum: np.ndarray,
    dtype: dt.DType | str,
    n: int,
    *,
    roundings: int = 0,
    what: str = "result",
) -> None:
    """``actual``, a ``dtype`` result summed from ``n`` terms (or products), within rule 2 of the float64
    ``exact`` value: ``B + ulp_D(|exact| + B) / 2`` with ``B = accumulation_bound(abs_sum, n, dtype, roundings)``
    and ``abs_sum`` the sum of the terms' magnitudes (same shape as ``exact``)."""
    d = dt.as_dtype(dtype)
    a, e = np.asarray(actual, np.float64), np.asarray(exact, np.float64)
    _shapes_match(a, e, what)
    s = np.broadcast_to(np.asarray(abs_sum, np.float64), e.shape)
    assert_same_nonfinite(a, np.asarray(round_to(e, d), np.float64), what)
    finite = np.isfinite(e)
    with np.errstate(invalid="ignore", over="ignore"):
        b = np.where(finite, accumulation_bound(np.where(finite, s, 0.0), n, d, roundings), 0.0)
        allowed = b + 0.5 * ulp(np.abs(np.where(finite, e, 0.0)) + b, d)
        err = np.where(finite, np.abs(a - e), 0.0)
        over = finite & (err > allowed)
    if over.any():
        with np.errstate(divide="ignore", invalid="ignore"):  # allowed is 0 for an exact zero
            ratio = np.where(over, err / allowed, 0.0)
        i = tuple(int(v) for v in np.unravel_index(np.argmax(np.nan_to_num(ratio, posinf=np.inf)), a.shape))
        raise AssertionError(
            f"{what}: {int(over.sum())} of {a.size} elements outside the accumulation rule for {d.name} "
            f"(n={n}, intermediate roundings {roundings}); worst at {i}: got {a[i]!r}, exact {e[i]!r} (error "
            f"{err[i]:.3g}, allowed {allowed[i]:.3g} = accumulation {b[i]:.3g} of sum|terms| {s[i]:.3g} + half an "
            f"ulp)"
        )


def assert_close(
    actual: np.ndarray,
    expected: np.ndarray,
    dtype: dt.DType | str,
    n: int = 1,
    *,
    roundings: int = DEFAULT_ROUNDINGS,
    scale: float = 1.0,
    what: str = "result",
) -> None:
    """``actual``, a composite ``dtype`` result, within rule 3 of the float64 ``expected``:
    ``tolerance(dtype, n, roundings) * (|expected| + M)``, M the largest finite magnitude of the result and at
    least ``scale``.  Non-finite values must match exactly (:func:`assert_same_nonfinite`)."""
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    _shapes_match(a, e, what)
    assert_same_nonfinite(a, e, what)
    finite = np.isfinite(e)
    tol = tolerance(dtype, n, roundings)
    magnitude = max(scale, float(np.abs(e[finite]).max(initial=0.0)))
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf: already checked above
        err = np.where(finite, np.abs(a - e), 0.0)
    allowed = tol * np.abs(e) + tol * magnitude  # two products: no overflow next to float64's max
    over = finite & (err > np.where(finite, allowed, 0.0))
    if over.any():
        with np.errstate(divide="ignore", invalid="ignore"):  # allowed is 0 for an exact zero
            ratio = np.where(over, err / allowed, 0.0)
        i = tuple(int(v) for v in np.unravel_index(np.argmax(np.nan_to_num(ratio, posinf=np.inf)), a.shape))
        raise AssertionError(
            f"{what}: {int(over.sum())} of {a.size} elements outside tolerance({dt.as_dtype(dtype).name}, n={n}, "
            f"roundings={roundings}) = {tol:.3g}; worst at {i}: got {a[i]!r}, reference {e[i]!r} (error "
            f"{err[i]:.3g}, allowed {allowed[i]:.3g})"
        )
