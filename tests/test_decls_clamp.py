"""ampcore/ops/decls/clamp.py and triangle.py: clamp, clip, clamp_min, clamp_max, tril and triu, each with its
in-place form, torch's values and gradients (the bounds themselves pass the gradient, as torch's)."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore

torch = pytest.importorskip("torch")

A = np.array([[-2.0, -1.0, -0.5, 0.0], [0.5, 1.0, 1.5, np.nan], [3.0, -3.0, 1.0, -1.0]])

CASES = [
    ("clamp", lambda m, x: x.clamp(-1, 1)),
    ("clamp.min", lambda m, x: m.clamp(x, min=0.0)),
    ("clamp.max_below_min", lambda m, x: m.clamp(x, 1.0, -1.0)),
    ("clamp.tensor_bounds", lambda m, x: x.clamp(m.full((4,), -0.7), m.full((3, 1), 0.9))),
    ("clip", lambda m, x: m.clip(x, -0.5, 2.0)),
    ("clamp_min", lambda m, x: x.clamp_min(0.5)),
    ("clamp_max", lambda m, x: m.clamp_max(x, -0.5)),
    ("tril", lambda m, x: x.tril(1)),
    ("triu", lambda m, x: m.triu(x, -1)),
]


@pytest.mark.parametrize(("name", "fn"), CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_are_torchs(name, fn):
    x, t = ampcore.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    y, ty = fn(ampcore, x), fn(torch, t)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize(
    ("name", "args"), [("clamp_", (-1, 1)), ("clip_", (0.0,)), ("clamp_min_", (0.5,)), ("clamp_max_", (0.0,))]
)
def test_in_place_clamps(name, args):
    y, ty = ampcore.tensor(A), torch.tensor(A)
    assert getattr(y, name)(*args) is y
    getattr(ty, name)(*args)
    np.testing.assert_array_equal(y.numpy(), ty.numpy())


def test_in_place_triangles_and_keywords():
    mask = ampcore.ones(3, 3)
    assert mask.triu_(1) is mask and mask.tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    y = ampcore.tensor(A)
    y.clamp_(min=-0.25, max=0.25)
    assert np.nanmax(y.numpy()) == 0.25
    with pytest.raises(ValueError, match="at least one of min and max"):
        ampcore.clamp(y)
