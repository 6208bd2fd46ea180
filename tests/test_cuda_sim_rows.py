"""The cuda backend's layer-norm and cross-entropy kernels, which ampcore's kernel contract does not include
(so the conformance suite never calls them), run on the CUDA simulator against a float64 reference.

Tolerances: one rounding to the dtype (a subnormal spacing at least) plus float32 accumulation over the row
(float64's own for float64)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")
DTYPES = ["float32", "float64", "float16", "bfloat16"]
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}
ACC_EPS = {"float64": 2.0**-52}
# The spacing of the dtype's subnormals: the absolute error of rounding a result that small.
TINY = {"float16": 2.0**-24, "bfloat16": 2.0**-133, "float32": 2.0**-149, "float64": 0.0}


@pytest.fixture
def backend(monkeypatch):
    monkeypatch.setenv("AMPCORE_CUDA_SIMULATOR", "h100")
    from ampcore_cuda.plugin import CUDABackend

    return CUDABackend()


def _tol(dtype: str, n: int, scale: np.ndarray) -> np.ndarray:
    acc = ACC_EPS.get(dtype, 2.0**-24)
    return (EPS[dtype] + 4 * n * acc) * scale + TINY[dtype] + 1e-300


def _put(backend, host: np.ndarray, dtype: str):
    arr = backend.from_numpy(host, dtype)
    return arr, backend.to_numpy(arr).astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_and_backward_match_float64(backend, dtype, affine):
    from ampcore_cuda.norm import layer_norm, layer_norm_backward

    rng = np.random.default_rng(0)
    rows, n, eps = 5, 300, 1e-5  # n > the 256-thread block: the grid-stride loops and the reductions both run
    x, x64 = _put(backend, rng.standard_normal((rows, n)) * 3 + 1, dtype)
    w, w64 = _put(backend, rng.standard_normal(n), dtype)
    b, b64 = _put(backend, rng.standard_normal(n), dtype)
    gy, gy64 = _put(backend, rng.standard_normal((rows, n)), dtype)
    y, mean, rstd = layer_norm(x, w if affine else None, b if affine else None, n, eps)
    mu = x64.mean(-1, keepdims=True)
    r = 1 / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + eps)
    xh = (x64 - mu) * r
    ref = xh * w64 + b64 if affine else xh
    got = backend.to_numpy(y).astype(np.float64)
    scale = np.abs(xh) * (np.abs(w64) if affine else 1) + (np.abs(b64) if affine else 0) + 1
    assert np.all(np.abs(got - ref) <= _tol(dtype, n, scale))
    gx, gw, gb = layer_norm_backward(x, gy, w if affine else None, mean, rstd, n)
    g = gy64 * (w64 if affine else 1)
    ref_gx = r * (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True))
    scale = r * (np.abs(g) + np.abs(g).mean(-1, keepdims=True) + np.abs(xh) * np.abs(g * xh).mean(-1, keepdims=True))
    assert np.all(np.abs(backend.to_numpy(gx).astype(np.float64) - ref_gx) <= _tol(dtype, n, scale))
    if affine:
        ref_gw, ref_gb = (gy64 * xh).sum(0), gy64.sum(0)
        assert np.all(
            np.abs(backend.to_numpy(gw).astype(np.float64) - ref_gw)
            <= _tol(dtype, rows, np.abs(gy64 * xh).sum(0) + 1e-3)
        )
        assert np.all(
            np.abs(backend.to_numpy(gb).astype(np.float64) - ref_gb) <= _tol(dtype, rows, np.abs(gy64).sum(0))
        )
    else:
        assert gw is None and gb is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_forward_and_backward_match_float64_and_flag_bad_targets(backend, dtype):
    from ampcore_cuda.loss import cross_entropy, cross_entropy_backward

    rng = np.random.default_rng(1)
    rows, n = 6, 70
    x, x64 = _put(backend, rng.standard_normal((rows, n)) * 4, dtype)
    target_host = np.array([0, 69, 5, -100, 33, 12], np.int64)
    target = backend.from_numpy(target_host, "int64")
    loss, lse, bad = cross_entropy(x, target)
    m = x64.max(-1, keepdims=True)
    ref_lse = (m + np.log(np.exp(x64 - m).sum(-1, keepdims=True)))[:, 0]
    picked = x64[np.arange(rows), np.where(target_host >= 0, target_host, 0)]
    ref_loss = np.where(target_host == -100, 0.0, ref_lse - picked)
    acc = "float64" if dtype == "float64" else "float32"
    assert np.all(np.abs(lse.get() - ref_lse) <= _tol(acc, n, np.abs(ref_lse) + 1))
    assert np.all(np.abs(loss.get() - ref_loss) <= _tol(acc, n, np.abs(ref_lse) + np.abs(picked)))
    assert int(bad.get()[0]) == 0
    gy = backend.from_numpy(rng.standard_normal(rows), "float64" if dtype == "float64" else "float32")
    gx = cross_entropy_backward(x, target, lse, gy.data)
    gy64 = backend.to_numpy(gy).astype(np.float64)[:, None]
    onehot = np.eye(n)[np.where(target_host >= 0, target_host, 0)]
    p = np.exp(x64 - ref_lse[:, None])
    ref_gx = np.where(target_host[:, None] == -100, 0.0, gy64 * (p - onehot))
    got = backend.to_numpy(gx).astype(np.float64)
    assert np.all(np.abs(got - ref_gx) <= _tol(dtype, n, np.abs(gy64) * (p + onehot)))
    bad_target = backend.from_numpy(np.array([0, 70, 1, 2, 3, 4], np.int64), "int64")
    assert int(cross_entropy(x, bad_target)[2].get()[0]) == 1, "a target outside [0, C) sets the device flag"
