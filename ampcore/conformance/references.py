"""Float64 NumPy references for the primitive kernels, exact rounding to every float dtype, and input makers.

Everything here is independent of any backend (and of ampcore's own ops): the
checks compute the expected value of a kernel by evaluating these float64
functions on the inputs *as the device stored them* (read back with
``backend.get``) and rounding the result with :func:`round_to`.

:func:`round_bits` is the one rounding routine: round-to-nearest-even done
with integer arithmetic on the float64 bit pattern, for any binary format
(precision, exponent range).  It deliberately avoids NumPy/ml_dtypes
conversions for float16/bfloat16: ml_dtypes converts float64 to bfloat16
through float32, which rounds twice (``1 + 2**-8 + 2**-40`` becomes 1.0,
not the correctly rounded ``1 + 2**-7``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .. import dtypes as dt
from . import declared

__all__ = [
    "FLOAT_NAMES",
    "INT_NAMES",
    "NUMERIC_NAMES",
    "ALL_NAMES",
    "FORMATS",
    "UNARY_REFERENCE",
    "BINARY_REFERENCE",
    "COMPARE_REFERENCE",
    "gelu_exact",
    "round_bits",
    "round_to",
    "exactly",
    "representable",
    "to_f64",
    "uniform_in",
    "unary_input",
    "binary_inputs",
    "edge_values",
    "subnormals",
    "all_values",
    "sample_values",
    "bits_of",
    "same_bits",
]

FLOAT_NAMES: tuple[str, ...] = tuple(d.name for d in dt.FLOAT_DTYPES)
INT_NAMES: tuple[str, ...] = ("int64", "int32")
NUMERIC_NAMES: tuple[str, ...] = FLOAT_NAMES + INT_NAMES
ALL_NAMES: tuple[str, ...] = tuple(d.name for d in dt.ALL_DTYPES)

# (precision in bits including the implicit one, smallest normal exponent, largest exponent)
FORMATS: dict[dt.DType, tuple[int, int, int]] = {
    dt.float64: (53, -1022, 1023),
    dt.float32: (24, -126, 127),
    dt.float16: (11, -14, 15),
    dt.bfloat16: (8, -126, 127),
}

_MANT_BITS = 52
_MANT_MASK = (1 << _MANT_BITS) - 1


# --------------------------------------------------------------------------- exact rounding
def round_bits(x: np.ndarray, precision: int, emin: int, emax: int) -> np.ndarray:
    """``x`` (float64) rounded to nearest-even in the binary format (precision, emin, emax), as float64.

    Works on the bit pattern: ``|x| = m * 2**e`` with an integer ``m`` < 2**53;
    the target's last place is ``2**q`` with ``q = max(floor(log2|x|), emin) -
    (precision - 1)`` (the max gives gradual underflow), so the result is
    ``round_half_even(m / 2**(q - e)) * 2**q``, and inf where that reaches
    ``2**(emax + 1)`` (IEEE overflow after rounding).  Signs, zeros, inf and
    NaN pass through.
    """
    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    nonzero = np.isfinite(x) & (x != 0)
    v = np.abs(x[nonzero])
    bits = v.view(np.int64)
    field = bits >> _MANT_BITS
    mant = np.where(field > 0, (bits & _MANT_MASK) | (1 << _MANT_BITS), bits & _MANT_MASK)
    exp2 = np.where(field > 0, field - 1075, -1074)
    top = np.frexp(v)[1].astype(np.int64) - 1  # floor(log2 v)
    quantum = np.maximum(top, emin) - (precision - 1)
    shift = quantum - exp2
    s = np.clip(shift, 1, 60)  # mant < 2**53, so a shift of 60 already leaves 0 with rem < half
    kept = mant >> s
    rem = mant & ((np.int64(1) << s) - 1)
    half = np.int64(1) << (s - 1)
    kept = kept + ((rem > half) | ((rem == half) & ((kept & 1) == 1)))
    with np.errstate(over="ignore"):  # 2**(emax + 1) and beyond: inf, as IEEE overflow gives
        rounded = np.where(shift <= 0, v, np.ldexp(kept.astype(np.float64), quantum.astype(np.int32)))
    rounded = np.where(rounded >= 2.0 ** (emax + 1), np.inf, rounded)
    out[nonzero] = np.copysign(rounded, x[nonzero])
    return out


def round_to(x: np.ndarray | float, dtype: dt.DType | str) -> np.ndarray:
    """``x`` rounded once, to nearest-even, to the float ``dtype`` (an array of that NumPy dtype).

    The conversion to the NumPy dtype at the end is exact (the value is
    already representable), so it cannot round a second time.
    """
    d = dt.as_dtype(dtype)
    if not d.is_floating_point:
        raise TypeError(f"round_to rounds to float dtypes; use exactly() for {d.name}")
    x = np.asarray(x, dtype=np.float64)
    if d is dt.float64:
        return x.copy()
    return round_bits(x, *FORMATS[d]).astype(d.numpy)


def to_f64(x: np.ndarray) -> np.ndarray:
    """A host array (any ampcore dtype, bfloat16 included) as float64, exactly."""
    with np.errstate(invalid="ignore"):  # ml_dtypes warns converting a bfloat16 NaN
        return np.asarray(x).astype(np.float64)


def representable(x: np.ndarray, dtype: dt.DType | str) -> np.ndarray:
    """Mask of the elements of float64 ``x`` that ``dtype`` holds exactly (NaN counts as representable)."""
    d = dt.as_dtype(dtype)
    x = np.asarray(x, dtype=np.float64)
    if d.is_floating_point:
        back = to_f64(round_to(x, d))
    elif d is dt.bool_:
        back = np.where((x == 0) | (x == 1), x, np.nan)
    else:
        info = np.iinfo(d.numpy)
        ok = np.isfinite(x) & (x == np.round(x)) & (x >= info.min) & (x <= info.max)
        back = np.where(ok, x, np.nan)
    return (back == x) | (np.isnan(x) & np.isnan(back) & d.is_floating_point)


def exactly(values: np.ndarray, dtype: dt.DType | str) -> np.ndarray:
    """``values`` converted to ``dtype`` where every value is exactly representable (else ValueError).

    Test data for exact checks (casts, data movement) goes through this, so
    no check depends on how some library rounds.
    """
    d = dt.as_dtype(dtype)
    v = np.asarray(values)
    if v.dtype.kind in "iub":  # integers and bools convert exactly when in range
        if d.is_floating_point or d is dt.bool_:
            as_f = v.astype(np.float64)
            if not representable(as_f, d).all() or (v.dtype.kind in "iu" and np.abs(v).max(initial=0) > 2**53):
                raise ValueError(f"values {v!r} are not all exactly representable in {d.name}")
            return as_f.astype(d.numpy) if d.is_floating_point else v.astype(d.numpy)
        info = np.iinfo(d.numpy)
        if v.size and (v.min() < info.min or v.max() > info.max):
            raise ValueError(f"values outside the range of {d.name}")
        return v.astype(d.numpy)
    v = to_f64(v)
    if not representable(v, d).all():
        raise ValueError(f"values {v[~representable(v, d)][:5]!r} are not exactly representable in {d.name}")
    return round_to(v, d) if d.is_floating_point else v.astype(d.numpy)


def bits_of(x: np.ndarray) -> np.ndarray:
    """The raw bit patterns of a host array, as unsigned integers of its itemsize (bool as uint8)."""
    x = np.ascontiguousarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def same_bits(actual: np.ndarray, expected: np.ndarray, nan_payload: bool = False) -> np.ndarray:
    """Elementwise: identical bit patterns (any NaN matches any NaN unless ``nan_payload``)."""
    a, e = np.asarray(actual), np.asarray(expected)
    same = bits_of(a) == bits_of(e)
    if not nan_payload and a.dtype.kind not in "iub":
        same |= np.isnan(to_f64(a)) & np.isnan(to_f64(e))
    return same


# --------------------------------------------------------------------------- float64 references
# The declared elementwise ops' float64 references, by name (ampcore.ops.decls; see .declared): every one the
# registry holds when the suite is imported.
UNARY_REFERENCE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    name: declared.value_reference(name) for name in declared.unary_ops()
}
BINARY_REFERENCE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    name: declared.value_reference(name) for name in declared.binary_ops()
}
COMPARE_REFERENCE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    name: declared.value_reference(name) for name in declared.comparison_ops()
}

_LONG_PI = np.longdouble("3.14159265358979323846264338327950288")
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def gelu_exact(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """gelu of float64 ``x`` to within a few float64 ulps of the true value: x Phi(x) = x erfc(-x / sqrt 2) / 2,
    or torch's tanh form x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)).

    Both are ill-conditioned in their intermediate argument for x << 0 (a relative error d in x / sqrt 2
    moves gelu(-10) by 100 d), so the argument is carried in extended precision (NumPy's longdouble: 64
    significand bits on x86-64): x / sqrt 2 as a float64 pair ``hi + lo`` with ``erfc(hi + lo) = erfc(hi) -
    2 / sqrt(pi) exp(-hi^2) lo``; the tanh form entirely in longdouble.  (Where longdouble is float64, as on
    Windows, it is no better than the plain formulas.)"""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        xl = x.astype(np.longdouble)
        if approximate == "tanh":
            y = 2 * np.sqrt(2 / _LONG_PI) * (xl + np.longdouble("0.044715") * xl * xl * xl)
            negative = y < 0
            e = np.exp(np.where(negative, y, -y))
            return np.asarray(xl * np.where(negative, e / (1 + e), 1 / (1 + e)), np.float64)
        z = -xl * np.sqrt(np.longdouble(0.5))
        hi = z.astype(np.float64)
        lo = (z - hi).astype(np.float64)
        tail = _ERFC(hi) - 2.0 / math.sqrt(math.pi) * np.exp(-hi * hi) * lo if x.size else np.zeros(x.shape)
        return np.asarray(xl * tail.astype(np.longdouble) / 2, np.float64)


# --------------------------------------------------------------------------- input makers
def uniform_in(
    rng: np.random.Generator, shape: tuple[int, ...], low: float, high: float, random_sign: bool = False
) -> np.ndarray:
    """float64 values uniform in [low, high), optionally with a random sign."""
    x = rng.uniform(low, high, size=shape)
    return x * rng.choice([-1.0, 1.0], size=shape) if random_sign else x


def unary_input(op: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random float64 inputs inside ``op``'s declared domain (results well inside float16's range)."""
    return declared.domain(op, 0).sample(rng, shape)


