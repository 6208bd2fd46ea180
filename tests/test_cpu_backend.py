"""Numerics of the NumPy CPU backend: exact rounding of the 2-byte float types,
storage size, low-precision compute and the AMP kernels."""

import math
import struct
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ampcore
from ampcore import dtypes as dt

K = ampcore.get_backend("cpu").kernels
finite32 = st.floats(width=32, allow_nan=False, allow_infinity=True, allow_subnormal=True)


def bf16_rne_reference(x: np.float32) -> int:
    """Round-to-nearest-even float32 -> bfloat16 on the bit pattern (independent of ml_dtypes)."""
    bits = int(np.array(x, np.float32).view(np.uint32))
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return None  # NaN: any NaN pattern will do
    lsb = (bits >> 16) & 1
    return ((bits + 0x7FFF + lsb) >> 16) & 0xFFFF


@settings(max_examples=400, deadline=None)
@given(finite32)
def test_cast_to_bfloat16_rounds_to_nearest_even(v):
    out = K.cast(np.array([v], np.float32), dt.bfloat16)
    assert out.dtype == ml_dtypes.bfloat16
    assert int(out.view(np.uint16)[0]) == bf16_rne_reference(np.float32(v))


@settings(max_examples=400, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-65519.0, max_value=65519.0))
def test_cast_to_float16_rounds_to_nearest_even(v):
    expected = struct.unpack("<H", struct.pack("<e", v))[0]  # CPython packs half with round-half-even
    out = K.cast(np.array([v], np.float64), dt.float16)
    assert int(out.view(np.uint16)[0]) == expected


def test_nan_and_inf_survive_low_precision_casts():
    a = np.array([np.nan, np.inf, -np.inf], np.float32)
    for d in dt.LOW_PRECISION_DTYPES:
        out = K.cast(a, d).astype(np.float32)
        assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf
    assert np.isinf(K.cast(np.array([70000.0], np.float32), dt.float16).astype(np.float32)[0])


bf16_values = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-(2.0**100), max_value=2.0**100).map(
    lambda v: np.array([v], np.float32).astype(ml_dtypes.bfloat16)
)


@settings(max_examples=300, deadline=None)
@given(bf16_values, bf16_values)
def test_bfloat16_multiply_is_the_exactly_rounded_product(a, b):
    # bf16 x bf16 is exact in float32, so computing in float32 and rounding once
    # must equal rounding the exact (float64) product once.
    out = K.mul(a, b)
    with np.errstate(over="ignore"):
        exact = np.float32(a.astype(np.float64)[0] * b.astype(np.float64)[0])
    assert out.dtype == ml_dtypes.bfloat16
    ref = bf16_rne_reference(exact)
    assert int(out.view(np.uint16)[0]) == ref


@pytest.mark.parametrize("d", dt.LOW_PRECISION_DTYPES, ids=lambda d: d.name)
def test_low_precision_tensors_take_two_bytes_per_element(d):
    t = ampcore.zeros(64, 32, dtype=d)
    assert t.nbytes == 64 * 32 * 2
    assert t.numpy().dtype == d.numpy


@pytest.mark.parametrize("d", dt.LOW_PRECISION_DTYPES, ids=lambda d: d.name)
def test_low_precision_matmul_accumulates_in_float32(d):
    rng = np.random.default_rng(0)
    k = 512
    a = rng.standard_normal((16, k)).astype(d.numpy)
    b = rng.standard_normal((k, 8)).astype(d.numpy)
    out = K.matmul(a, b)
    assert out.dtype == d.numpy
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    # one rounding to the output dtype (half an ulp) + float32 accumulation error
    tol = dt.finfo(d).eps / 2 * np.abs(ref) + k * 2.0**-24 * bound
    assert np.all(np.abs(out.astype(np.float64) - ref) <= tol)


@pytest.mark.parametrize("d", dt.LOW_PRECISION_DTYPES, ids=lambda d: d.name)
def test_low_precision_sum_accumulates_in_float32(d):
    # 4096 ones summed in bf16/fp16 arithmetic would stall at 256 / 2048.
    x = np.ones(4096, dtype=d.numpy)
    total = K.sum(x, (0,), False)
    assert total.dtype == d.numpy and float(total) == 4096.0
    steps = K.cumsum(np.full(4096, 0.5, dtype=d.numpy), 0)
    assert steps.dtype == d.numpy and float(steps[-1]) == 2048.0


