"""Data movement, casts and creation kernels, in the report's "kernels" section: bit-exact results."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ampcore import dtypes as dt
from ampcore.conformance.kernel_harness import Array, assert_bits, put_rounded, result_on_host, seeded_rng
from ampcore.conformance.references import (
    ALL_NAMES,
    FLOAT_NAMES,
    INT_NAMES,
    NUMERIC_NAMES,
    edge_values,
    exactly,
    representable,
    round_to,
    sample_values,
    subnormals,
    to_f64,
)
from ampcore.conformance.tolerance import assert_accumulated

pytestmark = pytest.mark.conformance(check="kernels")

# --------------------------------------------------------------------------- data movement (bit-exact)
MoveCase = tuple[str, Array, np.ndarray]


def _reshape_cases(backend: Any, dtype: str, rng: np.random.Generator) -> list[MoveCase]:
    k, h = backend.kernels, sample_values(dtype, (3, 4, 5), rng)
    x, empty = put_rounded(backend, h, dtype), put_rounded(backend, h[:0], dtype)
    return [
        ("(3, 4, 5) -> (12, 5)", k.reshape(x, (12, 5)), h.reshape(12, 5)),
        ("(3, 4, 5) -> (60,)", k.reshape(x, (60,)), h.reshape(60)),
        (
            "a transposed view -> (5, 12)",
            k.reshape(k.transpose(x, (2, 0, 1)), (5, 12)),
            np.transpose(h, (2, 0, 1)).reshape(5, 12),
        ),
        ("(0, 4, 5) -> (4, 0)", k.reshape(empty, (4, 0)), h[:0].reshape(4, 0)),
    ]


def _transpose_cases(backend: Any, dtype: str, rng: np.random.Generator) -> list[MoveCase]:
    k, h = backend.kernels, sample_values(dtype, (2, 3, 4), rng)
    x = put_rounded(backend, h, dtype)
    return [
        ("(2, 0, 1)", k.transpose(x, (2, 0, 1)), np.transpose(h, (2, 0, 1))),
        (
            "(1, 0, 2) of a transposed view",
            k.transpose(k.transpose(x, (2, 0, 1)), (1, 0, 2)),
            np.transpose(np.transpose(h, (2, 0, 1)), (1, 0, 2)),
        ),
        ("empty (0, 3) -> (3, 0)", k.transpose(put_rounded(backend, h[:0, :, 0], dtype), (1, 0)), h[:0, :, 0].T),
    ]


def _broadcast_cases(backend: Any, dtype: str, rng: np.random.Generator) -> list[MoveCase]:
    k, h = backend.kernels, sample_values(dtype, (3, 1), rng)
    x = put_rounded(backend, h, dtype)
    return [
        ("(3, 1) -> (2, 3, 4)", k.broadcast_to(x, (2, 3, 4)), np.broadcast_to(h, (2, 3, 4))),
        (
            "(4,) -> (3, 4)",
            k.broadcast_to(put_rounded(backend, h[:, 0].repeat(2)[:4], dtype), (3, 4)),
            np.broadcast_to(h[:, 0].repeat(2)[:4], (3, 4)),
        ),
        ("(1, 0) -> (3, 0)", k.broadcast_to(put_rounded(backend, h[:1, :0], dtype), (3, 0)), np.zeros((3, 0), h.dtype)),
    ]


# kernel indices as the core normalises them: non-negative ints and starts, stop None for "before 0"
SLICES: list[tuple] = [
    (slice(1, None, 2),),
    (3,),
    (slice(4, None, -1), 2, slice(6, 0, -3)),
    (slice(None), slice(5, None, -2)),
    (slice(2, 2, 1),),
    (1, 5, 6),
]


def _slice_cases(backend: Any, dtype: str, rng: np.random.Generator) -> list[MoveCase]:
    k, h = backend.kernels, sample_values(dtype, (5, 6, 7), rng)
    x = put_rounded(backend, h, dtype)
    return [(f"index {index}", k.slice(x, index), h[index]) for index in SLICES]


def _slice_assign_cases(backend: Any, dtype: str, rng: np.random.Generator) -> list[MoveCase]:
    """Each case also checks that the base is left as it was (the kernel returns a copy)."""
    k, h = backend.kernels, sample_values(dtype, (5, 6), rng)
    cases: list[MoveCase] = []
    for index in [(slice(1, 4, 1), slice(5, None, -2)), (2,), (4, 0), (slice(3, 3, 1),)]:
        base = put_rounded(backend, h, dtype)
        values = sample_values(dtype, h[index].shape, rng)
        expected = h.copy()
        expected[index] = values
        cases.append((f"index {index}", k.slice_assign(base, index, put_rounded(backend, values, dtype)), expected))
        cases.append((f"the base after slice_assign at {index}", base, h))
    return cases


def _pad_value(dtype: str) -> Any:
    return {"bool": True, "int64": -7, "int32": 7}.get(dtype, -1.5)


def _pad_cases(backend: Any, dtype: str, rng: np.random.Generator) -> list[MoveCase]:
    k, h = backend.kernels, sample_values(dtype, (3, 4), rng)
    x, value = put_rounded(backend, h, dtype), _pad_value(dtype)
    cases: list[MoveCase] = []
    for widths in [((1, 2), (0, 3)), ((0, 0), (2, 0)), ((2, 1), (1, 1))]:
        expected = np.pad(h, widths, constant_values=np.asarray(value, dtype=h.dtype))
        cases.append((f"widths {widths}, value {value!r}", k.pad(x, widths, value), expected))
    return cases


def _concat_cases(backend: Any, dtype: str, rng: np.random.Generator) -> list[MoveCase]:
    k = backend.kernels
    parts = [sample_values(dtype, s, rng) for s in [(2, 3), (2, 0), (2, 4)]]
    rows = [sample_values(dtype, s, rng) for s in [(1, 3), (2, 3)]]
    return [
        (
            "(2, 3), (2, 0), (2, 4) along axis 1",
            k.concat([put_rounded(backend, p, dtype) for p in parts], 1),
            np.concatenate(parts, axis=1),
        ),
        (
            "(1, 3), (2, 3) along axis 0",
            k.concat([put_rounded(backend, p, dtype) for p in rows], 0),
            np.concatenate(rows, axis=0),
        ),
    ]


def _take_cases(backend: Any, dtype: str, rng: np.random.Generator) -> list[MoveCase]:
    backend.require_storage("int64")
    k, h = backend.kernels, sample_values(dtype, (4, 5), rng)
    x = put_rounded(backend, h, dtype)
    cases = []
    for indices, axis in [([3, 0, 3, 1], 0), ([4, 4, 0], 1), ([], 1)]:
        idx = np.asarray(indices, dtype=np.int64)
        cases.append(
            (
                f"indices {indices} along axis {axis}",
                k.take(x, put_rounded(backend, idx, "int64"), axis),
                np.take(h, idx, axis=axis),
            )
        )
    return cases


MOVEMENT: dict[str, Callable[[Any, str, np.random.Generator], list[MoveCase]]] = {
    "reshape": _reshape_cases,
    "transpose": _transpose_cases,
    "broadcast_to": _broadcast_cases,
    "slice": _slice_cases,
    "slice_assign": _slice_assign_cases,
    "pad": _pad_cases,
    "concat": _concat_cases,
    "take": _take_cases,
}


@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize("op", list(MOVEMENT))
def test_data_movement(backend, op, dtype):
    """Data movement returns exactly the input's bits in the new arrangement, for every storable dtype
    (NaN, signed zeros, subnormals, int64 beyond 2**53 included)."""
    backend.require_storage(dtype)
    for label, out, expected in MOVEMENT[op](backend, dtype, seeded_rng(op, dtype)):
        what = f"{op} {label} in {dtype}"
        assert_bits(result_on_host(backend, out, dtype, what), np.asarray(expected), what)


@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
def test_scatter_add(backend, dtype):
    """scatter_add accumulates duplicate indices (the accumulation rule, n = the most duplicates, 3, with the
    magnitudes of the terms each slot adds); ints exactly."""
    backend.require_compute(dtype)
    backend.require_storage("int64")
    k, rng = backend.kernels, seeded_rng("scatter_add", dtype)
    for shape, indices, axis, size in [
        ((3, 5), [1, 0, 1, 3, 1], 1, 4),
        ((4, 2), [2, 2, 0, 2], 0, 5),
        ((3, 0), [], 1, 2),
    ]:
        src = rng.uniform(-4, 4, shape) if dtype in FLOAT_NAMES else rng.integers(-1000, 1000, shape)
        x, idx = put_rounded(backend, src, dtype), np.asarray(indices, dtype=np.int64)
        what = f"scatter_add of {dtype} {shape} at {indices} along axis {axis} into size {size}"
        out = result_on_host(backend, k.scatter_add(x, put_rounded(backend, idx, "int64"), axis, size), dtype, what)
        stored = to_f64(backend.get(x)) if dtype in FLOAT_NAMES else backend.get(x).astype(np.int64)
        moved = np.moveaxis(stored, axis, 0)
        acc = np.zeros((size,) + moved.shape[1:], dtype=moved.dtype)
        np.add.at(acc, idx, moved)
        expected = np.moveaxis(acc, 0, axis)
        if dtype in FLOAT_NAMES:
            magnitudes = np.zeros_like(acc)
            np.add.at(magnitudes, idx, np.abs(moved))
            assert_accumulated(out, expected, np.moveaxis(magnitudes, 0, axis), dtype, 3, what=what)
        else:
            assert_bits(out, expected.astype(dt.as_dtype(dtype).numpy), what)


# --------------------------------------------------------------------------- casts
def _cast_values(src: str, dst: str) -> np.ndarray:
    """Source values exactly representable in both dtypes, as a ``src`` array: 0/1 where either is bool,
    integer values (extremes included) where either is an integer, else dyadic values, signed zeros,
    subnormals, +-max of the narrower, +-inf and NaN."""
    s, d = dt.as_dtype(src), dt.as_dtype(dst)
    if dt.bool_ in (s, d):
        return exactly(np.array([0, 1, 1, 0, 1]), s)
    if not (s.is_floating_point and d.is_floating_point):
        wanted = [0, 1, -1, 7, -100, 255, 2**11]
        for t in (s, d):
            if not t.is_floating_point:
                wanted += [int(np.iinfo(t.numpy).max), int(np.iinfo(t.numpy).min)]
        ints = np.array(sorted(set(wanted)), dtype=np.int64)
        info = [np.iinfo(t.numpy) for t in (s, d) if not t.is_floating_point]
        ints = ints[(ints >= max(i.min for i in info)) & (ints <= min(i.max for i in info))]
        if s.is_floating_point or d.is_floating_point:
            f = s if s.is_floating_point else d
            ints = ints[representable(ints.astype(np.float64), f) & (np.abs(ints) <= 2**53)]
        return ints.astype(s.numpy)
    candidates = np.concatenate(
        [edge_values(src), edge_values(dst), subnormals(src, 16), subnormals(dst, 16), np.arange(-64, 65) / 8.0]
    )
    keep = representable(candidates, s) & representable(candidates, d)
    return round_to(candidates[keep], s)


@pytest.mark.parametrize("src", ALL_NAMES)
@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_cast(backend, src, dtype):
    """cast between every pair of storable dtypes keeps every value representable in both bit-exactly
    (subnormals, signed zeros, inf, NaN, int extremes), to the same dtype too.  (Rounding of values that
    are not representable is checked in test_rounding.)"""
    backend.require_storage(src, dtype)
    values = _cast_values(src, dtype)
    x = backend.put(values, src)
    what = f"cast {src} -> {dtype}"
    out = result_on_host(backend, backend.kernels.cast(x, dt.as_dtype(dtype)), dtype, what)
    d = dt.as_dtype(dtype)
    expected = values.astype(d.numpy) if values.dtype.kind in "iub" else exactly(to_f64(values), d)
    assert_bits(out, expected, what)


# --------------------------------------------------------------------------- creation
def _full_values(dtype: str) -> list[Any]:
    if dtype == "bool":
        return [True, False]
    if dtype in INT_NAMES:
        return [7, -3, int(np.iinfo(dt.as_dtype(dtype).numpy).max)]
    return [1.5, -0.0, dt.finfo(dtype).max, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dtype", ALL_NAMES)
def test_full(backend, dtype):
    """full fills with the value (inf, -inf, NaN, -0.0 and max for floats) in the dtype and shape asked."""
    backend.require_storage(dtype)
    d = dt.as_dtype(dtype)
    for shape in [(2, 3), (0, 4), (5,)]:
        for value in _full_values(dtype):
            what = f"full({shape}, {value!r}) in {dtype}"
            out = result_on_host(backend, backend.kernels.full(shape, value, d, backend.index), dtype, what)
            assert_bits(out, np.full(shape, exactly(np.asarray([value]), d)[0], dtype=d.numpy), what)


ARANGES: list[tuple[float, float, float]] = [(0, 10, 1), (5, -5, -2), (3, 3, 1), (-2, 7, 3)]
FLOAT_ARANGES: list[tuple[float, float, float]] = [(0, 3, 0.25), (1, -1, -0.5), (-1.5, 2, 0.5)]


@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
def test_arange(backend, dtype):
    """arange(start, stop, step) in the dtype, negative steps and empty ranges included."""
    backend.require_storage(dtype)
    d = dt.as_dtype(dtype)
    for start, stop, step in ARANGES + (FLOAT_ARANGES if dtype in FLOAT_NAMES else []):
        what = f"arange({start}, {stop}, {step}) in {dtype}"
        out = result_on_host(backend, backend.kernels.arange(start, stop, step, d, backend.index), dtype, what)
        assert_bits(out, exactly(np.arange(start, stop, step, dtype=np.float64), d), what)


# Moments of the distributions: mean, standard deviation, fourth central moment.
MOMENTS: dict[str, tuple[float, float, float]] = {
    "uniform": (0.5, math.sqrt(1 / 12), 1 / 80),
    "normal": (0.0, 1.0, 3.0),
}
SAMPLES = 20000


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("op", ["uniform", "normal"])
def test_random(backend, op, dtype):
    """uniform in [0, 1) / normal: dtype and shape as asked, deterministic in the seed (same seed, same
    bits; another seed, other bits), and statistically sane."""
    backend.require_storage(dtype)
    kernel, d = getattr(backend.kernels, op), dt.as_dtype(dtype)
    for shape in [(3, 4), (0, 2), (2, 3, 5)]:
        got = result_on_host(backend, kernel(shape, d, 1, backend.index), dtype, f"{op}{shape} in {dtype}").shape
        assert got == shape, f"{op}({shape}) in {dtype} gave shape {got}"
    x = result_on_host(backend, kernel((SAMPLES,), d, 1234, backend.index), dtype, f"{op} in {dtype}")
    same = result_on_host(backend, kernel((SAMPLES,), d, 1234, backend.index), dtype, f"{op} in {dtype}")
    other = result_on_host(backend, kernel((SAMPLES,), d, 4321, backend.index), dtype, f"{op} in {dtype}")
    assert x.shape == (SAMPLES,), f"{op}(({SAMPLES},)) in {dtype} gave shape {x.shape}"
    assert x.tobytes() == same.tobytes(), f"{op} in {dtype} with the same seed gave different numbers"
    assert x.tobytes() != other.tobytes(), f"{op} in {dtype} gave the same numbers for seeds 1234 and 4321"
    v = to_f64(x)
    assert np.isfinite(v).all(), f"{op} in {dtype} produced {int((~np.isfinite(v)).sum())} non-finite values"
    if op == "uniform":
        assert v.min() >= 0.0 and v.max() < 1.0, (
            f"uniform in {dtype} must lie in [0, 1); got min {v.min()!r}, max {v.max()!r} "
            f"({int((v >= 1).sum())} values rounded up to 1.0?)"
        )
    # Mean and standard deviation within 6 standard errors for n = 20000 samples: SE(mean) = sd / sqrt(n),
    # SE(sd) ~= sqrt((mu4 - sd**4) / n) / (2 sd).  A correct generator fails this with probability ~1e-9
    # (and the seeds are fixed); a wrong distribution (e.g. [0, 2), or variance 1/2) fails by far.
    mean, sd, mu4 = MOMENTS[op]
    se_mean, se_sd = sd / math.sqrt(SAMPLES), math.sqrt((mu4 - sd**4) / SAMPLES) / (2 * sd)
    assert abs(v.mean() - mean) < 6 * se_mean, (
        f"{op} in {dtype}: mean {v.mean():.5f}, expected {mean} +- {6 * se_mean:.5f}"
    )
    assert abs(v.std() - sd) < 6 * se_sd, f"{op} in {dtype}: std {v.std():.5f}, expected {sd:.5f} +- {6 * se_sd:.5f}"
