"""The opencl backend's data-movement kernels (ampcore_opencl.movement) beyond what the conformance suite sees:
raw-bit copies (NaN payloads, -0.0) through every kernel, negative steps, empty and 0-d arrays, 6-D
transposes, arrays bigger than one work-item's chunk, both launch layouts (CPU chunks and GPU one element
per work-item), and scatter_add's determinism and accumulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("pyopencl")

from opencl_devices import get, put, state

from ampcore import dtypes as dt
from ampcore_opencl import movement as mv

pytestmark = pytest.mark.usefixtures("opencl_device")  # every test on every OpenCL device

RAW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@pytest.fixture(params=["cpu-chunks", "gpu-elements"])
def layout(request, monkeypatch):
    """Run each test with the launch layout of a CPU device and with that of a GPU (one element per
    work-item), whatever the device is: both code paths are checked on each CPU device."""
    if request.param == "gpu-elements":
        monkeypatch.setattr(mv, "is_cpu", lambda device: False)
    return request.param


def bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(RAW[a.dtype.itemsize]) if a.dtype != np.bool_ else a


def assert_bits(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
    diff = bits(actual) != bits(expected)
    assert not diff.any(), (
        f"{what}: {int(diff.sum())} elements differ in their bits, first at {tuple(np.argwhere(diff)[0])}"
    )


FLOATS = [dt.float16, dt.bfloat16, dt.float32, dt.float64]


def raw_values(dtype: dt.DType, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random bit patterns of ``dtype`` (so NaNs with all sorts of payloads, signalling ones included,
    subnormals, infinities) with -0.0 and +0.0 planted."""
    rng = np.random.default_rng(seed)
    if dtype == dt.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    raw = RAW[dtype.numpy.itemsize]
    words = rng.integers(0, np.iinfo(raw).max, shape, dtype=raw, endpoint=True)
    out = words.view(dtype.numpy)
    if dtype.is_floating_point and out.size >= 2:
        flat = out.reshape(-1)
        flat[0], flat[1] = -0.0, 0.0
    return out


ALL_DTYPES = [dt.float16, dt.bfloat16, dt.float32, dt.float64, dt.int32, dt.int64, dt.bool_]


def test_raw_values_hold_nans_with_payloads_and_negative_zero():
    v = raw_values(dt.float32, (64, 64)).reshape(-1)
    assert np.isnan(v).sum() > 3 and np.signbit(v[0]) and v[0] == 0


# --------------------------------------------------------------------------- every kernel copies raw bits
def _cases(h: np.ndarray, x: mv.CLArray, dtype: dt.DType) -> list[tuple[str, mv.CLArray, np.ndarray]]:
    """(label, device result, expected) for every movement kernel on a (5, 6, 7) array."""
    idx = np.array([4, -1, 0, 2, 2, -5], dtype=np.int64)
    v = raw_values(dtype, (3, 3, 7), seed=1)
    assigned = h.copy()
    assigned[1:4, 5::-2] = v
    fill = {dt.bool_: True, dt.int32: -3, dt.int64: -(2**62)}.get(dtype, float("-0.0"))
    return [
        ("reshape", mv.reshape(x, (-1, 7)), h.reshape(-1, 7)),
        ("transpose", mv.transpose(x, (2, 0, 1)), np.transpose(h, (2, 0, 1))),
        (
            "broadcast_to",
            mv.broadcast_to(mv.slice_(x, (slice(0, 1),)), (3, 5, 1, 6, 7)),
            np.broadcast_to(h[0:1], (3, 5, 1, 6, 7)),
        ),
        ("slice", mv.slice_(x, (slice(4, None, -2), 3, slice(6, 0, -3))), h[4::-2, 3, 6:0:-3]),
        ("slice_assign", mv.slice_assign(x, (slice(1, 4), slice(5, None, -2)), put(v, dtype)), assigned),
        (
            "pad",
            mv.pad(x, ((1, 0), (0, 2), (3, 1)), fill),
            np.pad(h, ((1, 0), (0, 2), (3, 1)), constant_values=np.full((), fill, h.dtype)),
        ),
        ("concat", mv.concat([x, mv.slice_(x, (slice(None), slice(2, 4)))], 1), np.concatenate([h, h[:, 2:4]], 1)),
        ("take", mv.take(x, put(idx, dt.int64), 1), np.take(h, idx, 1)),
    ]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_every_kernel_copies_raw_bits(layout, dtype):
    if dtype == dt.float64 and not state().fp64:
        pytest.skip("the device has no cl_khr_fp64")
    h = raw_values(dtype, (5, 6, 7))
    x = put(h, dtype)
    for label, out, expected in _cases(h, x, dtype):
        assert_bits(get(out), expected, f"{label} of {dtype.name} ({layout})")
    assert_bits(get(x), h, f"the input after every kernel ({dtype.name})")


