"""ampcore_cpu.kernels._folded_gemm: a batched (..., M, K) @ (K, N) product runs as one 2-D GEMM, on the
transformer bench's shapes (the linear layers' forward and input gradients; the weight is a transposed view in the
forward, contiguous in the backward).

Folding changes M, and with it which BLAS kernel sums which rows: OpenBLAS's Haswell kernels (what it runs on
AMD Zen 5) sum some rows and columns of a block in another order than the rest, so the folded product's bits
are not always the per-item product's.  What holds on every BLAS is what each output element is: a float32
dot product over all of K, rounded once (``gemm_bound``).
"""

import ml_dtypes
import numpy as np
import pytest
from gemm_bound import assert_one_float32_dot_rounded_once

from ampcore_cpu import kernels as K
from ampcore_cpu import mkl

# (a, b) of every product that takes the folded path in `ampcore bench` (mlp and cnn have none)
BENCH_SHAPES = [
    ((16, 64, 256), (256, 256)),
    ((16, 64, 256), (256, 768)),
    ((16, 64, 256), (256, 1024)),
    ((16, 64, 768), (768, 256)),
    ((16, 64, 1024), (1024, 256)),
]


def _operands(shapes, transposed, seed):
    rng = np.random.default_rng(seed)
    (sa, sb) = shapes
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb[::-1]).astype(np.float32).T if transposed else rng.standard_normal(sb)
    return a, b.astype(np.float32, copy=False)


@pytest.fixture
def folds(monkeypatch):
    """Counts the calls of the folding GEMM."""
    calls = []
    real = K._folded_gemm
    monkeypatch.setattr(K, "_folded_gemm", lambda a, b: calls.append(a.shape) or real(a, b))
    return calls


@pytest.mark.parametrize("transposed", [True, False], ids=["weight-view", "contiguous"])
@pytest.mark.parametrize("shapes", BENCH_SHAPES, ids=str)
def test_folded_product_is_one_float32_dot_product_per_element(shapes, transposed, folds):
    a, b = _operands(shapes, transposed, 1)
    a[0, 0, :3] = [np.inf, -0.0, 1e-42]  # an inf row gives inf/NaN where it meets the weights, as per item
    got = K.matmul(a, b)
    assert folds == [a.shape], "the product was not folded"
    assert got.shape == a.shape[:-1] + b.shape[-1:] and got.dtype == np.float32
    assert_one_float32_dot_rounded_once(got, a, b, f"folded {shapes}")


LOW_PRECISION_PATHS = [
    pytest.param(K.widened_matmul, id="widened"),
    pytest.param(
        K.mkl_matmul, id="mkl", marks=pytest.mark.skipif(not mkl.status().enabled, reason=mkl.status().reason)
    ),
]


@pytest.mark.parametrize("matmul", LOW_PRECISION_PATHS)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shapes", BENCH_SHAPES[:2], ids=str)
def test_low_precision_folded_product_rounds_a_float32_dot_product_once(shapes, dtype, matmul):
    a, b = (v.astype(dtype) for v in _operands(shapes, True, 2))
    got = matmul(a, b)
    assert got.dtype == np.dtype(dtype)
    assert_one_float32_dot_rounded_once(got, a, b, f"{np.dtype(dtype).name} {shapes}")


def test_a_single_row_or_a_strided_batch_is_not_folded(folds):
    """M = 1 (a vector per item: BLAS may take gemv) and a non-contiguous ``a`` keep NumPy's batched product."""
    rng = np.random.default_rng(3)
    b = rng.standard_normal((256, 10)).astype(np.float32)
    for a in (rng.standard_normal((16, 1, 256)), rng.standard_normal((16, 64, 512))):
        a = a.astype(np.float32)[:, :, ::2] if a.shape[-1] == 512 else a.astype(np.float32)
        assert_one_float32_dot_rounded_once(K.matmul(a, b), a, b, f"{a.shape} {a.strides}")
    assert folds == []


@pytest.mark.parametrize("shape", [(0, 2, 0), (2, 0, 3), (0, 4, 5), (3, 2, 0)])
def test_empty_operands_fold_to_numpys_empty_or_zero_product(shape):
    """A zero-size batch, row count or K (the fuzz suite's linear with no inputs) still folds: -1 cannot reshape."""
    a = np.ones(shape, np.float32)
    b = np.ones((shape[-1], 3), np.float32)
    got = K.matmul(a, b)
    want = np.matmul(a, b)
    assert got.shape == want.shape and np.array_equal(got, want)
