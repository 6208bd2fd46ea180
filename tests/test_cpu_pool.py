"""The cpu backend's fused tiled max-pool kernels (ampcore_cpu.pool): the bits of the core's reference
composition (im2col, argmax, max; eq, where and a permuting copy backward), compiled and NumPy paths alike, on
the cnn benchmark's shapes and on edge values (NaN, inf, -0.0 against +0.0, ties, subnormals)."""

import types

import ml_dtypes
import numpy as np
import pytest

import ampcore
import ampcore.nn.functional as F
from ampcore.nn.functional._pool_op import TILED_MAX_POOL2D
from ampcore_cpu import compiled, pool

K = ampcore.get_backend("cpu").kernels
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
# The cnn benchmark's two pools (batch 32), odd sizes that leave rows and columns outside every window, 3x2 windows.
CASES = [((32, 32, 32, 32), (2, 2)), ((32, 64, 16, 16), (2, 2)), ((2, 3, 7, 9), (2, 2)), ((2, 3, 7, 8), (3, 2))]


class _ReferenceOnly:
    """The cpu kernels without the fused pool kernels: the op takes its reference composition."""

    def __getattr__(self, name):
        return getattr(K, name)

    def has(self, name):
        return not name.startswith("max_pool2d_tiled") and K.has(name)


def _reference(x, g, kernel):
    ctx = types.SimpleNamespace(device_index=0)
    y = TILED_MAX_POOL2D.forward(ctx, _ReferenceOnly(), x, kernel=kernel)
    return y, TILED_MAX_POOL2D.backward(ctx, _ReferenceOnly(), g)[0]


def _edge_values(shape, dtype, rng):
    """Random values with windows full of ties, signed zeros, infinities, NaNs (two payloads) and subnormals."""
    tiny = float(ml_dtypes.finfo(dtype).smallest_subnormal)
    pool_ = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, tiny, -tiny, 2.5, 2.5], dtype=np.float64)
    x = np.where(rng.random(shape) < 0.5, rng.choice(pool_, size=shape), rng.standard_normal(shape)).astype(dtype)
    bits = x.view(np.uint16 if x.itemsize == 2 else np.uint32 if x.itemsize == 4 else np.uint64)
    nan = np.isnan(x) & (rng.random(shape) < 0.5)
    bits[nan] |= 1  # a second NaN payload: which NaN a window passes on shows
    x[..., :2, :2] = dtype(-0.0)
    x[..., 0, 1] = dtype(0.0)  # a window of zeros with both signs
    return x


def _bits(a):
    return a.view(np.uint8)


@pytest.mark.parametrize("numpy_path", [False, True], ids=["compiled", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(("shape", "kernel"), CASES)
def test_fused_pool_gives_the_reference_compositions_bits(monkeypatch, numpy_path, dtype, shape, kernel):
    if numpy_path:
        monkeypatch.setattr(pool, "_loops", lambda: None)
    elif not compiled.status().enabled:
        pytest.skip(f"the cpu backend runs its NumPy fallback here: {compiled.status().describe()}")
    rng = np.random.default_rng(sum(shape) + kernel[0])
    x = _edge_values(shape, dtype, rng)
    out_shape = shape[:2] + (shape[2] // kernel[0], shape[3] // kernel[1])
    g = _edge_values(out_shape, dtype, rng)
    y_ref, gx_ref = _reference(x, g, kernel)
    y = K.max_pool2d_tiled(x, kernel)
    gx = K.max_pool2d_tiled_backward(x, g, kernel)
    assert y.dtype == x.dtype and y.shape == out_shape and gx.dtype == x.dtype and gx.shape == shape
    np.testing.assert_array_equal(_bits(y), _bits(y_ref))
    np.testing.assert_array_equal(_bits(gx), _bits(gx_ref))


@pytest.mark.parametrize("numpy_path", [False, True], ids=["compiled", "numpy"])
def test_fused_pool_takes_non_contiguous_input(monkeypatch, numpy_path):
    if numpy_path:
        monkeypatch.setattr(pool, "_loops", lambda: None)
    x = np.random.default_rng(1).standard_normal((8, 4, 6, 6)).astype(np.float32).transpose(1, 0, 2, 3)
    g = np.random.default_rng(2).standard_normal((4, 8, 3, 3)).astype(np.float32)
    y_ref, gx_ref = _reference(x, g, (2, 2))
    np.testing.assert_array_equal(K.max_pool2d_tiled(x, (2, 2)), y_ref)
    np.testing.assert_array_equal(K.max_pool2d_tiled_backward(x, g, (2, 2)), gx_ref)


def test_max_pool2d_runs_the_fused_kernels_and_its_gradient_matches_float64():
    """F.max_pool2d through the fused kernels, against a float64 NumPy max and its gradient."""
    x64 = np.random.default_rng(3).standard_normal((2, 3, 8, 6))
    x = ampcore.tensor(x64.astype(np.float32), requires_grad=True)
    y = F.max_pool2d(x, 2)
    windows = x64.reshape(2, 3, 4, 2, 3, 2)
    np.testing.assert_array_equal(y.numpy(), windows.max(axis=(3, 5)).astype(np.float32))
    y.sum().backward()
    hit = windows == windows.max(axis=(3, 5), keepdims=True)
    np.testing.assert_array_equal(x.grad.numpy(), hit.reshape(x64.shape).astype(np.float32))
