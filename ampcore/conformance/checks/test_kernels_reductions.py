"""Reductions (sum, max, argmax, cumsum) and matmul, in the report's "kernels" section.

Sums are judged by the accumulation rule (:func:`~ampcore.conformance.tolerance.assert_accumulated`): float32
(float64 for float64) accumulation over n terms, ``gamma_n(2**-24) * sum|terms|``, plus half an ulp of the
result's dtype for the one final rounding; the float64 reference computes ``sum|terms|`` alongside the value.
Long sums of random signs and of one sign are included: there a 16-bit accumulator, or a kernel that gives
up on long reductions, is far outside the rule."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np
import pytest

from ampcore.conformance.kernel_harness import (
    Array,
    assert_bits,
    put_rounded,
    result_on_host,
    seeded_rng,
    stored_values,
    with_magnitudes,
)
from ampcore.conformance.references import (
    ALL_NAMES,
    FLOAT_NAMES,
    NUMERIC_NAMES,
    round_to,
    sample_values,
    to_f64,
)
from ampcore.conformance.tolerance import assert_accumulated

pytestmark = pytest.mark.conformance(check="kernels")

# --------------------------------------------------------------------------- reductions
# (shape, axes, keepdims): single axes, several axes, every axis, and reductions of/over empty axes.
REDUCE_CASES: list[tuple[tuple[int, ...], tuple[int, ...], bool]] = [
    ((7, 13), (1,), False),
    ((7, 13), (0,), True),
    ((3, 4, 5), (0, 2), False),
    ((3, 4, 5), (1,), True),
    ((3, 4, 5), (0, 1, 2), False),
    ((3, 4, 5), (0, 1, 2), True),
    ((2, 0, 3), (1,), False),
    ((2, 0, 3), (0, 2), True),
    # axes is never None; it may be empty: a 0-d input (the core's sum() of a scalar tensor), or () on any
    # input, which reduces nothing (the result is the input, in the reduction's output dtype)
    ((), (), False),
    ((3, 4), (), False),
    ((3, 4), (), True),
    # long rows: a 16-bit accumulator is off by many ulps here (see also LONG_SUMS)
    ((3, 1500), (1,), False),
]


def _reduce_inputs(dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Sum inputs: floats in [-1, 1); int64 beyond 2**53 (a float64 accumulator loses the low bits); int32
    in [2**29, 2**30), so a sum of 4 or more overflows int32 (the contract: bool/int sums are int64)."""
    if dtype in FLOAT_NAMES:
        return rng.uniform(-1.0, 1.0, size=shape)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    low, high = (2**29, 2**30) if dtype == "int32" else (-(2**56), 2**56)
    return rng.integers(low, high, size=shape, dtype=np.int64)


def _reduction_cases(
    backend: Any,
    dtype: str,
    rng: np.random.Generator,
    make: Callable[[str, tuple[int, ...], np.random.Generator], np.ndarray],
    skip_empty: bool = False,
) -> Iterator[tuple[str, Array, np.ndarray, tuple[int, ...], bool]]:
    """(label, device input, host input, axes, keepdims) for every REDUCE_CASES entry plus a transposed view."""
    for shape, axes, keepdims in REDUCE_CASES:
        if skip_empty and 0 in shape:
            continue
        x = put_rounded(backend, make(dtype, shape, rng), dtype)
        yield f"shape {shape}, axes {axes}, keepdims={keepdims}", x, backend.get(x), axes, keepdims
    x = put_rounded(backend, make(dtype, (5, 9), rng), dtype)
    yield "a transposed view, axes (1,)", backend.kernels.transpose(x, (1, 0)), backend.get(x).T, (1,), False


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_sum(backend, dtype):
    """sum over axes tuples (keepdims, several, all, empty); bool and int sums are exact int64."""
    backend.require_compute(dtype)
    float_in = dtype in FLOAT_NAMES
    if not float_in:
        backend.require_storage("int64")
    for label, x, host, axes, keepdims in _reduction_cases(backend, dtype, seeded_rng("sum", dtype), _reduce_inputs):
        what = f"sum of {dtype}, {label}"
        out_dtype = dtype if float_in else "int64"
        out = result_on_host(backend, backend.kernels.sum(x, axes, keepdims), out_dtype, what)
        if float_in:
            n = math.prod(host.shape[a] for a in axes)
            exact, magnitudes = with_magnitudes(partial(np.sum, axis=axes, keepdims=keepdims), to_f64(host))
            assert_accumulated(out, exact, magnitudes, dtype, n, what=what)
        else:
            assert_bits(out, np.asarray(np.sum(host.astype(np.int64), axis=axes, keepdims=keepdims)), what)


