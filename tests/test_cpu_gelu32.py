"""ampcore_cpu.gelu32 / _gelu32_numba: the vectorized float32 GELU and its backward give, bit for bit, what the
kernels they replace give (the libm loops of _gelu_numba, rounded once to float32), on the transformer bench's
shape, on millions of values spread over every binade and on the edge values; float16/bfloat16 get the libm
loops' float64 values rounded once to their dtype, by tables of every input and without whole-array temporaries; the
tanh form keeps the old path."""

import math
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

from ampcore_cpu import compiled, fused_nn, gelu32
from ampcore_cpu.kernels import CHUNK, _lowp, _quiet

pytestmark = pytest.mark.skipif(
    not compiled.status().enabled, reason=f"the cpu backend runs its {compiled.status().describe()}"
)

_OLD = {fn.__name__: _quiet(_lowp(fused_nn._compiled(fn))) for fn in (fused_nn.gelu, fused_nn.gelu_backward)}
_F32 = np.float32
_MAX = float(np.finfo(_F32).max)
_TINY = float(np.finfo(_F32).smallest_subnormal)
# Edges: signed zeros, subnormals, the fast path's bounds (|x| = 12, |x / sqrt 2| = 8.5), the far tails where
# 1 + erf cancels, the zero of the derivative (x = -0.7518), float32's extremes, inf and NaN.
_EDGES = [0.0, -0.0, _TINY, -_TINY, 1e-40, -1e-40, 1e-38, -1e-38, 1e-8, -1e-8, 12.0, -12.0, 12.000001, -12.000001]
_EDGES += [8.5 * math.sqrt(2.0), -8.5 * math.sqrt(2.0), 5.0, -5.0, -6.0, -7.5, -10.0, -13.0, -20.0, -40.0, 40.0]
_EDGES += [-0.7518, -0.75179, -0.75181, 1e30, -1e30, _MAX, -_MAX, math.inf, -math.inf, math.nan]


def _spread(n, seed):
    """``n`` float32 values with uniformly random bit patterns of magnitude below 14 (every binade down to the
    subnormals, both signs), then the edges."""
    rng = np.random.default_rng(seed)
    top = int(np.array([14.0], _F32).view(np.uint32)[0])
    bits = rng.integers(0, top, n, dtype=np.uint32) | (rng.integers(0, 2, n, dtype=np.uint32) << 31)
    return np.concatenate([bits.view(_F32), np.array(_EDGES, _F32)])


