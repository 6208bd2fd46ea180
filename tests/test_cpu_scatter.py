"""The cpu backend's ``scatter_add`` gives ``np.add.at``'s bits (the same additions in the same order): repeated
and negative indices, signed zeros, inf and NaN, any axis, float32 / float64 / 16-bit sources; an index out of
range is an IndexError naming it.  On the NumPy fallback path it is ``np.add.at`` itself."""

import ml_dtypes
import numpy as np
import pytest

from ampcore_cpu import kernels


def _add_at(src, indices, axis, size):  # the kernel contract, written with np.add.at
    moved = np.moveaxis(src.astype(np.float32) if src.dtype.itemsize == 2 else src, axis, 0)
    out = np.zeros((size,) + moved.shape[1:], moved.dtype)
    np.add.at(out, indices, moved)
    return np.moveaxis(out, 0, axis).astype(src.dtype)


def _bits(a):
    return a.view(f"u{a.dtype.itemsize}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_the_additions_of_np_add_at_in_its_order(dtype, axis):
    rng = np.random.default_rng(axis)
    src = (rng.standard_normal((6, 7, 5)) * 10.0 ** rng.integers(-3, 4, (6, 7, 5))).astype(dtype)
    src.flat[:4] = [-0.0, np.inf, np.nan, -np.inf]
    size = 4
    indices = rng.integers(-size, size, src.shape[axis])  # repeats, and negative indices from the end
    got = kernels.scatter_add(src, indices, axis, size)
    want = _add_at(src, indices, axis, size)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_a_sum_onto_zero_keeps_np_add_at_sign_of_zero():
    src = np.array([[-0.0, 1.0], [-0.0, -1.0]], np.float32)
    got = kernels.scatter_add(src, np.array([0, 0]), 0, 2)
    np.testing.assert_array_equal(_bits(got), _bits(_add_at(src, np.array([0, 0]), 0, 2)))  # +0.0, as 0.0 + -0.0


def test_an_index_out_of_range_names_it():
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        kernels.scatter_add(np.ones((3, 2), np.float32), np.array([0, 5, 1]), 0, 5)
