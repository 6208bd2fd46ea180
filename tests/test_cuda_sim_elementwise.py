"""The cuda backend's elementwise primitives and casts on the CUDA simulator, where the conformance suite's
checks alone would not point at the cause: 0-d arrays through CuPy 14's ``ascontiguousarray``, and the
subnormal (flush-to-zero) behaviour real CuPy's own kernels have and this backend's kernels must not."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from ampcore import dtypes as dt

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")
FLOATS = ["float32", "float64", "float16", "bfloat16"]


@pytest.fixture
def backend(monkeypatch):
    monkeypatch.setenv("AMPCORE_CUDA_SIMULATOR", "h100")
    from ampcore_cuda.plugin import CUDABackend

    return CUDABackend()


@pytest.mark.parametrize("dst", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("src", FLOATS)
def test_a_zero_dimensional_cast_stays_zero_dimensional(backend, src, dst):
    x = backend.from_numpy(np.asarray(2.5), getattr(dt, src))
    out = backend.kernel_functions()["cast"](x, getattr(dt, dst))
    assert backend.to_numpy(out).shape == ()
    assert float(backend.to_numpy(out)) == 2.5


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_full_reduction_of_16_bit_values_is_zero_dimensional(backend, dtype):
    x = backend.from_numpy(np.arange(6.0).reshape(2, 3), getattr(dt, dtype))
    for name in ("sum", "max"):
        out = backend.to_numpy(backend.kernel_functions()[name](x, (0, 1)))
        assert out.shape == () and float(out) == {"sum": 15.0, "max": 5.0}[name]


def test_contiguous_keeps_the_shape_where_cupy14s_ascontiguousarray_makes_0_d_1_d(backend):
    from ampcore_cuda.array import contiguous
    from ampcore_cuda.runtime import import_cupy

    cp = import_cupy()
    zero_d = cp.asarray(np.float32(3))
    assert cp.ascontiguousarray(zero_d).shape == (1,)  # the simulator does what CuPy 14 does
    assert contiguous(zero_d).shape == () and contiguous(zero_d, dtype=np.float64).dtype == np.float64
    strided = cp.asarray(np.arange(12.0).reshape(3, 4))[:, ::2]
    assert contiguous(strided).flags.c_contiguous and contiguous(strided).shape == (3, 2)
