"""The opencl backend's GEMM epilogues (ampcore_opencl.gemm_epilogue): a captured matmul and the chain that alone
reads its product as one kernel, on each OpenCL device.

The conformance suite checks the epilogues' bits on hard values (subnormal and infinite products, 16-bit
roundings); here: that the fused kernel is the one that runs, in both GEMM paths (direct and packed) and on
batched products, and that a layout the epilogue does not read falls back to two kernels with the same bits."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore_opencl import gemm

pytestmark = pytest.mark.usefixtures("opencl_device")


def _same_as_eager(fn, *args):
    compiled = ampcore.compile(fn)
    outs = [compiled(*args).numpy() for _ in range(4)]
    want = fn(*args).numpy()
    assert all(o.tobytes() == want.tobytes() for o in outs)
    return ampcore.compiler.explain(fn, *args).fused


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("m,k,n", [(5, 7, 3), (37, 70, 45)], ids=["direct", "packed"])
def test_a_linear_layer_runs_as_one_kernel_with_eager_bits(opencl_device, dtype, m, k, n):
    """Bias row, ReLU, a full-shape residual and a column scale, over both GEMM kernels."""
    assert (m * n * k <= gemm.DIRECT_MAX_WORK) == (m == 5)
    device = f"opencl:{opencl_device}"
    d = dt.as_dtype(dtype)
    rng = np.random.default_rng(m)

    def t(*shape):
        return ampcore.tensor(rng.standard_normal(shape) * 3.0, dtype=d, device=device)

    x, w, bias, res, col = t(m, k), t(k, n), t(n), t(m, n), t(m, 1)
    fused = _same_as_eager(lambda x, w, b, r, c: ((x @ w + b).relu() + r) * c, x, w, bias, res, col)
    assert len(fused) == 1 and "a GEMM with its epilogue" in fused[0], fused


def test_batched_products_and_other_layouts(opencl_device):
    """A batched product with a bias row fuses; an operand with one row per batch (not a layout the epilogue
    reads) runs the product and the chain as two kernels, with the same bits."""
    device = f"opencl:{opencl_device}"
    rng = np.random.default_rng(9)

    def t(*shape):
        return ampcore.tensor(rng.standard_normal(shape), dtype=dt.float16, device=device)

    a, b, bias, per_batch = t(3, 20, 33), t(3, 33, 40), t(40), t(3, 1, 40)
    fused = _same_as_eager(lambda a, b, c: (a @ b + c) * 0.5, a, b, bias)
    assert "a GEMM with its epilogue" in fused[0], fused
    _same_as_eager(lambda a, b, c: (a @ b + c) * 0.5, a, b, per_batch)
