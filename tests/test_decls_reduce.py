"""ampcore/ops/decls/reduce.py and distance.py: all/any, prod, cumprod, norm, amin, logsumexp, trace, cdist and
dist against torch, gradients included (through zeros for the products, at a zero norm or distance), and the
dtypes torch gives."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ampcore

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)
A = RNG.standard_normal((4, 5))
A[1, 2] = 0.0  # a zero in a product: the gradient must not divide by it
A[3] = 0.0  # a zero row: its norm's gradient is 0, as torch's

CASES = [
    ("prod.dim", lambda m, x: x.prod(1)),
    ("prod.all", lambda m, x: m.prod(x)),
    ("prod.keepdim", lambda m, x: x.prod(0, keepdim=True)),
    ("cumprod", lambda m, x: x.cumprod(1)),
    ("cumprod.dim0", lambda m, x: m.cumprod(x, 0)),
    ("amin", lambda m, x: x.amin(1)),
    ("logsumexp", lambda m, x: x.logsumexp(1)),
    ("logsumexp.keepdim", lambda m, x: m.logsumexp(x, (0, 1), keepdim=True)),
    ("trace", lambda m, x: m.trace(x)),
    *[(f"norm.p{p}", lambda m, x, p=p: x.norm(p, dim=1)) for p in (2, 1, 3, 0.5, math.inf, -math.inf, 0, "fro")],
    ("norm.all", lambda m, x: m.norm(x)),
    ("cdist", lambda m, x: m.cdist(x, x[:3] * 0.5)),
    ("cdist.p1", lambda m, x: m.cdist(x.unsqueeze(0), x[1:].unsqueeze(0), p=1.0)),
    ("cdist.same_rows", lambda m, x: m.cdist(x, x)),  # zero distances on the diagonal
    ("dist", lambda m, x: m.dist(x, x * 0.5 + 1.0, 3)),
]


@pytest.mark.parametrize(("name", "fn"), CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_are_torchs(name, fn):
    x, t = ampcore.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    y, ty = fn(ampcore, x), fn(torch, t)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    w = RNG.standard_normal(ty.shape)
    (y * ampcore.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    expected = t.grad.numpy() if t.grad is not None else np.zeros_like(A)  # torch's 0-norm leaves no gradient
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_all_and_any_give_bools_over_any_dims():
    b = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    for args in ((), (1,), (0,), ((0, 1),)):
        for name in ("all", "any"):
            got = getattr(ampcore.tensor(b), name)(*args)
            assert got.dtype is ampcore.bool_ and got.tolist() == getattr(torch.tensor(b), name)(*args).tolist()
    assert ampcore.all(ampcore.tensor([True, True])).item() is True


def test_products_of_integers_are_int64_and_low_precision_is_reduced_in_float32():
    assert ampcore.tensor([1, 2, 3], dtype="int32").prod().dtype is ampcore.int64
    ones = ampcore.full((600,), 1.01, dtype="bfloat16")
    exact = float(np.prod(np.full(600, float(ampcore.tensor(1.01, dtype="bfloat16").item()))))
    assert ones.prod().dtype is ampcore.bfloat16
    assert abs(ones.prod().item() - exact) <= exact * 2**-8  # one rounding to bfloat16, not 600


def test_norm_refuses_what_it_cannot_do():
    with pytest.raises(NotImplementedError, match="nuc"):
        ampcore.norm(ampcore.ones(2, 2), "nuc")
    with pytest.raises(TypeError, match="floating"):
        ampcore.norm(ampcore.tensor([1, 2]))
