"""ampcore.nn.init's torch additions: orthogonal_, trunc_normal_, eye_, and the deprecated names without ``_``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ampcore
from ampcore import nn

EPS32 = float(np.finfo(np.float32).eps)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (6, 2, 2)])
def test_orthogonal_gives_orthonormal_rows_or_columns_times_gain(shape):
    w = nn.init.orthogonal_(ampcore.empty(*shape), gain=2.0)
    flat = w.numpy().astype(np.float64).reshape(shape[0], -1)
    small = min(flat.shape)
    gram = flat @ flat.T if flat.shape[0] == small else flat.T @ flat
    # Q from float64 QR, scaled and rounded once to float32: each entry off by <= eps/2 relative, n-term dot products
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=4.0 * max(flat.shape) * EPS32)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        nn.init.orthogonal_(ampcore.empty(3))


def test_trunc_normal_stays_in_bounds_with_the_asked_scale_and_is_seeded():
    ampcore.manual_seed(0)
    t = nn.init.trunc_normal_(ampcore.empty(20000), std=0.02, a=-0.04, b=0.04)
    v = t.numpy()
    assert v.min() >= -0.04 and v.max() <= 0.04
    # N(0, 0.02) cut at +-2 sd has sd 0.02 * 0.8796; 20000 draws estimate it within a few percent
    assert abs(v.std() / (0.02 * 0.8796) - 1) < 0.03
    ampcore.manual_seed(0)
    assert np.array_equal(nn.init.trunc_normal_(ampcore.empty(20000), std=0.02, a=-0.04, b=0.04).numpy(), v)


def test_eye_and_the_deprecated_aliases_warn_and_delegate():
    assert nn.init.eye_(ampcore.empty(2, 3)).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    for old in ("uniform", "normal", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal"):
        with pytest.warns(FutureWarning, match=f"`nn.init.{old}` is now deprecated in favor of `nn.init.{old}_`"):
            getattr(nn.init, old)(ampcore.empty(4, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert nn.init.constant(ampcore.empty(2), 3.0).tolist() == [3.0, 3.0]