def _bench_values(seed):
    """The bench's GELU input shape, (16, 64, 1024), with normal values of a few scales."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((16, 64, 1024)) * rng.choice([0.3, 1.0, 3.0], (16, 1, 1))).astype(_F32)


def _same_bits(got, want):
    assert got.dtype == want.dtype == _F32 and got.shape == want.shape
    diff = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert diff.size == 0, (
        f"{diff.size} elements differ, first at {diff[:5]}: {got.flat[diff[:5]]} vs {want.flat[diff[:5]]}"
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_forward_is_the_replaced_kernels_bits_on_millions_of_values_and_the_edges(seed):
    x = _spread(2_000_000, seed)
    _same_bits(fused_nn.NN_KERNELS["gelu"](x, "none"), _OLD["gelu"](x, "none"))


@pytest.mark.parametrize("seed", [0, 1])
def test_backward_is_the_replaced_kernels_bits_on_millions_of_values_and_the_edges(seed):
    x = _spread(2_000_000, seed)
    rng = np.random.default_rng(seed + 10)
    gy = (rng.standard_normal(x.size) * 10.0 ** rng.integers(-30, 30, x.size)).astype(_F32)
    # every x edge against every gy edge too
    g_edges = np.array([0.0, -0.0, _TINY, -_TINY, 1.0, -1.0, 3e38, -3e38, _MAX, math.inf, -math.inf, math.nan], _F32)
    ex, eg = np.meshgrid(np.array(_EDGES, _F32), g_edges)
    x, gy = np.concatenate([x, ex.ravel()]), np.concatenate([gy, eg.ravel()])
    _same_bits(fused_nn.NN_KERNELS["gelu_backward"](x, gy, "none"), _OLD["gelu_backward"](x, gy, "none"))


def test_the_bench_shape_gives_the_same_bits_and_takes_the_fast_path():
    x = _bench_values(3)
    gy = (np.random.default_rng(4).standard_normal(x.shape) * 1e-4).astype(_F32)
    _same_bits(fused_nn.NN_KERNELS["gelu"](x, "none"), _OLD["gelu"](x, "none"))
    _same_bits(fused_nn.NN_KERNELS["gelu_backward"](x, gy, "none"), _OLD["gelu_backward"](x, gy, "none"))
    loops = gelu32._loops()
    flat, gflat, out, ok = x.reshape(-1), gy.reshape(-1), np.empty(x.size, _F32), np.empty(x.size, np.bool_)
    # Ziv's test sends few elements to libm, the vectorized path does the work (it would be slower otherwise):
    # the forward's are mostly x < -4.4, where libm's 1 + erf cancels (1.5% of this input, 0.4% at scale 1).
    assert loops.gelu(flat, out, ok) < x.size // 40
    assert loops.gelu_backward(flat, gflat, out, ok) < x.size // 100


def test_a_broadcast_gradient_and_a_strided_input_give_the_same_bits():
    x = _bench_values(5)[:, :, ::2]  # not contiguous
    gy = np.random.default_rng(6).standard_normal((1, 1, x.shape[-1])).astype(_F32)
    _same_bits(fused_nn.NN_KERNELS["gelu_backward"](x, gy, "none"), _OLD["gelu_backward"](x, gy, "none"))
    _same_bits(fused_nn.NN_KERNELS["gelu"](x, "none"), _OLD["gelu"](x, "none"))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("seed", [0, 1])
def test_low_precision_results_are_the_float64_values_rounded_once(dtype, seed):
    """float16/bfloat16 GELU is the libm loops' float64 value rounded once to the dtype (NumPy's cast for
    float16, ml_dtypes' for bfloat16): the tables give those bits (every input value, with gradients of every
    binade and the edges; a spread of bfloat16 inputs; a broadcast gradient)."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)  # every value of the dtype
    with np.errstate(invalid="ignore"):  # ml_dtypes' isfinite warns on its NaNs
        x = np.concatenate([x, x[np.isfinite(x)][:: 3 + seed]])
    if dtype != np.float16:
        x = np.concatenate([x, _spread(1_000_000, seed).astype(dtype)])
    gy = (np.random.default_rng(seed + 8).standard_normal(x.size) * 4.0 ** (seed - 1)).astype(dtype)
    gy[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-7, -1e-7, 3.0]
    assert np.array_equal(
        fused_nn.NN_KERNELS["gelu"](x, "none").view(np.uint16), _OLD["gelu"](x, "none").view(np.uint16)
    )
    got = fused_nn.NN_KERNELS["gelu_backward"](x, gy, "none")
    assert np.array_equal(got.view(np.uint16), _OLD["gelu_backward"](x, gy, "none").view(np.uint16))
    rows, g_row = x[: 40 * 1024].reshape(40, 1024), gy[:1024]
    got = fused_nn.NN_KERNELS["gelu_backward"](rows, g_row, "none")
    assert got.shape == rows.shape and got.dtype == rows.dtype
    assert np.array_equal(got.view(np.uint16), _OLD["gelu_backward"](rows, g_row, "none").view(np.uint16))


@pytest.mark.parametrize("big_above", [True, False])
@pytest.mark.parametrize("midpoint", [1.0 + 2**-11, -(1.0 + 3 * 2**-11), 3 * 2**-25, -(2**-25), 1024.5])
def test_a_float32_value_on_a_float16_midpoint_is_moved_toward_the_float64_value(midpoint, big_above):
    """Where float32(R) is halfway between two float16 values the float32 -> float16 rounding would tie to even;
    the libm path moves it one float32 step toward R, so it rounds as R does (and leaves R itself, if exact)."""
    loops = compiled.load("_gelu16_numba")
    for big in (midpoint * (1 + 2**-40 if big_above else 1 - 2**-40), midpoint):
        y = np.array([loops.to_float16_way(big)], _F32)
        want = np.array([big], np.float64).astype(np.float16)
        assert y.astype(np.float16).view(np.uint16)[0] == want.view(np.uint16)[0]


def test_the_tanh_form_keeps_the_replaced_kernel(monkeypatch):
    monkeypatch.setattr(gelu32, "_loops", lambda: pytest.fail("the vectorized loops ran for the tanh form"))
    x = _spread(100_000, 3)
    _same_bits(fused_nn.NN_KERNELS["gelu"](x, "tanh"), _OLD["gelu"](x, "tanh"))
    x = x[np.abs(x) < 60000]  # float16's range
    assert np.array_equal(
        fused_nn.NN_KERNELS["gelu"](x.astype(np.float16), "tanh").view(np.uint16),
        _OLD["gelu"](x.astype(np.float16), "tanh").view(np.uint16),
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_the_kernels_hold_no_whole_array_float64_or_float32_copies(dtype):
    """AMP's peak memory stays at or under float32's: a 16-bit GELU backward of the bench's shape allocates
    its 2-byte output and one block's temporaries, not float32 copies and a float64 result (18 MiB)."""
    x = _bench_values(9).astype(dtype)
    gy = np.ones_like(x)
    fused_nn.NN_KERNELS["gelu_backward"](x, gy, "none")  # loads what it needs first
    tracemalloc.start()
    try:
        fused_nn.NN_KERNELS["gelu_backward"](x, gy, "none")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= x.nbytes + x.size * 1 + 2 * CHUNK * 8, (
        f"{peak / 2**20:.1f} MiB for a {x.nbytes / 2**20:.0f} MiB input"
    )