def _max_inputs(dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random values with, for floats, a NaN in some rows and -inf in others (NaN must win)."""
    if dtype not in FLOAT_NAMES:
        return sample_values(dtype, shape, rng)
    x = rng.standard_normal(shape) * 10.0
    flat = x.reshape(-1)
    if flat.size:
        flat[rng.integers(0, flat.size, size=max(1, flat.size // 17))] = np.nan
        flat[rng.integers(0, flat.size, size=max(1, flat.size // 13))] = -np.inf
    return x


@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
def test_max(backend, dtype):
    """max over axes picks the exact maximum; NaN anywhere in the reduced slice gives NaN."""
    backend.require_compute(dtype)
    for label, x, host, axes, keepdims in _reduction_cases(
        backend, dtype, seeded_rng("max", dtype), _max_inputs, skip_empty=True
    ):
        what = f"max of {dtype}, {label}"
        out = result_on_host(backend, backend.kernels.max(x, axes, keepdims), dtype, what)
        with np.errstate(invalid="ignore"):
            expected = np.asarray(np.max(host, axis=axes, keepdims=keepdims)).astype(host.dtype)
        assert_bits(out, expected, what)


@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
def test_argmax(backend, dtype):
    """argmax gives the int64 index of the FIRST maximum (values on a coarse grid, so ties are common)."""
    backend.require_compute(dtype)
    backend.require_storage("int64")
    k, rng = backend.kernels, seeded_rng("argmax", dtype)
    for shape, axis in [((7, 13), 1), ((7, 13), 0), ((3, 4, 5), 1), ((1, 6), 1)]:
        values = rng.integers(-3, 4, size=shape).astype(np.float64)
        if shape == (1, 6):
            values[:] = 2.0  # all equal: index 0
        x = put_rounded(backend, values, dtype)
        what = f"argmax of {dtype} {shape} along axis {axis}"
        assert_bits(
            result_on_host(backend, k.argmax(x, axis), "int64", what),
            np.argmax(backend.get(x), axis=axis).astype(np.int64),
            what,
        )
    x = put_rounded(backend, rng.integers(-3, 4, size=(5, 9)).astype(np.float64), dtype)
    what = f"argmax of a transposed {dtype} view along axis 1"
    assert_bits(
        result_on_host(backend, k.argmax(k.transpose(x, (1, 0)), 1), "int64", what),
        np.argmax(backend.get(x).T, axis=1).astype(np.int64),
        what,
    )


# Long sums in every float dtype, (label, values): random signs, and one sign (sum|terms| = |sum|, so the rule
# allows n * 2**-24 of the result and a 16-bit accumulator, which stalls once the partial sum outgrows the
# terms, is off by orders of magnitude more).
def _long_sums(rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    return [
        ("(4, 1500) in [-1, 1)", rng.uniform(-1.0, 1.0, (4, 1500))),
        ("(4, 1500) in [0.5, 1)", rng.uniform(0.5, 1.0, (4, 1500))),
    ]


@pytest.mark.conformance(op="sum")
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_sum_long_rows(backend, dtype):
    """sum over rows of 1500 terms of random signs and of one sign: float32 accumulation (n = 1500)."""
    backend.require_compute(dtype)
    for label, values in _long_sums(seeded_rng("sum-long", dtype)):
        x = put_rounded(backend, values, dtype)
        what = f"sum of {dtype} rows {label}"
        exact, magnitudes = with_magnitudes(partial(np.sum, axis=1), stored_values(backend, x))
        out = result_on_host(backend, backend.kernels.sum(x, (1,), False), dtype, what)
        assert_accumulated(out, exact, magnitudes, dtype, values.shape[1], what=what)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_cumsum(backend, dtype):
    """Inclusive prefix sums along an axis (each prefix judged by its own sum|terms|; n = the axis length),
    including rows of 1500 terms."""
    backend.require_compute(dtype)
    k, rng = backend.kernels, seeded_rng("cumsum", dtype)
    cases = [((7, 13), 0), ((7, 13), 1), ((3, 4, 5), 2), ((0, 3), 0), ((4, 0), 1)]
    inputs = [(f"{shape} along axis {axis}", rng.uniform(-1.0, 1.0, size=shape), axis) for shape, axis in cases]
    inputs += [(label, values, 1) for label, values in _long_sums(rng)]
    for label, values, axis in inputs:
        x = put_rounded(backend, values, dtype)
        what = f"cumsum of {dtype} {label}"
        exact, magnitudes = with_magnitudes(partial(np.cumsum, axis=axis), stored_values(backend, x))
        out = result_on_host(backend, k.cumsum(x, axis), dtype, what)
        assert_accumulated(out, exact, magnitudes, dtype, values.shape[axis], what=what)
    x = put_rounded(backend, rng.uniform(-1.0, 1.0, size=(6, 11)), dtype)
    what = f"cumsum of a negative-step {dtype} view along axis 1"
    exact, magnitudes = with_magnitudes(lambda v: np.cumsum(v, axis=1), stored_values(backend, x)[::-1, ::-2])
    view = k.slice(x, (slice(5, None, -1), slice(10, None, -2)))
    assert_accumulated(result_on_host(backend, k.cumsum(view, 1), dtype, what), exact, magnitudes, dtype, 6, what=what)


# float32 accumulation: these sums are exact in float32 and representable in the dtype, but a float16 /
# bfloat16 accumulator loses them: 2048 + 1 rounds back to 2048 in float16 (256 + 1 to 256 in bfloat16), and
# 1 + 2**-11 rounds back to 1 (so even a pairwise low-precision sum fails the mixed pattern).
ACCUMULATION: dict[str, list[tuple[str, np.ndarray]]] = {
    "float16": [("4096 ones", np.ones(4096)), ("[1, 2**-11, 2**-11] x 2048", np.tile([1.0, 2.0**-11, 2.0**-11], 2048))],
    "bfloat16": [("512 ones", np.ones(512)), ("[1, 2**-8, 2**-8] x 256", np.tile([1.0, 2.0**-8, 2.0**-8], 256))],
}


def _accumulate(backend: Any, op: str, x: Array, n: int, dtype: str) -> Array:
    """Reduce the 1-D ``x`` of length ``n`` with ``op``: sum, cumsum, or a (1, n) @ (n, 1) matmul with ones."""
    k = backend.kernels
    if op == "sum":
        return k.sum(x, (0,), False)
    if op == "cumsum":
        return k.cumsum(x, 0)
    return k.matmul(k.reshape(x, (1, n)), put_rounded(backend, np.ones((n, 1)), dtype))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["sum", "cumsum", "matmul"])
def test_low_precision_accumulates_in_float32(backend, op, dtype):
    """sum/cumsum/matmul of float16/bfloat16 accumulate in float32: results exact (see ACCUMULATION)."""
    backend.require_compute(dtype)
    for label, values in ACCUMULATION[dtype]:
        x = put_rounded(backend, values, dtype)
        exact = {"sum": np.sum(values), "cumsum": np.cumsum(values), "matmul": np.sum(values).reshape(1, 1)}[op]
        what = f"{op} of {label} in {dtype}"
        out = result_on_host(backend, _accumulate(backend, op, x, values.size, dtype), dtype, what)
        assert_bits(
            out,
            round_to(exact, dtype),
            what + " (float32 accumulation gives this exactly; a low-precision accumulator does not)",
        )


# (label, shape of a, shape of b, the operands' range): 2-D, batched with broadcast batch dims, a long k of
# random signs and of one sign (see _long_sums), an empty k.
MATMUL_CASES: list[tuple[str, tuple[int, ...], tuple[int, ...], tuple[float, float]]] = [
    ("2-D (5, 7) @ (7, 3)", (5, 7), (7, 3), (-1.0, 1.0)),
    ("row (1, 9) @ (9, 1)", (1, 9), (9, 1), (-1.0, 1.0)),
    ("batched (2, 1, 3, 4) @ (5, 4, 2)", (2, 1, 3, 4), (5, 4, 2), (-1.0, 1.0)),
    ("batched (3, 2, 6) @ (6, 4)", (3, 2, 6), (6, 4), (-1.0, 1.0)),
    ("long k (3, 1500) @ (1500, 4)", (3, 1500), (1500, 4), (-1.0, 1.0)),
    ("long k of positive products (3, 1500) @ (1500, 4)", (3, 1500), (1500, 4), (0.5, 1.0)),
    ("empty k (3, 0) @ (0, 4)", (3, 0), (0, 4), (-1.0, 1.0)),
    ("empty m (0, 5) @ (5, 2)", (0, 5), (5, 2), (-1.0, 1.0)),
]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_matmul(backend, dtype):
    """matmul with broadcast batch dims, a long k (n = k in the accumulation rule), empty dims, a transposed
    operand."""
    backend.require_compute(dtype)
    k, rng = backend.kernels, seeded_rng("matmul", dtype)
    for label, sa, sb, (low, high) in MATMUL_CASES:
        a = put_rounded(backend, rng.uniform(low, high, sa), dtype)
        b = put_rounded(backend, rng.uniform(low, high, sb), dtype)
        what = f"matmul {label} in {dtype}"
        exact, magnitudes = with_magnitudes(np.matmul, stored_values(backend, a), stored_values(backend, b))
        out = result_on_host(backend, k.matmul(a, b), dtype, what)
        assert_accumulated(out, exact, magnitudes, dtype, sa[-1], what=what)
    a = put_rounded(backend, rng.uniform(-1, 1, (4, 33)), dtype)
    bt = put_rounded(backend, rng.uniform(-1, 1, (6, 33)), dtype)
    what = f"matmul with a transposed view operand in {dtype}"
    exact, magnitudes = with_magnitudes(np.matmul, stored_values(backend, a), stored_values(backend, bt).T)
    out = result_on_host(backend, k.matmul(a, k.transpose(bt, (1, 0))), dtype, what)
    assert_accumulated(out, exact, magnitudes, dtype, 33, what=what)
