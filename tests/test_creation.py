"""ampcore.creation's torch factories added for issue 37: linspace, eye, range (deprecated, inclusive)."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore


def test_linspace_is_the_float64_values_rounded_once():
    got = ampcore.linspace(-3.3, 7.1, 101)
    assert got.dtype is ampcore.float32 and got.shape == (101,)
    assert np.array_equal(got.numpy(), np.linspace(-3.3, 7.1, 101).astype(np.float32))
    assert ampcore.linspace(0, 1, 3, dtype=ampcore.float64).tolist() == [0.0, 0.5, 1.0]
    assert ampcore.linspace(0, 1, 0).shape == (0,)
    with pytest.raises(ValueError, match="number of steps must be a non-negative int, got -1"):
        ampcore.linspace(0, 1, -1)


def test_eye_square_and_rectangular():
    assert ampcore.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert ampcore.eye(2, 3, dtype=ampcore.int64).tolist() == [[1, 0, 0], [0, 1, 0]]
    with pytest.raises(ValueError, match="eye\\(\\): m must be a non-negative int"):
        ampcore.eye(2, -1)


def test_range_includes_its_end_and_warns_as_torch():
    with pytest.warns(UserWarning, match="use ampcore.arange, which produces values in \\[start, end\\)"):
        assert ampcore.range(1, 4).tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.warns(UserWarning):
        values = ampcore.range(0, 1, 0.25)
    assert values.dtype is ampcore.float32 and values.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