def test_capabilities_report_emulated_low_precision():
    caps = ampcore.get_backend("cpu").capabilities()
    assert caps.emulated == {dt.float16, dt.bfloat16}
    assert dt.float32 in caps.native and caps.autocast_dtype is dt.bfloat16
    assert caps.storable == set(dt.ALL_DTYPES) | set(dt.FLOAT8_DTYPES) and caps.float8 == "emulated"


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("where", [0, 77_777, -1])
def test_unscale_and_check_finds_non_finite_anywhere(bad, where):
    grads = [np.ones(10, np.float32), np.full(150_000, 4.0, np.float32), np.ones(0, np.float32)]
    grads[1][where] = bad
    found = np.zeros(1, np.float32)
    out, found = K.unscale_and_check(grads, np.array([0.25], np.float32), found)
    assert found[0] == 1.0
    np.testing.assert_array_equal(out[0], 0.25)


def test_unscale_and_check_is_exact_and_keeps_found_inf_set():
    rng = np.random.default_rng(0)
    g = rng.standard_normal(100_000).astype(np.float32)
    expected = g * np.float32(2.0**-16)
    found = np.zeros(1, np.float32)
    (out,), found = K.unscale_and_check([g.copy()], np.array([2.0**-16], np.float32), found)
    np.testing.assert_array_equal(out, expected)
    assert found[0] == 0.0
    found[0] = 1.0
    _, found = K.unscale_and_check([np.ones(3, np.float32)], np.array([1.0], np.float32), found)
    assert found[0] == 1.0  # a later clean group must not clear it


