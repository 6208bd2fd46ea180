"""ampcore/ops/decls/einsum.py, and the products declared in nn/functional/linear.py and tensor_ops.py (mm, bmm,
mv, outer, dot, addbmm and the methods torch has for them): torch's values and gradients."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(11)

EQUATIONS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bkhd,bqhd->bqkh", [(2, 3, 4, 5), (2, 6, 4, 5)]),
    ("ba,ca", [(3, 4), (5, 4)]),
    ("...i->...", [(2, 3, 4)]),
    ("i j , j k -> i k", [(2, 3), (3, 2)]),
]


@pytest.mark.parametrize(("equation", "shapes"), EQUATIONS, ids=[e for e, _ in EQUATIONS])
def test_einsum_is_torchs(equation, shapes):
    arrays = [RNG.standard_normal(s) for s in shapes]
    ours = [ampcore.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, ty = ampcore.einsum(equation, *ours), torch.einsum(equation, *theirs)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = RNG.standard_normal(ty.shape)
    (y * ampcore.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_einsum_takes_a_list_and_names_bad_equations():
    a, b = ampcore.ones(2, 3), ampcore.ones(3, 4)
    assert ampcore.einsum("ij,jk", [a, b]).shape == (2, 4)
    with pytest.raises(ValueError, match="names 3 operands"):
        ampcore.einsum("ij,jk,kl", a, b)
    with pytest.raises(ValueError, match="names no input dimension"):
        ampcore.einsum("ij,jk->iz", a, b)
    with pytest.raises(ValueError, match="has sizes"):
        ampcore.einsum("ij,ij->", a, b)


def test_einsum_runs_in_the_lower_precision_under_autocast():
    with ampcore.autocast("cpu", dtype=ampcore.bfloat16):
        assert ampcore.einsum("ij,jk->ik", ampcore.ones(2, 3), ampcore.ones(3, 4)).dtype is ampcore.bfloat16


PRODUCTS = [
    ("mm", lambda m, a, b: m.mm(a, b.T)),
    ("Tensor.mm", lambda m, a, b: a.mm(b.T)),
    ("Tensor.bmm", lambda m, a, b: a.reshape(2, 2, 3).bmm(b.reshape(2, 3, 2))),
    ("Tensor.dot", lambda m, a, b: a.reshape(-1).dot(b.reshape(-1))),
    ("mv", lambda m, a, b: m.mv(a, b[0, :3])),
    ("outer", lambda m, a, b: a[0].outer(b[1])),
    ("addbmm", lambda m, a, b: m.addbmm(a[:2, :2], a.reshape(2, 2, 3), b.reshape(2, 3, 2), beta=0.5, alpha=2.0)),
    ("Tensor.addmm", lambda m, a, b: a[:, :2].addmm(a, b.T[:, :2])),
    ("Tensor.baddbmm", lambda m, a, b: a.reshape(2, 2, 3)[..., :2].baddbmm(a.reshape(2, 2, 3), b.reshape(2, 3, 2))),
]


@pytest.mark.parametrize(("name", "fn"), PRODUCTS, ids=[p[0] for p in PRODUCTS])
def test_products_and_their_methods_are_torchs(name, fn):
    a0, b0 = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    a, b = ampcore.tensor(a0, requires_grad=True), ampcore.tensor(b0, requires_grad=True)
    ta, tb = torch.tensor(a0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    y, ty = fn(ampcore, a, b), fn(torch, ta, tb)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-12, atol=1e-12)