# --------------------------------------------------------------------------- shapes
def test_six_d_transposes(layout):
    shape = (2, 3, 1, 4, 2, 5)
    h = raw_values(dt.float32, shape)
    x = put(h, dt.float32)
    for axes in itertools.islice(itertools.permutations(range(6)), 0, None, 37):
        assert_bits(get(mv.transpose(x, axes)), np.transpose(h, axes), f"transpose {axes}")


def test_negative_steps_and_empty_slices(layout):
    h = raw_values(dt.bfloat16, (6, 9, 4))
    x = put(h, dt.bfloat16)
    for index in [
        (slice(5, None, -1),),
        (slice(None), slice(8, None, -3), slice(3, None, -2)),
        (slice(2, 2, 1),),
        (slice(0, 0, 1), slice(8, None, -1)),
        (slice(None), 4, slice(1, 3)),
        (5, 8, 3),
        (slice(5, 0, -5), slice(None, None, 4)),
    ]:
        assert_bits(get(mv.slice_(x, index)), h[index], f"slice {index}")


def test_zero_d_arrays(layout):
    h = np.array(-0.0, dtype=np.float32)
    x = put(h, dt.float32)
    assert_bits(get(mv.reshape(x, (1, 1))), h.reshape(1, 1), "reshape of 0-d")
    assert_bits(get(mv.transpose(x, ())), h, "transpose of 0-d")
    assert_bits(get(mv.broadcast_to(x, (3, 2))), np.broadcast_to(h, (3, 2)), "broadcast_to of 0-d")
    assert_bits(get(mv.slice_(x, ())), h, "slice () of 0-d")
    assert_bits(get(mv.pad(x, (), 1.0)), h, "pad of 0-d")
    one = put(np.array([7.0], np.float32), dt.float32)
    assert_bits(get(mv.slice_assign(one, (0,), x)), np.array([-0.0], np.float32), "slice_assign of a 0-d value")


def test_empty_arrays(layout):
    h = np.zeros((3, 0, 2), np.float16)
    x = put(h, dt.float16)
    assert get(mv.transpose(x, (2, 1, 0))).shape == (2, 0, 3)
    assert get(mv.broadcast_to(x, (4, 3, 0, 2))).shape == (4, 3, 0, 2)
    assert_bits(get(mv.pad(x, ((0, 0), (1, 1), (0, 0)), 2.5)), np.full((3, 2, 2), 2.5, np.float16), "pad of empty")
    empty_idx = put(np.zeros(0, np.int64), dt.int64)
    full = put(np.ones((3, 4), np.float32), dt.float32)
    assert get(mv.take(full, empty_idx, 1)).shape == (3, 0)
    assert_bits(
        get(mv.scatter_add(put(np.zeros((3, 0), np.float32), dt.float32), empty_idx, 1, 5)),
        np.zeros((3, 5), np.float32),
        "scatter_add of nothing gives zeros",
    )
    assert get(mv.concat([x, x], 1)).shape == (3, 0, 2)


def test_reshape_infers_minus_one_and_names_a_bad_shape():
    x = put(np.arange(12, dtype=np.int32), dt.int32)
    assert get(mv.reshape(x, (3, -1))).shape == (3, 4)
    with pytest.raises(ValueError, match=r"cannot reshape \(12,\).*\(5, -1\)"):
        mv.reshape(x, (5, -1))


