"""The one tolerance rule of the conformance suite (ampcore's own tests use it too).

A result in ``dtype`` computed from ``n`` terms may differ from the float64
reference by ``4 * eps(dtype) * sqrt(n)``, relative to the magnitude of the
result (and at least ``scale``, the magnitude of the inputs it came from):
a few roundings to the output dtype, plus float32-or-better accumulation whose
error grows like sqrt(n) for random data.  No check loosens it; a backend that
needs more is listed in its known-gaps file with the reason.

Non-finite reference values are not approximated: where the reference is
+inf, -inf or NaN the result must be exactly that (IEEE semantics).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt

__all__ = ["EPS", "tolerance", "assert_close", "assert_same_nonfinite"]

# Machine epsilon (spacing at 1.0) of each float dtype.
EPS: dict[dt.DType, float] = {dt.float64: 2.0**-52, dt.float32: 2.0**-23, dt.float16: 2.0**-10, dt.bfloat16: 2.0**-7}


def tolerance(dtype: dt.DType | str, n: int = 1) -> float:
    """``4 * eps(dtype) * sqrt(n)``: the allowed relative error of a result reduced over ``n`` terms."""
    return 4.0 * EPS[dt.as_dtype(dtype)] * math.sqrt(max(n, 1))


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


def assert_close(
    actual: np.ndarray,
    expected: np.ndarray,
    dtype: dt.DType | str,
    n: int = 1,
    *,
    scale: float = 1.0,
    what: str = "result",
) -> None:
    """``actual`` matches the float64 ``expected`` within ``tolerance(dtype, n)``.

    The error is relative to each value plus the largest finite magnitude of
    the result (at least ``scale``), so values that cancel to near zero are
    judged against the magnitude they came from.  Non-finite values must match
    exactly (:func:`assert_same_nonfinite`).
    """
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shape {a.shape} where the reference has {e.shape}")
    assert_same_nonfinite(a, e, what)
    finite = np.isfinite(e)
    tol = tolerance(dtype, n)
    magnitude = max(scale, float(np.abs(e[finite]).max(initial=0.0)))
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf: already checked above
        err = np.where(finite, np.abs(a - e), 0.0)
    allowed = tol * np.abs(e) + tol * magnitude  # two products: no overflow next to float64's max
    over = finite & (err > np.where(finite, allowed, 0.0))
    if over.any():
        i = tuple(int(v) for v in np.unravel_index(np.argmax(np.where(over, err / allowed, 0.0)), a.shape))
        raise AssertionError(
            f"{what}: {int(over.sum())} of {a.size} elements outside tolerance({dt.as_dtype(dtype).name}, n={n}) "
            f"= {tol:.3g}; worst at {i}: got {a[i]!r}, reference {e[i]!r} (error {err[i]:.3g}, allowed "
            f"{allowed[i]:.3g})"
        )
