"""The cpu backend's compiled (numba) kernels: the same bits as its NumPy kernels, and memory measured
without numba's one-time compilation."""

import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import ampcore
from ampcore_cpu import compiled
from ampcore_cpu import kernels as cpu_kernels

K = ampcore.get_backend("cpu").kernels


def test_peak_memory_does_not_count_numba_compiling_the_loops():
    """In a fresh process the first float16 conversion compiles (or loads) numba's loops: tens of MiB of
    Python objects.  peak_memory loads them before tracing, so it reports the arrays (~10 KiB here)."""
    pytest.importorskip("numba")
    script = textwrap.dedent(
        """
        import numpy as np
        import ampcore
        backend = ampcore.get_backend("cpu")
        k, x = backend.kernels, np.ones(4096, np.float32)
        print(backend.peak_memory(lambda: k.cast(k.cast(x, ampcore.float16), ampcore.float32)))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[-1]) < 1 << 20


def test_warm_says_whether_numba_is_in_use():
    try:
        import numba  # noqa: F401
    except ImportError:
        assert compiled.warm() is False
    else:
        assert compiled.warm() is True


# The cnn benchmark's float16/bfloat16 products that are computed in blocks (conv2's forward, input gradient
# and weight gradient), and two more shapes; a transposed operand as the conv weight gradient passes it.
BLOCKED_SHAPES = [
    ((64, 288), (288, 8192)),
    ((32, 576), (576, 8192)),
    ((288, 8192), (8192, 64)),
    ((4096, 600), (600, 40)),
]


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shapes", BLOCKED_SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_blocked_low_precision_matmul_gives_the_whole_products_bits(dtype, shapes, transposed):
    """Row or column blocks of the larger operand: each output element is still one float32 dot product
    over all of K, rounded once, so the bits are the unblocked product's."""
    rng = np.random.default_rng(0)
    (m, k), (_, n) = shapes
    a = rng.standard_normal((1, m, k), dtype=np.float32).astype(dtype)
    if transposed:
        a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    b = rng.standard_normal((1, k, n), dtype=np.float32).astype(dtype)
    assert cpu_kernels._blocked_lowp_gemm(a, b) is not None
    whole = cpu_kernels._down(cpu_kernels._gemm(cpu_kernels._up(a), cpu_kernels._up(b)), a.dtype)
    got = K.matmul(a, b)
    assert got.dtype == whole.dtype and got.shape == whole.shape
    np.testing.assert_array_equal(got.view(np.uint16), whole.view(np.uint16))


def test_small_or_batched_low_precision_products_are_not_blocked():
    a = np.ones((1, 64, 64), np.float16)
    assert cpu_kernels._blocked_lowp_gemm(a, a) is None
    big = np.ones((2, 64, 288), np.float16), np.ones((2, 288, 8192), np.float16)
    assert cpu_kernels._blocked_lowp_gemm(*big) is None
