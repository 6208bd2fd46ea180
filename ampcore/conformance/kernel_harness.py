"""Helpers of the kernel checks: putting exactly-rounded test data on the device, reading results back with
their dtype checked, the float64 references the tolerance rules take (exact values, and the sums of the
terms' magnitudes beside them), and bit-exact comparisons."""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as dt
from .references import exactly, round_to, same_bits, to_f64

__all__ = [
    "Array",
    "quietly",
    "seeded_rng",
    "put_rounded",
    "result_on_host",
    "stored_values",
    "EXTENDED",
    "exact_reference",
    "with_magnitudes",
    "assert_bits",
    "layouts",
]

Array = Any  # a backend (device) array


def quietly(what: str, kernel: Callable[..., Any], *args: Any) -> Any:
    """``kernel(*args)``, failing if it emits a RuntimeWarning: kernels must give IEEE results (log(0) = -inf,
    1/0 = inf, inf - inf = NaN) silently, as torch does; NumPy warns unless told not to."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = kernel(*args)
    noisy = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not noisy, (
        f"{what}: the kernel emitted {len(noisy)} RuntimeWarning(s), first {str(noisy[0].message)!r}; "
        "kernels must not warn on inf/NaN/zero inputs (wrap NumPy calls in "
        "np.errstate(all='ignore'))"
    )
    return out


def seeded_rng(*key: str) -> np.random.Generator:
    """A generator seeded by the test's identity: reruns see the same data, tests see different data."""
    return np.random.default_rng(zlib.crc32("/".join(key).encode()))


def put_rounded(backend: Any, values: Any, dtype: str) -> Array:
    """A device array of ``values`` converted to ``dtype`` on the host first (rounded once for floats,
    exactly for ints/bool), so the device's own float64 conversion never decides the test data."""
    d = dt.as_dtype(dtype)
    v = np.asarray(values)
    if v.dtype != d.numpy:
        v = round_to(to_f64(v), d) if d.is_floating_point and v.dtype.kind == "f" else exactly(v, d)
    return backend.put(v, d)


def result_on_host(backend: Any, out: Array, dtype: str, what: str) -> np.ndarray:
    """The kernel output on the host, after checking it is a ``dtype`` array on the device and on the host."""
    d = dt.as_dtype(dtype)
    claimed = backend.backend.dtype_of(out)
    assert claimed == d, f"{what}: the device says the result is {claimed}, expected {d.name}"
    host = backend.get(out)
    assert host.dtype == d.numpy, f"{what}: to_numpy gave a {host.dtype} array, expected {d.name}"
    return host


def stored_values(backend: Any, x: Array) -> np.ndarray:
    """The values the device holds, as float64 (what the reference is evaluated on)."""
    return to_f64(backend.get(x))


# NumPy's longdouble: 64 significand bits on x86-64 Linux (the x87 format), plain float64 on some platforms.
EXTENDED = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant


def exact_reference(fn: Callable[..., np.ndarray], *inputs: Any, extended: bool = False) -> np.ndarray:
    """The reference on ``inputs`` (the values the device holds), not rounded: the tolerance rules measure the
    error from the exact value and round it themselves where they need to.  float64, or with ``extended``
    (for float64 results of functions NumPy evaluates in longdouble: exp, log, tanh, pow, ...) in longdouble
    where that is wider, so the reference's own error no longer counts against a float64 kernel."""
    with np.errstate(all="ignore"):
        if extended and EXTENDED:
            wide = [np.asarray(x, np.longdouble) if np.asarray(x).dtype.kind == "f" else x for x in inputs]
            return np.asarray(fn(*wide), np.longdouble)
        return np.asarray(fn(*inputs), np.float64)


def with_magnitudes(fn: Callable[..., np.ndarray], *inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``fn`` (a sum of products of its inputs with coefficients +1: sum, cumsum, matmul, ...) on ``inputs``
    and on their magnitudes: the exact value and the sum of its terms' magnitudes, computed alongside."""
    return exact_reference(fn, *inputs), exact_reference(fn, *(np.abs(x) for x in inputs))


def assert_bits(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    """Bit-for-bit equality (any NaN matches any NaN), shape and dtype included."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        raise AssertionError(
            f"{what}: got a {actual.dtype} array of shape {actual.shape}, expected {expected.dtype} {expected.shape}"
        )
    same = same_bits(actual, expected)
    if not same.all():
        i = tuple(int(v) for v in np.argwhere(~same)[0])
        raise AssertionError(
            f"{what}: {int((~same).sum())} of {same.size} elements differ; first at {i}: got "
            f"{actual[i]!r}, expected {expected[i]!r} (bit-for-bit)"
        )


def layouts(backend: Any, base: np.ndarray, dtype: str) -> list[tuple[str, Array, np.ndarray]]:
    """``base`` (2-D float64, at least (13, 14)) laid out as an odd shape, a 3-D shape, a transposed view, a
    negative-step strided view and two empty arrays: (label, device array, its float64 values).

    Views are made with the backend's own ``transpose``/``slice``; their expected values with NumPy on
    the host copy, so a broken view kernel cannot hide behind its own output.
    """
    k = backend.kernels
    whole = put_rounded(backend, base[:13, :14], dtype)
    host = stored_values(backend, whole)

    def placed(values: np.ndarray) -> tuple[Array, np.ndarray]:
        x = put_rounded(backend, values, dtype)
        return x, stored_values(backend, x)

    return [
        ("shape (7, 13)", *placed(base[:7, :13])),
        ("shape (3, 1, 5)", *placed(base.reshape(-1)[:15].reshape(3, 1, 5))),
        ("transposed view", k.transpose(whole, (1, 0)), host.T),
        ("negative-step view", k.slice(whole, (slice(12, None, -2), slice(1, None, 3))), host[12::-2, 1::3]),
        ("empty (0, 5)", *placed(np.zeros((0, 5)))),
        ("empty (2, 0, 3)", *placed(np.zeros((2, 0, 3)))),
    ]