def _block_elements(dtype) -> int:
    from ampcore_cpu.kernels import UNSCALE_BLOCK_BYTES

    return UNSCALE_BLOCK_BYTES // np.dtype(dtype).itemsize


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("where", ["first of a block", "last full", "last partial"])
def test_unscale_and_check_blocks_cover_every_element(dtype, where):
    block = _block_elements(dtype)
    g = np.full(2 * block + block // 2, 4.0, dtype)  # two full blocks and a partial one
    g[{"first of a block": block, "last full": 2 * block - 1, "last partial": -1}[where]] = np.nan
    found = np.zeros(1, np.float32)
    (out,), found = K.unscale_and_check([g], np.array([0.5], np.float32), found)
    assert found[0] == 1.0 and out.dtype == dtype
    assert np.count_nonzero(out.astype(np.float32) == 2.0) == g.size - 1  # every other element scaled once


def test_unscale_and_check_scales_bfloat16_exactly():
    rng = np.random.default_rng(1)
    g = rng.standard_normal(3 * _block_elements(ml_dtypes.bfloat16) + 5).astype(ml_dtypes.bfloat16)
    found = np.zeros(1, np.float32)
    (out,), found = K.unscale_and_check([g.copy()], np.array([2.0**-10], np.float32), found)
    assert out.dtype == ml_dtypes.bfloat16 and found[0] == 0.0
    np.testing.assert_array_equal(out.astype(np.float32), g.astype(np.float32) * np.float32(2.0**-10))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unscale_and_check_compiled_loop_and_numpy_passes_agree_bit_for_bit(dtype, monkeypatch):
    """float32 and float64 gradients take one compiled loop where numba is in use: NumPy's products (subnormal
    ones, and finite ones that overflow when inv_scale > 1) and its inf/NaN verdict."""
    rng = np.random.default_rng(4)
    g = rng.uniform(-3.0, 3.0, 1000).astype(dtype) * np.array([1.0, 1e-38, 1e38], dtype)[rng.integers(0, 3, 1000)]

    def unscale(inv):
        found = np.zeros(1, np.float32)
        (out,), found = K.unscale_and_check([g.copy()], np.array([inv], np.float32), found)
        return out, found[0]

    compiled = [unscale(inv) for inv in (0.5, 3.0)]
    from ampcore_cpu import compiled as cpu_compiled

    monkeypatch.setattr(cpu_compiled, "load", lambda name: None)  # the NumPy passes
    for (out, found), inv in zip(compiled, (0.5, 3.0)):
        want, want_found = unscale(inv)
        with np.errstate(over="ignore"):
            assert out.tobytes() == want.tobytes() == (g * np.float32(inv)).astype(dtype).tobytes()
        assert found == want_found == float(not np.isfinite(want).all())
    assert compiled[0][1] == 0.0
    assert compiled[1][1] == (1.0 if dtype == np.float32 else 0.0)  # 2e38 * 3 overflows float32 only


def test_unscale_and_check_never_writes_through_read_only_or_strided_inputs():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    frozen = base.copy()
    frozen.flags.writeable = False
    strided = base.T  # writeable, not C-contiguous
    found = np.zeros(1, np.float32)
    (a, b), found = K.unscale_and_check([frozen, strided], np.array([0.5], np.float32), found)
    np.testing.assert_array_equal(frozen, np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(base, np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(a, frozen * 0.5)
    np.testing.assert_array_equal(b, base.T * 0.5)
    assert a.flags.writeable and b.flags.c_contiguous and found[0] == 0.0


def test_unscale_and_check_scales_views_of_one_flat_buffer_in_place():
    block = _block_elements(np.float32)
    flat = np.full(block + 10, 8.0, np.float32)
    views = [flat[:3], flat[3 : block + 7], flat[block + 7 : block + 7], flat[block + 7 :]]
    views[3][-1] = -np.inf
    found = np.zeros(1, np.float32)
    out, found = K.unscale_and_check(views, np.array([0.25], np.float32), found)
    assert all(o is v for o, v in zip(out, views)) and found[0] == 1.0
    np.testing.assert_array_equal(flat[:-1], 2.0)


def test_unscale_and_check_counts_overflow_from_inv_scale_above_one_quietly():
    g = np.array([1.0, 3e38], np.float32)
    found = np.zeros(1, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (out,), found = K.unscale_and_check([g], np.array([4.0], np.float32), found)
    assert found[0] == 1.0 and out[0] == 4.0 and np.isinf(out[1])


def test_update_scale_follows_torch_rule():
    scale, tracker = np.array([1024.0], np.float32), np.array([0], np.int32)
    clean, inf = np.zeros(1, np.float32), np.ones(1, np.float32)
    scale, tracker = K.update_scale(scale, tracker, clean, 2.0, 0.5, 3)
    assert (scale[0], tracker[0]) == (1024.0, 1)
    scale, tracker = K.update_scale(scale, tracker, clean, 2.0, 0.5, 3)
    scale, tracker = K.update_scale(scale, tracker, clean, 2.0, 0.5, 3)
    assert (scale[0], tracker[0]) == (2048.0, 0)
    scale, tracker = K.update_scale(scale, tracker, inf, 2.0, 0.5, 3)
    assert (scale[0], tracker[0]) == (1024.0, 0)
    big = np.array([3e38], np.float32)
    big, tracker = K.update_scale(big, np.array([0], np.int32), clean, 2.0, 0.5, 1)
    assert big[0] == np.float32(3e38) and tracker[0] == 0  # growth to inf is refused


def test_sigmoid_is_stable_for_large_inputs():
    x = np.array([-1000.0, -30.0, 0.0, 30.0, 1000.0], np.float32)
    out = K.sigmoid(x)
    with np.errstate(over="ignore"):  # the float64 reference itself overflows to the right limit
        ref = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(out, ref, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int64])
def test_where_fast_path_gives_the_same_bits_as_np_where(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 53)).astype(dtype)
    b = rng.standard_normal((37, 53)).astype(dtype)
    if np.dtype(dtype).kind != "i":
        a[0, :3] = [np.inf, np.nan, -0.0]
    cond = rng.random((37, 53)) > 0.5
    for x, y in [(a, b), (a, 0.0), (0.0, b), (a, -0.0), (a, 1.5)]:
        ref = np.where(cond, np.asarray(x, dtype), np.asarray(y, dtype))
        out = K.where(cond, x, y)
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out.view(np.uint8), ref.view(np.uint8))
    scalar = K.where(np.array(True), np.array(a[0, 0]), np.array(b[0, 0]))  # 0-d: the general path
    assert scalar.shape == () and scalar.dtype == np.dtype(dtype)
    broadcast = K.where(cond[:1], a, b)  # shapes differ: the general path
    np.testing.assert_array_equal(broadcast, np.where(cond[:1], a, b))


def test_malloc_tuning_is_reported_and_can_be_switched_off():
    import platform
    import subprocess
    import sys

    code = "import ampcore; print(ampcore.get_backend('cpu').capabilities().extra['malloc_tuned'])"
    env_off = {**__import__("os").environ, "AMPCORE_CPU_MALLOC_TUNING": "0"}
    off = subprocess.run([sys.executable, "-c", code], env=env_off, capture_output=True, text=True, check=True)
    assert off.stdout.strip() == "False"
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert on.stdout.strip() == "True"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-40, max_value=40), min_size=1, max_size=50))
def test_erf_matches_math_erf_to_float64_accuracy(values):
    import math

    x = np.array(values, np.float64)
    out = K.erf(x)
    ref = np.array([math.erf(v) for v in values])
    np.testing.assert_allclose(out, ref, rtol=4 * 2.0**-52, atol=1e-300)


