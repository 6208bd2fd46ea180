"""The opencl reduction kernels on sizes and layouts the conformance suite does not reach: every launch shape
(one work-item per row, one work-group per row, two passes), reduced axes that are not adjacent, argmax ties and
NaN across work-group chunks, long cumsums, and the softmax family's work-group path.

Sums are judged by the accumulation rule (:func:`~ampcore.conformance.tolerance.assert_accumulated`).  Its
worst case ``gamma_n(2**-24) sum|x|`` holds for any order; for the longest sums here (millions of terms, where
``n 2**-24`` nears 1) the kernels' own blocking is the claim under test, so ``n`` is then the depth of their
summation tree (terms a value passes through), as the module docstring of ``ampcore_opencl.reductions``
describes it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyopencl")

from opencl_devices import get, put

from ampcore import dtypes as dt
from ampcore.conformance import assert_close
from ampcore.conformance.tolerance import assert_accumulated
from ampcore_opencl import reductions as red
from ampcore_opencl import softmax as sm

pytestmark = pytest.mark.usefixtures("opencl_device")  # every test on every OpenCL device


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


def _two_pass_depth(n: int, wg: int = red.MAX_LOCAL) -> int:
    """Additions on a term's way through the sum of one row of ``n > CHUNK`` elements (a work-group of ``wg``
    items per chunk, each striding through its share, then a tree; the same over the chunk partials)."""
    chunks = -(-n // red.CHUNK)
    return -(-red.CHUNK // wg) + wg.bit_length() - 1 + -(-chunks // wg) + wg.bit_length() - 1


def test_full_sum_of_ten_million_float32_matches_float64_within_its_blocked_bound(rng):
    x = rng.uniform(-1.0, 1.0, 10_000_000).astype(np.float32)
    out = get(red.reduce_sum(put(x, dt.float32), (0,), False))
    assert out.shape == () and out.dtype == np.float32
    x64 = x.astype(np.float64)
    assert_accumulated(out, x64.sum(), np.abs(x64).sum(), dt.float32, _two_pass_depth(x.size), what="sum of 10M")


def test_full_sum_of_positive_values_keeps_float32_accuracy(rng):
    """The blocked sum of 4M values in [0, 1) is within the bound of its summation tree (depth 144); a
    sequential float32 sum of them (depth 4M) is not: the bound tells the two apart."""
    x = rng.random(4_000_000).astype(np.float32)
    out = get(red.reduce_sum(put(x, dt.float32), (0,), True))
    assert out.shape == (1,)
    exact, depth = np.sum(x, dtype=np.float64, keepdims=True), _two_pass_depth(x.size)
    assert_accumulated(out, exact, exact, dt.float32, depth, what="sum of 4M in [0, 1)")
    sequential = np.cumsum(x, dtype=np.float32)[-1:]
    with pytest.raises(AssertionError, match="outside the accumulation rule"):
        assert_accumulated(sequential, exact, exact, dt.float32, depth, what="a sequential float32 sum")


@pytest.mark.parametrize(
    "shape, axes",
    [
        ((20000, 7), (1,)),  # many short rows: one work-item each
        ((2000, 900), (1,)),  # many medium rows: one work-item each, blocked
        ((900, 2000), (0,)),  # reducing the leading axis: rows are columns
        ((3, 20000), (1,)),  # few long rows: one work-group each
        ((2, 100_003), (1,)),  # rows longer than a chunk: two passes
        ((70_001, 3), (0,)),  # two passes over a strided (leading) axis
    ],
)
def test_sum_and_max_on_every_launch_shape(rng, shape, axes):
    x = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    n = int(np.prod([shape[a] for a in axes]))
    device = put(x, dt.float32)
    x64 = x.astype(np.float64)
    assert_accumulated(
        get(red.reduce_sum(device, axes, False)),
        np.sum(x64, axis=axes),
        np.sum(np.abs(x64), axis=axes),
        dt.float32,
        n,
        what=f"sum of {shape} over {axes}",
    )
    np.testing.assert_array_equal(get(red.reduce_max(device, axes, False)), np.max(x, axis=axes))


# one pass per block of reduced axes: short rows then a column pass; long rows first; a column pass over more
# intermediate values than one chunk (two launches reading accumulator-typed partials)
@pytest.mark.parametrize("shape", [(6, 5, 7), (40, 3, 1000), (40000, 2, 3)])
def test_reductions_over_non_adjacent_axes(rng, shape):
    x = rng.uniform(-1.0, 1.0, shape)
    n = shape[0] * shape[2]
    for dtype in (dt.float64, dt.float32):
        device = put(x, dtype)
        host = get(device).astype(np.float64)
        for keepdims in (False, True):
            assert_accumulated(
                get(red.reduce_sum(device, (0, 2), keepdims)),
                np.sum(host, axis=(0, 2), keepdims=keepdims),
                np.sum(np.abs(host), axis=(0, 2), keepdims=keepdims),
                dtype,
                n,
                what=f"sum over axes (0, 2) of {shape} {dtype.name}",
            )
            np.testing.assert_array_equal(
                get(red.reduce_max(device, (0, 2), keepdims)), np.max(get(device), axis=(0, 2), keepdims=keepdims)
            )
    x4 = rng.integers(-50, 50, (3, 4, 5, 6)).astype(np.int32)
    out = get(red.reduce_sum(put(x4, dt.int32), (1, 3), False))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, x4.astype(np.int64).sum(axis=(1, 3)))


def test_low_precision_sum_over_non_adjacent_axes_keeps_float32_between_passes():
    # 12288 = 3 * 4096 per output: exact in float16 and in float32, but a float16 intermediate sticks at 2048
    out = get(red.reduce_sum(put(np.ones((4096, 2, 3)), dt.float16), (0, 2), False))
    np.testing.assert_array_equal(out, np.full(2, 12288.0, dtype=np.float16))


def test_low_precision_two_pass_sum_accumulates_in_float32():
    # 40960 ones: exact in float16 and bfloat16 (a multiple of their spacings 32 and 256 there) and in a float32
    # accumulator; a float16 one sticks at 2048 (bfloat16 at 256), and the row is longer than one chunk, so the
    # partials must be float32 too
    for dtype in (dt.float16, dt.bfloat16):
        out = get(red.reduce_sum(put(np.ones(40960), dtype), (0,), False))
        assert float(out) == 40960.0, f"{dtype.name}: {out!r}"


def test_int64_two_pass_sum_is_exact_beyond_two_to_the_53(rng):
    x = rng.integers(-(2**56), 2**56, 100_000, dtype=np.int64)
    assert int(get(red.reduce_sum(put(x, dt.int64), (0,), False))) == int(x.sum())
    b = rng.random((3, 50_000)) < 0.3
    np.testing.assert_array_equal(get(red.reduce_sum(put(b, dt.bool_), (1,), False)), b.sum(axis=1))


@pytest.mark.parametrize("n", [13, 5000, 100_000])  # one work-item per row, one work-group, two passes
def test_argmax_takes_the_first_maximum_and_the_first_nan(n):
    x = np.zeros((3, n), dtype=np.float32)
    late = [n // 3, n - 1]  # ties, the first in an earlier chunk than the second
    x[0, late] = 5.0
    x[1, :] = -np.inf  # all -inf: index 0
    x[2, late] = np.nan
    x[2, 0] = 7.0
    out = get(red.argmax(put(x, dt.float32), 1))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.argmax(x, axis=1))
    np.testing.assert_array_equal(out, [n // 3, 0, n // 3])


def test_argmax_of_ties_in_every_dtype_along_each_axis(rng):
    values = rng.integers(-3, 4, (37, 41)).astype(np.float64)
    for dtype in (dt.float16, dt.bfloat16, dt.float32, dt.float64, dt.int32, dt.int64):
        device = put(values, dtype)
        for axis in (0, 1):
            np.testing.assert_array_equal(get(red.argmax(device, axis)), np.argmax(values, axis=axis))


def test_max_propagates_nan_and_keeps_integers(rng):
    x = rng.standard_normal((4, 40_000))
    x[1, 39_999] = np.nan
    out = get(red.reduce_max(put(x, dt.float32), (1,), False))
    assert np.isnan(out[1]) and not np.isnan(out[[0, 2, 3]]).any()
    ints = rng.integers(-(2**62), 2**62, (5, 3000), dtype=np.int64)
    np.testing.assert_array_equal(get(red.reduce_max(put(ints, dt.int64), (1,), False)), ints.max(axis=1))


def test_empty_axes_sum_to_zero_and_max_refuses():
    x = put(np.zeros((3, 0, 2)), dt.float32)
    np.testing.assert_array_equal(get(red.reduce_sum(x, (1,), False)), np.zeros((3, 2), np.float32))
    assert get(red.reduce_sum(x, (0,), True)).shape == (1, 0, 2)
    with pytest.raises(ValueError, match="empty axis"):
        red.reduce_max(x, (1,), False)


def _cumsum_depth(n: int) -> int:
    """Additions on a term's way into a prefix of one line of ``n`` (chunk sums, the sequential carry scan over the
    chunks, the scan inside a chunk: see reductions.cumsum)."""
    chunks = min(-(-n // red.CUMSUM_MIN_CHUNK), red.CUMSUM_ITEMS, red.CUMSUM_MAX_CHUNKS)
    chunk_len = -(-n // chunks)
    return 2 * chunk_len + -(-n // chunk_len)


def test_cumsum_of_a_million_float32_within_its_blocked_bound(rng):
    x = rng.uniform(-1.0, 1.0, 1_000_000).astype(np.float32)
    out = get(red.cumsum(put(x, dt.float32), 0))
    x64 = x.astype(np.float64)
    exact, magnitudes = np.cumsum(x64), np.cumsum(np.abs(x64))
    assert_accumulated(out, exact, magnitudes, dt.float32, _cumsum_depth(x.size), what="cumsum of 1M float32")


@pytest.mark.parametrize("shape, axis", [((3000, 5), 0), ((4, 777, 3), 1), ((5, 20), 1), ((2000, 3000), 1)])
def test_cumsum_layouts_and_integer_sums(rng, shape, axis):
    x = rng.uniform(-1.0, 1.0, shape)
    assert_accumulated(
        get(red.cumsum(put(x, dt.float64), axis)),
        np.cumsum(x, axis=axis),
        np.cumsum(np.abs(x), axis=axis),
        dt.float64,
        shape[axis],
        what=f"cumsum of {shape} along {axis}",
    )
    ints = rng.integers(2**29, 2**30, shape).astype(np.int32)
    out = get(red.cumsum(put(ints, dt.int32), axis))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.cumsum(ints.astype(np.int64), axis=axis))


def test_float16_cumsum_of_a_long_row_accumulates_in_float32():
    # float16 loses every 2**-11 added to 1 or more; float32 keeps them while the sum stays below 2**13
    values = np.tile([1.0, 2.0**-11, 2.0**-11], 5000)
    out = get(red.cumsum(put(values, dt.float16), 0))
    np.testing.assert_array_equal(out, np.cumsum(values).astype(np.float16))


def test_a_new_shape_compiles_nothing(rng):
    state = put(np.zeros(1), dt.float32).state
    for shape in [(5, 6), (50, 60)]:
        red.reduce_sum(put(rng.random(shape), dt.float32), (1,), False)
    before = len(state._kernels)
    for shape in [(7, 9), (70, 90), (300, 11)]:
        red.reduce_sum(put(rng.random(shape), dt.float32), (1,), False)
    assert len(state._kernels) == before


def _softmax64(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape, axis", [((3, 5000), 1), ((1000, 10), 1), ((300, 40), 0), ((4, 200, 3), 1)])
def test_softmax_family_on_short_and_long_rows(rng, shape, axis):
    x = rng.standard_normal(shape) * 4.0
    n = shape[axis]
    for dtype in (dt.float32, dt.float16):
        device = put(x, dtype)
        x64 = get(device).astype(np.float64)
        sm64 = _softmax64(x64, axis)
        assert_close(get(sm.softmax(device, axis)), sm64, dtype, n=n, what=f"softmax {dtype.name} {shape}")
        assert_close(get(sm.log_softmax(device, axis)), np.log(sm64), dtype, n=n, what=f"log_softmax {shape}")
        y, gy = put(sm64, dtype), put(rng.standard_normal(shape), dtype)
        y64, gy64 = get(y).astype(np.float64), get(gy).astype(np.float64)
        expected = y64 * (gy64 - (gy64 * y64).sum(axis=axis, keepdims=True))
        assert_close(get(sm.softmax_backward(y, gy, axis)), expected, dtype, n=n, what=f"softmax_backward {shape}")
        ly = put(np.log(sm64), dtype)
        ly64 = get(ly).astype(np.float64)
        expected = gy64 - np.exp(ly64) * gy64.sum(axis=axis, keepdims=True)
        assert_close(
            get(sm.log_softmax_backward(ly, gy, axis)), expected, dtype, n=n, what=f"log_softmax_backward {shape}"
        )


@pytest.mark.parametrize("n", [6, 3000])
def test_softmax_rows_of_minus_inf_give_nan_and_masked_entries_are_ignored(n):
    x = np.full((3, n), -np.inf, dtype=np.float32)
    x[1, [2, n - 1]] = [0.5, 1.5]
    out = get(sm.softmax(put(x, dt.float32), 1))
    assert np.isnan(out[0]).all() and np.isnan(out[2]).all()
    expected = np.zeros(n)
    expected[[2, n - 1]] = _softmax64(np.array([0.5, 1.5]), 0)
    assert_close(out[1], expected, dt.float32, n=n, what="softmax of a masked row")
    assert get(sm.log_softmax(put(x, dt.float32), 1))[1, 0] == -np.inf


def test_softmax_of_huge_values_does_not_overflow():
    x = np.array([[1e4, 1e4 - 1.0, -1e4] * 30], dtype=np.float32)
    out = get(sm.softmax(put(x, dt.float32), 1))
    assert np.isfinite(out).all()
    assert_close(out, _softmax64(x.astype(np.float64), 1), dt.float32, n=90, what="softmax near 1e4")
