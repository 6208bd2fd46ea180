"""ampcore/ops/decls/gather.py: gather, index_select, scatter, scatter_add and index_copy, with torch's
signatures and values, differentiable in their float inputs, and their in-place forms."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
A = RNG.standard_normal((4, 5))
SRC = RNG.standard_normal((4, 3))
IDX = RNG.integers(0, 5, (4, 3))  # repeats: scatter_add adds them up
DISTINCT = np.stack([RNG.permutation(5)[:3] for _ in range(4)])  # scatter's writes never collide


def _both(fn):
    x, s = ampcore.tensor(A, requires_grad=True), ampcore.tensor(SRC, requires_grad=True)
    t, ts = torch.tensor(A, requires_grad=True), torch.tensor(SRC, requires_grad=True)
    y, ty = fn(ampcore, x, s), fn(torch, t, ts)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-15, atol=0)
    w = RNG.standard_normal(ty.shape)
    (y * ampcore.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for ours, theirs in ((x, t), (s, ts)):
        expected = theirs.grad.numpy() if theirs.grad is not None else None
        got = ours.grad.numpy() if ours.grad is not None else None
        if expected is None:
            assert got is None or not got.any()
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-15)


CASES = [
    ("gather", lambda m, x, s: m.gather(x, 1, m.tensor(IDX))),
    ("gather.smaller_index", lambda m, x, s: x.gather(0, m.tensor(IDX[:2, :2] % 4))),
    ("index_select", lambda m, x, s: x.index_select(1, m.tensor([4, 0, 4]))),
    ("scatter_add", lambda m, x, s: x.scatter_add(1, m.tensor(IDX), s)),
    ("scatter", lambda m, x, s: m.scatter(x, 1, m.tensor(DISTINCT), s)),
    ("scatter.value", lambda m, x, s: x.scatter(1, m.tensor(DISTINCT), 2.5) * s.sum()),
    ("index_copy", lambda m, x, s: x.index_copy(1, m.tensor([4, 1, 2]), s)),
    ("index_copy.rows", lambda m, x, s: m.index_copy(x, 0, m.tensor([3, 0]), x[:2] * 2)),
]


@pytest.mark.parametrize(("name", "fn"), CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_are_torchs(name, fn):
    _both(fn)


def test_in_place_forms_write_into_the_tensor():
    z = ampcore.zeros(3, 4)
    assert z.scatter_(1, ampcore.tensor([[1], [0], [3]]), 1.0) is z
    assert z.tolist() == [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1]]
    z.index_copy_(0, ampcore.tensor([2]), ampcore.full((1, 4), 5.0))
    assert z[2].tolist() == [5.0] * 4
    z.scatter_add_(1, ampcore.tensor([[0, 0]] * 3), ampcore.ones(3, 2))
    assert z[:, 0].tolist() == [2.0, 3.0, 7.0]


def test_bad_indices_are_named():
    x = ampcore.zeros(2, 3)
    with pytest.raises(TypeError, match="int64"):
        x.gather(1, ampcore.zeros(2, 3))
    with pytest.raises(ValueError, match="larger than input"):
        x.gather(1, ampcore.zeros(3, 3, dtype="int64"))
    with pytest.raises(ValueError, match="source must have shape"):
        x.index_copy(0, ampcore.tensor([1]), ampcore.zeros(2, 3))