def test_erf_edge_values():
    out = K.erf(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 8.0], np.float64))
    assert out[0] == 0.0 and np.signbit(out[1])
    assert out[2] == 1.0 and out[3] == -1.0 and np.isnan(out[4])
    np.testing.assert_allclose(out[5:], [0.8427007929497149, -0.8427007929497149, 1.0], rtol=2.0**-52)
    assert K.erf(np.array([0.5], np.float32)).dtype == np.float32


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_blockwise_gelu_gives_the_whole_array_bits(dtype, approximate):
    """GELU runs over cache-sized blocks past CHUNK elements; every bit must match the one-pass kernel."""
    from ampcore_cpu import fused_nn
    from ampcore_cpu.kernels import CHUNK, _lowp, _quiet

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, CHUNK + 5)) * 3).astype(dtype)
    gy = rng.standard_normal((2, CHUNK + 5)).astype(dtype)
    whole = {f.__name__: _quiet(_lowp(f)) for f in (fused_nn.gelu, fused_nn.gelu_backward)}
    fast = {f.__name__: _quiet(_lowp(fused_nn._blockwise(f))) for f in (fused_nn.gelu, fused_nn.gelu_backward)}
    assert np.array_equal(fast["gelu"](x, approximate).view(np.uint8), whole["gelu"](x, approximate).view(np.uint8))
    assert np.array_equal(
        fast["gelu_backward"](x, gy, approximate).view(np.uint8),
        whole["gelu_backward"](x, gy, approximate).view(np.uint8),
    )


@pytest.mark.parametrize(
    "shape, axis", [((8, 4, 6, 5), 1), ((5, 9, 7), 0), ((5, 9, 7), 1), ((3, 16, 2), 1), ((3, 17, 2), 1)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16])
def test_argmax_over_a_short_axis_is_numpys(shape, axis, dtype):
    """The short-axis path (pooling taps) gives np.argmax's index: the first maximum, the first NaN,
    -0.0 tied with +0.0, -inf rows; ties are made common by drawing from five values."""
    rng = np.random.default_rng(7)
    for trial in range(12):
        x = rng.integers(-2, 3, size=shape).astype(np.float32)
        x[rng.random(shape) < 0.1 * (trial % 3)] = np.nan
        x[rng.random(shape) < 0.2 * (trial % 2)] = -0.0
        x[rng.random(shape) < 0.3 * (trial % 4 == 0)] = -np.inf
        x = x.astype(dtype)
        got = K.argmax(x, axis)
        assert got.dtype == np.int64 and np.array_equal(got, np.argmax(x.astype(np.float64), axis)), trial


