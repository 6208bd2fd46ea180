"""ampcore_cpu.kernels._folded_gemm: a batched (..., M, K) @ (K, N) product runs as one 2-D GEMM with the bits
of NumPy's per-batch-item product, on the transformer bench's shapes (the linear layers' forward and input
gradients; the weight is a transposed view in the forward, contiguous in the backward)."""

import ml_dtypes
import numpy as np
import pytest

from ampcore_cpu import kernels as K

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


@pytest.mark.parametrize("transposed", [True, False], ids=["weight-view", "contiguous"])
@pytest.mark.parametrize("shapes", BENCH_SHAPES, ids=str)
def test_folded_product_is_the_batched_products_bits(shapes, transposed):
    a, b = _operands(shapes, transposed, 1)
    a[0, 0, :3] = [np.inf, -0.0, 1e-42]  # an inf row gives inf/NaN where it meets the weights, as per item
    got = K.matmul(a, b)
    want = np.matmul(a, b)
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shapes", BENCH_SHAPES[:2], ids=str)
def test_low_precision_folded_product_rounds_the_batched_float32_product_once(shapes, dtype):
    a, b = (v.astype(dtype) for v in _operands(shapes, True, 2))
    want = K._down(np.matmul(K._up(a), K._up(b)), np.dtype(dtype))
    assert np.array_equal(K.matmul(a, b).view(np.uint16), want.view(np.uint16))


def test_a_single_row_or_a_strided_batch_keeps_numpys_batched_product():
    """M = 1 (a vector per item: BLAS may take gemv) and a non-contiguous ``a`` are not folded."""
    rng = np.random.default_rng(3)
    b = rng.standard_normal((256, 10)).astype(np.float32)
    for a in (rng.standard_normal((16, 1, 256)), rng.standard_normal((16, 64, 512))[:, :, ::2]):
        a = a.astype(np.float32)
        assert np.array_equal(K.matmul(a, b).view(np.uint32), np.matmul(a, b).view(np.uint32))


@pytest.mark.parametrize("shape", [(0, 2, 0), (2, 0, 3), (0, 4, 5), (3, 2, 0)])
def test_empty_operands_fold_to_numpys_empty_or_zero_product(shape):
    """A zero-size batch, row count or K (the fuzz suite's linear with no inputs) still folds: -1 cannot reshape."""
    a = np.ones(shape, np.float32)
    b = np.ones((shape[-1], 3), np.float32)
    got = K.matmul(a, b)
    want = np.matmul(a, b)
    assert got.shape == want.shape and np.array_equal(got, want)
