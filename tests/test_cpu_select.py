"""The cpu backend's compiled ``where`` (ampcore_cpu.select): np.where's bits, on the cnn's ReLU-backward shapes
and on edge values (NaN payloads, inf, -0.0, subnormals), with the bitwise-blend and np.where paths it replaces."""

import ml_dtypes
import numpy as np
import pytest

import ampcore
from ampcore_cpu import compiled, select

K = ampcore.get_backend("cpu").kernels
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
# The cnn's two ReLU backwards (batch 32), and an odd size above the small-array threshold.
SHAPES = [(32, 32, 32, 32), (32, 64, 16, 16), (3, 1777)]


def _edge_values(shape, dtype, rng):
    tiny = float(ml_dtypes.finfo(dtype).smallest_subnormal)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny], dtype=np.float64)
    x = np.where(rng.random(shape) < 0.3, rng.choice(edges, size=shape), rng.standard_normal(shape)).astype(dtype)
    bits = x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.itemsize])
    bits[np.isnan(x) & (rng.random(shape) < 0.5)] |= 1  # a second NaN payload
    return x


@pytest.mark.parametrize("numpy_path", [False, True], ids=["compiled", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES)
def test_where_gives_np_wheres_bits(monkeypatch, numpy_path, dtype, shape):
    if numpy_path:
        monkeypatch.setattr(select, "_loops", lambda: None)
    elif not compiled.status().enabled:
        pytest.skip(f"the cpu backend runs its NumPy fallback here: {compiled.status().describe()}")
    rng = np.random.default_rng(len(shape))
    a, b = _edge_values(shape, dtype, rng), _edge_values(shape, dtype, rng)
    cond = rng.random(shape) > 0.5
    for x, y in [(a, b), (a, 0.0), (0.0, b), (a, -0.0), (1.5, b), (a, float("nan"))]:
        ref = np.where(cond, np.asarray(x, dtype), np.asarray(y, dtype))
        out = K.where(cond, x, y)
        assert out.dtype == np.dtype(dtype) and out.shape == shape
        np.testing.assert_array_equal(out.view(np.uint8), ref.view(np.uint8))


def test_select_leaves_other_cases_to_the_general_path():
    cond = np.ones((64, 80), bool)
    a = np.ones((64, 80), np.float32)
    assert select.select(cond[:1], a, 0.0, a.dtype) is None  # broadcasting
    assert select.select(cond, a.T.copy().T, 0.0, a.dtype) is None  # not C-contiguous
    assert select.select(cond, a.astype(np.int64), 0, np.dtype(np.int64)) is None  # integers: the blend
    assert select.select(cond.astype(np.uint8), a, 0.0, a.dtype) is None  # not a boolean mask