def test_reshape_of_permuted_views_copies_the_same_elements():
    """reshape copies a view it cannot reinterpret in the source's memory order; the result is np.reshape's."""
    x = np.arange(2 * 3 * 4 * 5 * 2 * 2, dtype=np.float32).reshape(2, 4, 3, 5, 2, 2)
    cases = [
        x.transpose(0, 2, 3, 1, 5, 4),
        x[:, ::-1, :, ::2].transpose(1, 0, 2, 3, 4, 5),
        np.broadcast_to(x[:, :1], x.shape).transpose(0, 2, 1, 3, 4, 5),
        x.transpose(5, 4, 3, 2, 1, 0),
    ]
    for view in cases:
        got = K.reshape(view, (view.shape[0], -1))
        assert got.flags.c_contiguous and np.array_equal(got, np.reshape(view, (view.shape[0], -1)))
    assert np.shares_memory(K.reshape(x, (2, -1)), x)  # a reshape that can be a view stays one


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_matmul_of_single_batch_transposed_operands_matches_the_batched_product(dtype):
    """Batch dimensions all 1 run as one 2-D GEMM (transposed operands go to BLAS as they are)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1, 7, 300)).astype(dtype)
    b = rng.standard_normal((1, 11, 300)).astype(dtype).transpose(0, 2, 1)
    got = K.matmul(a, b)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == (1, 7, 11) and got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2**-7 if dtype != np.float32 else 1e-5, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_compiled_gelu_forward_is_the_numpy_kernels_bits_and_backward_float32_accurate(dtype):
    """With numba, exact-erf GELU runs as one compiled loop: the forward repeats the NumPy kernel's
    arithmetic (same bits in every dtype); the backward (float64 density, erfc for the cdf) is held,
    element by element, to no worse than the NumPy kernel against a float64 erfc reference, but for
    an ulp of its terms."""
    from ampcore_cpu import compiled, fused_nn

    if not compiled.status().enabled:
        pytest.skip(f"the cpu backend runs its {compiled.status().describe()}")
    from ampcore_cpu.kernels import _lowp, _quiet

    rng = np.random.default_rng(11)
    x = np.concatenate(
        [(rng.standard_normal(40000) * 3), [0.0, -0.0, 1e-30, -1e-30, 8.0, -8.0, 40.0, -40.0, np.inf, -np.inf, np.nan]]
    ).astype(dtype)
    gy = rng.standard_normal(x.size).astype(dtype)
    numpy_gelu = _quiet(_lowp(fused_nn.gelu))
    bits = np.uint32 if dtype == np.float32 else np.uint16
    assert fused_nn._compiled_gelu() is not None
    assert np.array_equal(fused_nn.NN_KERNELS["gelu"](x, "none").view(bits), numpy_gelu(x, "none").view(bits))
    x64, g64 = x.astype(np.float64), gy.astype(np.float64)
    with np.errstate(all="ignore"):
        cdf = 0.5 * np.array([math.erfc(-v) for v in x64 / math.sqrt(2.0)])  # 1 + erf would cancel for x << 0
        pdf = np.exp(-0.5 * x64 * x64) / math.sqrt(2.0 * math.pi)
        want = g64 * (cdf + x64 * pdf)
        scale = np.abs(g64) * (np.abs(cdf) + np.abs(x64 * pdf))
    got = fused_nn.NN_KERNELS["gelu_backward"](x, gy, "none").astype(np.float64)
    old = _quiet(_lowp(fused_nn.gelu_backward))(x, gy, "none").astype(np.float64)
    finite = np.isfinite(want)
    info = ml_dtypes.finfo(dtype)
    err, old_err = np.abs(got - want)[finite], np.abs(old - want)[finite]
    # No worse than the NumPy kernel element by element, but for an ulp (both round x / sqrt 2 to the
    # input's precision first, which dominates in the far tail); and float32-accurate where terms are O(1).
    assert np.all(err <= old_err + float(info.eps) * scale[finite] + float(info.smallest_subnormal))
    assert np.array_equal(np.isnan(got), np.isnan(want))


def test_gelu_without_numba_runs_the_numpy_kernels(monkeypatch):
    """On the NumPy fallback path (no numba, or AMPCORE_CPU_NO_NUMBA=1):
    GELU and its backward are the blockwise NumPy kernels' bits."""
    from ampcore_cpu import fused_nn, gelu32
    from ampcore_cpu.kernels import CHUNK, _lowp, _quiet

    monkeypatch.setattr(fused_nn, "_compiled_gelu", lambda: None)
    monkeypatch.setattr(gelu32, "_loops", lambda: None)
    rng = np.random.default_rng(4)
    x = rng.standard_normal(CHUNK + 9).astype(np.float32)
    gy = rng.standard_normal(CHUNK + 9).astype(np.float32)
    for name, args in (("gelu", (x,)), ("gelu_backward", (x, gy))):
        want = _quiet(_lowp(getattr(fused_nn, name)))(*args, "none")
        assert np.array_equal(fused_nn.NN_KERNELS[name](*args, "none").view(np.uint32), want.view(np.uint32))
