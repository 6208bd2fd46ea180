"""ampcore/ops/decls/movement.py: view_as, repeat, tile, repeat_interleave, narrow, flip, roll, diag(onal) and
diag_embed, exactly torch's values, with the gradients summed back onto the elements they copied."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore

torch = pytest.importorskip("torch")

A = np.arange(24.0).reshape(2, 3, 4) - 7.5

CASES = [
    ("repeat", lambda m, x: x.repeat(2, 1, 3)),
    ("repeat.more_dims", lambda m, x: x.repeat((2, 1, 1, 2))),
    ("tile", lambda m, x: m.tile(x, (2,))),
    ("repeat_interleave", lambda m, x: m.repeat_interleave(x, 2, dim=1)),
    ("repeat_interleave.flat", lambda m, x: x.repeat_interleave(3)),
    ("repeat_interleave.counts", lambda m, x: m.repeat_interleave(x, m.tensor([1, 0, 2]), dim=1)),
    ("narrow", lambda m, x: x.narrow(2, -3, 2)),
    ("flip", lambda m, x: m.flip(x, (0, 2))),
    ("fliplr", lambda m, x: m.fliplr(x)),
    ("flipud", lambda m, x: m.flipud(x)),
    ("roll.flat", lambda m, x: m.roll(x, 5)),
    ("roll.dims", lambda m, x: x.roll((1, -2), (0, 2))),
    ("diagonal", lambda m, x: x.diagonal(1, 1, 2)),
    ("diagonal.negative", lambda m, x: m.diagonal(x, -1, 2, 0)),
    ("diag.of_matrix", lambda m, x: m.diag(x[0], 1)),
    ("diag.of_vector", lambda m, x: m.diag(x[0, 0], -2)),
    ("diag_embed", lambda m, x: m.diag_embed(x, 1)),
    ("view_as", lambda m, x: x.view_as(x.reshape(4, 6))),
    ("reshape_as", lambda m, x: x.reshape_as(x.reshape(6, 4))),
]


@pytest.mark.parametrize(("name", "fn"), CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_are_torchs(name, fn):
    x, t = ampcore.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    y, ty = fn(ampcore, x), fn(torch, t)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    w = np.random.default_rng(0).standard_normal(ty.shape)
    (y * ampcore.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-15)


def test_bad_arguments_say_what_is_wrong():
    x = ampcore.zeros(2, 3)
    with pytest.raises(ValueError, match="give at least 2"):
        x.repeat(2)
    with pytest.raises(IndexError, match="leave dimension 1 of size 3"):
        x.narrow(1, 2, 2)
    with pytest.raises(ValueError, match="one non-negative count per element"):
        ampcore.repeat_interleave(x, ampcore.tensor([1, 2]), dim=1)
    with pytest.raises(ValueError, match="same length"):
        ampcore.roll(x, (1, 2), 0)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        ampcore.diag(ampcore.zeros(2, 2, 2))