def test_broadcast_to_refuses_an_incompatible_shape():
    with pytest.raises(ValueError, match=r"\(3, 2\) cannot be broadcast to \(3, 4\)"):
        mv.broadcast_to(put(np.zeros((3, 2), np.float32), dt.float32), (3, 4))


def test_slice_assign_broadcasts_values_and_keeps_the_base(layout):
    h = np.arange(24, dtype=np.int64).reshape(4, 6)
    base = put(h, dt.int64)
    row = np.array([-1, -2, -3], np.int64)
    out = mv.slice_assign(base, (slice(None), slice(5, 0, -2)), put(row, dt.int64))
    expected = h.copy()
    expected[:, 5:0:-2] = row
    assert_bits(get(out), expected, "a row broadcast over a strided region")
    assert_bits(get(mv.slice_assign(base, (2,), 9)), np.where(np.arange(4)[:, None] == 2, 9, h), "a number")
    assert_bits(get(base), h, "the base afterwards")


# --------------------------------------------------------------------------- big arrays
def test_big_arrays_cross_chunk_boundaries(layout):
    """Shapes whose rows straddle the 4096-element chunks of the CPU layout and are not multiples of it."""
    h = raw_values(dt.float16, (3, 4099, 173), seed=3)
    x = put(h, dt.float16)
    assert_bits(get(mv.transpose(x, (1, 2, 0))), np.transpose(h, (1, 2, 0)), "big transpose")
    assert_bits(
        get(mv.slice_(x, (slice(None), slice(4098, None, -3), slice(1, None)))), h[:, 4098::-3, 1:], "big strided slice"
    )
    head = mv.slice_(x, (slice(None), slice(None), slice(0, 5)))
    assert_bits(get(mv.concat([x, head], 2)), np.concatenate([h, h[:, :, :5]], 2), "big concat along the last axis")
    assert_bits(
        get(mv.pad(x, ((0, 1), (2, 0), (0, 3)), -0.0)),
        np.pad(h, ((0, 1), (2, 0), (0, 3)), constant_values=np.float16(-0.0)),
        "big pad",
    )
    flat = put(raw_values(dt.float32, (5_000_001,), seed=4), dt.float32)
    assert_bits(get(mv.slice_(flat, (slice(None, None, -7),))), get(flat)[::-7], "a long 1-D strided slice")


# --------------------------------------------------------------------------- take
def test_take_wraps_negative_indices_and_zeroes_out_of_range(layout):
    h = np.arange(20, dtype=np.float32).reshape(4, 5) + 1
    idx = np.array([-1, 0, -5, 4, 7, -9], np.int64)
    out = get(mv.take(put(h, dt.float32), put(idx, dt.int64), 1))
    assert_bits(out[:, :4], np.take(h, idx[:4], 1), "in-range and negative indices")
    assert_bits(out[:, 4:], np.zeros((4, 2), np.float32), "out-of-range indices give zero bits")


# --------------------------------------------------------------------------- scatter_add
def _scatter_reference(src: np.ndarray, idx: np.ndarray, axis: int, size: int, acc: type) -> np.ndarray:
    moved = np.moveaxis(src.astype(acc), axis, 0)
    out = np.zeros((size,) + moved.shape[1:], dtype=acc)
    np.add.at(out, idx, moved)
    return np.moveaxis(out, 0, axis)


@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16, dt.float32], ids=lambda d: d.name)
def test_scatter_add_sums_in_index_order_in_float32_and_rounds_once(layout, dtype):
    """The float32 sums in increasing source position (np.add.at's order), so float32 matches bit for bit and
    float16/bfloat16 are that float32 sum rounded once."""
    rng = np.random.default_rng(5)
    src = rng.standard_normal((3, 300, 37)).astype(np.float32) * 1000
    idx = rng.integers(-11, 11, 300)
    x = put(src, dtype)
    stored = get(x).astype(np.float32)
    expected = _scatter_reference(stored, idx % 11, 1, 11, np.float32).astype(dtype.numpy)
    out = get(mv.scatter_add(x, put(idx, dt.int64), 1, 11))
    assert_bits(out, expected, f"scatter_add in {dtype.name}")