def binary_inputs(
    op: str, shape_a: tuple[int, ...], shape_b: tuple[int, ...], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random float64 operands inside ``op``'s declared domains (divisors away from zero, positive bases for
    pow)."""
    return declared.domain(op, 0).sample(rng, shape_a), declared.domain(op, 1).sample(rng, shape_b)


def edge_values(dtype: dt.DType | str) -> np.ndarray:
    """float64 values every float kernel must get right in ``dtype``: signed zeros, the smallest and
    largest subnormals, the smallest normal, small integers, +-max, +-inf and NaN."""
    f = dt.finfo(dtype)
    largest_subnormal = f.tiny - f.smallest_subnormal
    return np.array(
        [
            0.0,
            -0.0,
            f.smallest_subnormal,
            -f.smallest_subnormal,
            largest_subnormal,
            -largest_subnormal,
            f.tiny,
            -f.tiny,
            0.5,
            1.0,
            -1.0,
            2.0,
            3.0,
            f.max,
            -f.max,
            np.inf,
            -np.inf,
            np.nan,
        ]
    )


def subnormals(dtype: dt.DType | str, count: int = 512, seed: int = 0) -> np.ndarray:
    """Positive subnormals of ``dtype`` as float64: all of them for float16/bfloat16, else ``count``
    spread over the range (the smallest and the largest included)."""
    d = dt.as_dtype(dtype)
    precision = FORMATS[d][0]
    top = 1 << (precision - 1)  # subnormal significands are 1 .. top - 1
    if top - 1 <= count:
        m = np.arange(1, top, dtype=np.float64)
    else:
        rng = np.random.default_rng(seed)
        # log-spread significands so every binade of the subnormal range is hit
        m = np.unique(np.concatenate([[1.0, top - 1.0], np.floor(2.0 ** rng.uniform(0, precision - 1, count))]))
        m = m[(m >= 1) & (m < top)]
    return m * dt.finfo(d).smallest_subnormal


def all_values(dtype: dt.DType | str) -> np.ndarray:
    """Every bit pattern of a 16-bit float dtype, as an array of that dtype."""
    d = dt.as_dtype(dtype)
    if d.itemsize != 2 or not d.is_floating_point:
        raise ValueError(f"all_values enumerates 16-bit floats, not {d.name}")
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(d.numpy)


def sample_values(dtype: dt.DType | str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Test data for exact (bit-for-bit) checks, already in ``dtype``: random floats with signed zeros,
    subnormals, inf and NaN mixed in; integers spanning the dtype's range (beyond 2**53 for int64, so a
    detour through float64 shows); random bools."""
    d = dt.as_dtype(dtype)
    n = int(np.prod(shape))
    if d is dt.bool_:
        return rng.random(n).reshape(shape) < 0.5
    if not d.is_floating_point:
        info = np.iinfo(d.numpy)
        return rng.integers(info.min, info.max, size=n, dtype=d.numpy, endpoint=True).reshape(shape)
    x = rng.standard_normal(n) * 8.0
    specials = np.concatenate([[0.0, -0.0, np.inf, -np.inf, np.nan], subnormals(d, 8)[-3:]])
    where = rng.permutation(n)[: min(n, specials.size)]
    x[where] = specials[: where.size]
    return round_to(x, d).reshape(shape)
