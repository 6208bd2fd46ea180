"""The cpu backend's compiled softmax, log_softmax and their backwards (``ampcore_cpu._softmax_numba``, the last
axis) give the NumPy kernels' bits (a NaN's sign and payload aside): NumPy's exp, and each row summed as NumPy's
add-reduction does (pairwise, onto 0), for rows of every length class (in order below 8, blocked to 128, split
past it), float32 / float16 / bfloat16, with inf, -inf, NaN and all -inf rows; other axes and layouts take the
NumPy kernels."""

import ml_dtypes
import numpy as np
import pytest

from ampcore_cpu import compiled, fused_nn
from ampcore_cpu.kernels import _lowp, _quiet

pytestmark = pytest.mark.skipif(
    not compiled.status().enabled, reason=f"the cpu backend runs its {compiled.status().describe()}"
)

FNS = (fused_nn.softmax, fused_nn.softmax_backward, fused_nn.log_softmax, fused_nn.log_softmax_backward)
NUMPY = {fn.__name__: _quiet(_lowp(fn)) for fn in FNS}
DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-2, 2, shape)
    flat = x.reshape(-1, shape[-1])
    flat[0, 0] = np.inf
    flat[0, -1] = -np.inf
    flat[1 % flat.shape[0], 0] = np.nan
    flat[2 % flat.shape[0], :] = -np.inf  # a row of -inf: -inf - -inf is NaN, as NumPy's
    return x.astype(dtype)


def _same(got, want):
    """The same bits, a NaN's sign and payload aside where two NaNs meet: IEEE leaves open which operand's NaN
    a product or sum returns, and the compilers order commutative operands as they like."""
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    bits = f"u{got.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(bits)[~nan], want.view(bits)[~nan])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 7, 8, 32, 129, 300, 1031])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_and_its_backward_are_the_numpy_kernels_bits(name, dtype, n):
    x = _values((3, 40, n), dtype, n)
    y = NUMPY[name](x, -1)
    _same(fused_nn.NN_KERNELS[name](x, -1), y)
    _same(fused_nn.NN_KERNELS[name](x, 2), y)
    gy = _values((3, 40, n), dtype, n + 1)
    _same(fused_nn.NN_KERNELS[f"{name}_backward"](y, gy, -1), NUMPY[f"{name}_backward"](y, gy, -1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_other_axes_and_layouts_take_the_numpy_kernels(dtype, monkeypatch):
    x = _values((4, 33, 6), dtype, 9)
    want_axis1 = NUMPY["softmax"](x, 1)
    strided = x[:, ::2, :]
    want_strided = NUMPY["softmax"](strided, -1)
    monkeypatch.setattr(fused_nn, "_row_loops", lambda: pytest.fail("the row loops ran"))
    _same(fused_nn.NN_KERNELS["softmax"](x, 1), want_axis1)
    _same(fused_nn.NN_KERNELS["softmax"](strided, -1), want_strided)


def test_the_row_loops_run_for_the_last_axis(monkeypatch):
    calls = []
    loops = fused_nn._row_loops()
    monkeypatch.setattr(fused_nn, "_row_loops", lambda: calls.append(1) or loops)
    fused_nn.NN_KERNELS["softmax"](_values((2, 5), np.float32, 0), -1)
    assert calls