def test_scatter_add_is_deterministic_with_many_duplicates(layout):
    rng = np.random.default_rng(6)
    src = put(rng.standard_normal((4096, 33)).astype(np.float32), dt.float16)
    idx = put(np.where(rng.random(4096) < 0.7, 3, rng.integers(0, 50, 4096)), dt.int64)
    first = get(mv.scatter_add(src, idx, 0, 50))
    for _ in range(3):
        assert_bits(get(mv.scatter_add(src, idx, 0, 50)), first, "a repeated scatter_add")


def test_scatter_add_ints_wrap_bool_ors_and_out_of_range_is_dropped(layout):
    big = np.array([[2**31 - 1], [5], [1]], np.int32)
    out = get(mv.scatter_add(put(big, dt.int32), put(np.array([0, 0, 9], np.int64), dt.int64), 0, 2))
    assert_bits(out, np.array([[np.int32(-(2**31) + 4)], [0]], np.int32), "int32 wraps, index 9 dropped")
    flags = np.array([True, False, True, False])
    out = get(mv.scatter_add(put(flags, dt.bool_), put(np.array([1, 1, 2, 0], np.int64), dt.int64), 0, 3))
    assert_bits(out, np.array([False, True, True]), "bool accumulates as a logical or")


def test_scatter_add_embedding_backward_shape():
    """The embedding backward layout (tokens x dim into vocab x dim), against float32 np.add.at."""
    rng = np.random.default_rng(7)
    src = rng.standard_normal((2048, 64)).astype(np.float32)
    idx = np.concatenate([np.zeros(512, np.int64), rng.integers(0, 3000, 1536)])  # a padding token, 512 times
    out = get(mv.scatter_add(put(src, dt.float32), put(idx, dt.int64), 0, 3000))
    assert_bits(out, _scatter_reference(src, idx, 0, 3000, np.float32), "embedding backward")


def test_scatter_add_sizes_at_the_scan_chunk_edges(layout):
    """Output lengths around the prefix sum's chunking (chunks of >= 256, at most 1024 of them; 262145
    leaves the last chunk empty)."""
    rng = np.random.default_rng(8)
    for size in [1, 255, 256, 257, 262144, 262145]:
        idx = rng.integers(-size, size, 1000)
        src = rng.standard_normal(1000).astype(np.float32)
        out = get(mv.scatter_add(put(src, dt.float32), put(idx, dt.int64), 0, size))
        assert_bits(out, _scatter_reference(src, idx % size, 0, size, np.float32), f"scatter_add into {size}")


# --------------------------------------------------------------------------- compilation
def test_changed_values_and_shapes_do_not_recompile():
    """Kernels are keyed by item size (and dtype for scatter_add's sum): new pad values, shapes or dtypes of one
    size reuse the compiled programs."""
    compiled = state()._kernels
    x = put(np.ones((4, 5), np.float32), dt.float32)
    mv.pad(x, ((1, 1), (0, 2)), 1.0)
    mv.transpose(x, (1, 0))
    before = len(compiled)
    mv.pad(put(np.ones((2, 3, 4), np.int32), dt.int32), ((0, 1), (2, 0), (1, 1)), -5)
    mv.pad(x, ((2, 0), (1, 3)), float("nan"))
    mv.transpose(put(np.ones((2, 3, 4), np.int32), dt.int32), (2, 0, 1))
    mv.slice_(x, (slice(3, None, -2),))
    assert len(compiled) == before
    idx = put(np.array([1, 0, 1]), dt.int64)
    mv.scatter_add(put(np.ones((3, 2), np.float32), dt.float32), idx, 0, 4)
    mv.take(x, idx, 0)
    before = len(compiled)
    mv.scatter_add(put(np.ones((2, 3, 5), np.float32), dt.float32), idx, 1, 7)
    mv.take(put(np.ones((2, 3), np.int32), dt.int32), idx, 1)
    assert len(compiled) == before
