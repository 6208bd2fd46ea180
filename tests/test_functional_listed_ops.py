"""The ops torch's autocast lists name that ampcore added: prelu, softplus, softmin, normalize,
cosine_similarity, eight losses, addcmul/addcdiv, dot, tensordot and bilinear.

Each is compared with a float64 NumPy reference written here (explicit
formulas, logaddexp, einsum, np.tensordot) in float32, float16 and bfloat16
under the one tolerance rule of functional_reference; gradients are checked
by finite differences in float64; bad inputs must raise the right error
naming the bad value; the modules must equal their functional forms.
"""

import math
import warnings
from functools import partial

import functional_reference as ref
import numpy as np
import pytest
from functional_reference import FLOATS, assert_close, f64, randn

import ampcore
import ampcore.nn as nn
import ampcore.nn.functional as F
from ampcore import dtypes as dt
from ampcore.dispatch import registered_ops
from ampcore.nn.functional import _fused
from ampcore.testing import gradcheck

REDUCTIONS = ("none", "mean", "sum")
NEW_OPS = (
    "prelu",
    "softplus",
    "softmin",
    "normalize",
    "cosine_similarity",
    "kl_div",
    "huber_loss",
    "margin_ranking_loss",
    "soft_margin_loss",
    "hinge_embedding_loss",
    "poisson_nll_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
    "addcmul",
    "addcdiv",
    "dot",
    "tensordot",
    "bilinear",
)


def _t(a, dtype=dt.float32, requires_grad=False):
    """``a`` rounded to ``dtype`` (int arrays keep their integer dtype)."""
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return ampcore.tensor(a)
    return ampcore.tensor(a.astype(dtype.numpy), dtype=dtype, requires_grad=requires_grad)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _signs(*shape, seed=0):
    return _rng(seed).choice([-1.0, 1.0], shape)


def _reduce(v, reduction):
    if reduction == "mean":
        return v.mean()
    if reduction == "sum":
        return v.sum()
    if reduction == "batchmean":
        return v.sum() / v.shape[0]
    return v


def _p_norm(x, p, axis):
    """||x||_p along ``axis`` (keepdims), straight from the definition."""
    a = np.abs(x)
    if p == math.inf:
        return a.max(axis=axis, keepdims=True)
    if p == -math.inf:
        return a.min(axis=axis, keepdims=True)
    if p == 0:
        return (a != 0).sum(axis=axis, keepdims=True).astype(np.float64)
    return (a**p).sum(axis=axis, keepdims=True) ** (1.0 / p)


# --------------------------------------------------------------------------- float64 references
def prelu_ref(x, w):
    shape = [1] * x.ndim
    if x.ndim > 1:
        shape[1] = w.size
    return np.where(x > 0, x, w.reshape(shape) * x)


def softplus_ref(x, beta=1.0, threshold=20.0):
    return np.where(x * beta > threshold, x, np.logaddexp(0.0, x * beta) / beta)


def normalize_ref(x, p=2.0, dim=1, eps=1e-12):
    return x / np.maximum(_p_norm(x, p, dim), eps)


def cosine_similarity_ref(x1, x2, dim=1, eps=1e-8):
    x1, x2 = np.broadcast_arrays(x1, x2)
    n1 = np.maximum(np.sqrt((x1 * x1).sum(axis=dim, keepdims=True)), eps)
    n2 = np.maximum(np.sqrt((x2 * x2).sum(axis=dim, keepdims=True)), eps)
    return ((x1 / n1) * (x2 / n2)).sum(axis=dim)


def kl_div_ref(x, t, log_target=False):
    if log_target:
        return np.exp(t) * (t - x)
    return np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)), 0.0) - t * x


def huber_ref(x, y, delta=1.0):
    z = np.abs(x - y)
    return np.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))


def margin_ranking_ref(x1, x2, y, margin=0.0):
    return np.maximum(0.0, -y * (x1 - x2) + margin)


def soft_margin_ref(x, y):
    return np.logaddexp(0.0, -x * y)


def hinge_ref(x, y, margin=1.0):
    return np.where(y != 1, np.maximum(0.0, margin - x), 0.0) + np.where(y != -1, x, 0.0)


def poisson_ref(x, t, log_input=True, full=False, eps=1e-8):
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + eps)
    if full:
        safe = np.where(t > 1, t, 1.0)
        loss = loss + np.where(t > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * np.pi * safe), 0.0)
    return loss


def cosine_embedding_ref(x1, x2, y, margin=0.0):
    d = x1.ndim - 1
    cos = (x1 * x2).sum(d) / np.sqrt(((x1 * x1).sum(d) + 1e-12) * ((x2 * x2).sum(d) + 1e-12))
    return np.where(y == 1, 1 - cos, 0.0) + np.where(y == -1, np.maximum(0.0, cos - margin), 0.0)


def triplet_ref(a, pos, neg, margin=1.0, p=2.0, eps=1e-6, swap=False):
    dist = lambda u, v: _p_norm(u - v + eps, p, -1)[..., 0]  # noqa: E731
    d_neg = np.minimum(dist(a, neg), dist(pos, neg)) if swap else dist(a, neg)
    return np.maximum(0.0, margin + dist(a, pos) - d_neg)


def bilinear_ref(x1, x2, w, b=None):
    out = np.einsum("...i,oij,...j->...o", x1, w, x2)
    return out if b is None else out + b


# --------------------------------------------------------------------------- surface
def test_each_new_op_is_a_composite_under_its_torch_name_and_exported():
    ops = registered_ops()
    for name in NEW_OPS:
        assert name in F.__all__
        assert getattr(F, name).op_name == name
        assert ops[name] == "composite"


# --------------------------------------------------------------------------- activations
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize(
    "shape, n_weight",
    [((6, 4), 1), ((6, 4), 4), ((2, 3, 4, 5), 3), ((7,), 1), ((), 1)],
    ids=["NC-shared", "NC-channel", "NCHW-channel", "1d", "0d"],
)
def test_prelu_matches_reference(shape, n_weight, dtype):
    x = randn(*shape, dtype=dtype)
    w = _t(_rng(5).uniform(-0.5, 0.5, n_weight), dtype)
    out = F.prelu(x, w)
    assert out.dtype is dtype and out.shape == shape
    assert_close(out, prelu_ref(f64(x), f64(w)))


def test_prelu_accepts_a_0d_weight_and_passes_gradient_w_at_zero():
    x = ampcore.tensor([-2.0, 0.0, 3.0], dtype="float64", requires_grad=True)
    w = ampcore.tensor(0.25, dtype="float64", requires_grad=True)
    out = F.prelu(x, w)
    np.testing.assert_array_equal(out.numpy(), [-0.5, 0.0, 3.0])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.25, 0.25, 1.0])  # torch: x > 0 ? g : w g
    np.testing.assert_array_equal(w.grad.numpy(), -2.0)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("beta, threshold", [(1.0, 20.0), (2.0, 1.5), (0.5, 3.0), (-1.0, 20.0)])
def test_softplus_matches_reference(beta, threshold, dtype):
    x = randn(5, 8, dtype=dtype) * 4.0
    out = F.softplus(x, beta, threshold)
    assert out.dtype is dtype
    assert_close(out, softplus_ref(f64(x), beta, threshold))


def test_softplus_is_stable_where_log1p_exp_overflows_or_underflows():
    # torch's log1p(exp(beta x)) is inf for beta x = 100 once the threshold is raised; tiny values
    # (exp(-80) = 1.8e-35, still normal in float32) must keep their relative precision
    x = ampcore.tensor([100.0, -80.0, -30.0, 1e-4, 0.0])
    out = F.softplus(x, threshold=200.0)
    np.testing.assert_allclose(f64(out), np.logaddexp(0.0, f64(x)), rtol=ref.tolerance(dt.float32), atol=0)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "reference"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmin_is_softmax_of_the_negation(dim, dtype, fused, monkeypatch):
    if not fused:
        monkeypatch.setattr(_fused, "has_fused", lambda x, name: False)
    x = randn(4, 6, 5, dtype=dtype) * 3.0
    out = F.softmin(x, dim)
    assert out.dtype is dtype
    assert_close(out, ref.softmax(-f64(x), dim), x.shape[dim])


def test_softmin_dtype_argument_casts_first():
    x = randn(2, 3, dtype=dt.bfloat16)
    out = F.softmin(x, -1, dtype=dt.float64)
    assert out.dtype is dt.float64
    np.testing.assert_allclose(out.numpy(), ref.softmax(-f64(x), -1), rtol=1e-13)


def test_activation_gradients():
    x = randn(3, 4, 2, dtype=dt.float64, requires_grad=True)
    w = ampcore.tensor([0.1, -0.3, 0.7, 0.2], dtype="float64", requires_grad=True)
    assert gradcheck(F.prelu, [x, w])
    assert gradcheck(lambda a: F.softplus(a * 3.0, beta=2.0, threshold=4.0), [x])
    assert gradcheck(lambda a: F.softplus(a), [x])
    assert gradcheck(lambda a: F.softmin(a, 1), [x])


def test_softmin_reference_route_backward(monkeypatch):
    monkeypatch.setattr(_fused, "has_fused", lambda x, name: False)
    x = randn(3, 4, dtype=dt.float64, requires_grad=True)
    assert gradcheck(lambda a: F.softmin(a, 0), [x])


def test_softplus_gradient_is_the_sigmoid_of_beta_x():
    x = ampcore.tensor([-50.0, -1.0, 0.0, 2.0, 30.0], dtype="float64", requires_grad=True)
    F.softplus(x, beta=2.0).sum().backward()
    np.testing.assert_allclose(
        x.grad.numpy(),
        [1 / (1 + math.exp(100.0)), 1 / (1 + math.exp(2.0)), 0.5, 1 / (1 + math.exp(-4.0)), 1.0],
        rtol=1e-14,
    )


def test_activation_errors_name_the_bad_value():
    x = ampcore.ones(2, 3)
    with pytest.raises(TypeError, match=r"prelu\(\): weight dtype float64 differs from input dtype float32"):
        F.prelu(x, ampcore.ones(1, dtype="float64"))
    with pytest.raises(ValueError, match=r"weight has 2 elements but input of shape \(2, 3\) has 3 channel"):
        F.prelu(x, ampcore.ones(2))
    with pytest.raises(ValueError, match=r"weight has 3 elements but input of shape \(3,\) has 1 channel"):
        F.prelu(ampcore.ones(3), ampcore.ones(3))
    with pytest.raises(ValueError, match=r"weight must be a scalar or 1-D tensor, got shape \(1, 3\)"):
        F.prelu(x, ampcore.ones(1, 3))
    with pytest.raises(TypeError, match="prelu\\(\\) needs a floating input, got dtype int64"):
        F.prelu(ampcore.tensor([1, -2]), ampcore.tensor([1]))
    with pytest.raises(TypeError, match="softplus\\(\\) needs a floating input, got dtype int64"):
        F.softplus(ampcore.tensor([1, -2]))
    with pytest.raises(TypeError, match="softmin\\(\\) needs a floating input, got dtype int64"):
        F.softmin(ampcore.tensor([1, 2]), 0)
    with pytest.raises(IndexError, match="dimension 2 is out of range"):
        F.softmin(x, 2)


# --------------------------------------------------------------------------- normalize / cosine_similarity
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("p", [2.0, 1, 3, 0.5, math.inf, -math.inf, 0, -1.5], ids=str)
@pytest.mark.parametrize("dim", [1, -1, (1, 2)], ids=str)
def test_normalize_matches_reference(dim, p, dtype):
    x = randn(4, 3, 5, dtype=dtype)
    out = F.normalize(x, p, dim)
    assert out.dtype is dtype
    n = int(np.prod([x.shape[d] for d in np.atleast_1d(dim)]))
    assert_close(out, normalize_ref(f64(x), p, dim if isinstance(dim, int) else tuple(dim)), n)


def test_normalize_keeps_zero_vectors_zero_with_torchs_finite_gradient():
    x = ampcore.tensor([[0.0, 0.0, 0.0], [3.0, 0.0, 4.0]], dtype="float64", requires_grad=True)
    out = F.normalize(x)  # dim=1
    np.testing.assert_array_equal(out.numpy(), [[0.0, 0.0, 0.0], [0.6, 0.0, 0.8]])
    out.sum().backward()
    # torch: the clamped norm is eps there and the norm's own gradient is 0 at a zero vector
    np.testing.assert_array_equal(x.grad.numpy()[0], [1e12, 1e12, 1e12])
    np.testing.assert_allclose(x.grad.numpy()[1], [0.032, 0.2, -0.024], rtol=1e-14)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cosine_similarity_matches_reference(dim, dtype):
    x1, x2 = randn(4, 3, 5, dtype=dtype), randn(4, 3, 5, seed=1, dtype=dtype)
    out = F.cosine_similarity(x1, x2, dim)
    assert out.dtype is dtype
    assert_close(out, cosine_similarity_ref(f64(x1), f64(x2), dim), x1.shape[dim])


def test_cosine_similarity_broadcasts_and_promotes_integers():
    x1, x2 = randn(2, 3, 1), randn(1, 3, 4, seed=1)
    assert_close(F.cosine_similarity(x1, x2), cosine_similarity_ref(f64(x1), f64(x2)), 3)
    ints = ampcore.tensor([[1, 2, 2]])
    assert_close(F.cosine_similarity(ints, ampcore.tensor([[2.0, 4.0, 4.0]])), np.array([1.0]), 3)


def test_cosine_similarity_does_not_overflow():
    # |x1|**2 |x2|**2 = 9e40 overflows float32 (the old x1.x2 / sqrt(|x1|**2 |x2|**2) gave 0); normalising
    # each vector first never forms it.  float16 squares (9e4 > 65504) are computed in float32.
    x = ampcore.tensor([[1e10, 1e10, 1e10]])
    np.testing.assert_allclose(F.cosine_similarity(x, x).numpy(), [1.0], rtol=ref.tolerance(dt.float32, 3))
    h = ampcore.full((1, 3), 300.0, dtype="float16")
    np.testing.assert_allclose(f64(F.cosine_similarity(h, h)), [1.0], rtol=ref.tolerance(dt.float16, 3))
    a = randn(50, 8) * 1e3  # |cos| <= 1 up to rounding (torch too lands one ulp above 1 here)
    assert_close(F.cosine_similarity(a, a * 2.0), np.ones(50), 8)


def test_cosine_similarity_gradient_follows_torchs_unclamped_norm():
    # torch clamps the norms in place without grad, so tiny vectors get u/eps - (x.u)/eps**2 * x/|x|
    x1 = ampcore.tensor([[1e-10, 1e-10, 1e-10], [0.0, 0.0, 0.0]], dtype="float64", requires_grad=True)
    x2 = ampcore.tensor([[1.0, 2.0, 3.0]], dtype="float64")
    out = F.cosine_similarity(x1, x2)
    np.testing.assert_array_equal(out.numpy()[1], 0.0)
    out.sum().backward()
    u = np.array([1.0, 2.0, 3.0]) / math.sqrt(14.0)
    v = np.full(3, 1e-10)
    tiny = u / 1e-8 - (v @ u) / 1e-16 * v / np.linalg.norm(v)
    np.testing.assert_allclose(x1.grad.numpy(), [tiny, u / 1e-8], rtol=1e-12)


def test_similarity_gradients():
    x = randn(3, 4, 2, dtype=dt.float64, requires_grad=True)
    y = randn(3, 4, 2, seed=1, dtype=dt.float64, requires_grad=True)
    for p in (2.0, 1, 3, math.inf):
        assert gradcheck(partial(F.normalize, p=p, dim=1), [x])
    assert gradcheck(lambda a: F.normalize(a, dim=(1, 2)), [x])
    assert gradcheck(lambda a, b: F.cosine_similarity(a, b, dim=-1), [x, y])
    z = randn(1, 4, 1, seed=2, dtype=dt.float64, requires_grad=True)
    assert gradcheck(F.cosine_similarity, [x, z])


def test_similarity_errors_name_the_bad_value():
    with pytest.raises(IndexError, match="dimension 1 is out of range for a tensor with 1 dimension"):
        F.normalize(ampcore.ones(3))
    with pytest.raises(TypeError, match=r"normalize\(\) needs a floating input, got dtype int64"):
        F.normalize(ampcore.tensor([[1, 2]]))
    with pytest.raises(TypeError, match=r"normalize\(\): p must be a real number .* got 'fro'"):
        F.normalize(ampcore.ones(2, 3), p="fro")
    with pytest.raises(TypeError, match=r"needs a floating common dtype, got int64 and int64"):
        F.cosine_similarity(ampcore.tensor([[1, 2]]), ampcore.tensor([[1, 2]]))
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(2, 4\) cannot be broadcast"):
        F.cosine_similarity(ampcore.ones(2, 3), ampcore.ones(2, 4))
    with pytest.raises(IndexError, match="dimension 1 is out of range"):
        F.cosine_similarity(ampcore.ones(3), ampcore.ones(3))


# --------------------------------------------------------------------------- losses
def _loss_cases(dtype, seed=0):
    """name -> (ampcore call taking reduction, float64 per-element reference, reduction length of one element)."""
    rng = _rng(seed)
    x, y = randn(4, 3, 5, seed=seed, dtype=dtype), randn(4, 3, 5, seed=seed + 1, dtype=dtype)
    logp = _t(ref.log_softmax(rng.standard_normal((4, 3, 5)), 1), dtype)
    probs = ref.softmax(rng.standard_normal((4, 3, 5)) * 2, 1)
    probs[0, :, 0] = [0.0, 0.3, 0.7]  # 0 * log 0 counts as 0
    probs = _t(probs, dtype)
    logq = _t(ref.log_softmax(rng.standard_normal((4, 3, 5)), 1), dtype)
    x1, x2 = randn(4, 5, seed=seed + 2, dtype=dtype), randn(1, 5, seed=seed + 3, dtype=dtype)
    rank_target = _t(_signs(4, 1, seed=seed), dtype)
    signs = _t(_signs(4, 3, 5, seed=seed + 4), dtype)
    hinge_target = _t(rng.choice([-1.0, 1.0, 0.0, 2.0], (4, 3, 5)), dtype)
    counts = ampcore.tensor(rng.poisson(2.0, (4, 3, 5)))  # int64 count targets
    rates = _t(np.abs(rng.standard_normal((4, 3, 5))) + 0.1, dtype)
    e1, e2, e3 = (randn(6, 10, seed=seed + k, dtype=dtype) for k in (5, 6, 7))
    pair = _t(_signs(6, seed=seed + 1), dtype)
    a = {
        k: f64(v)
        for k, v in dict(
            x=x,
            y=y,
            logp=logp,
            probs=probs,
            logq=logq,
            x1=x1,
            x2=x2,
            rank=rank_target,
            signs=signs,
            hinge=hinge_target,
            rates=rates,
            e1=e1,
            e2=e2,
            e3=e3,
            pair=pair,
        ).items()
    }
    a["counts"] = counts.numpy().astype(np.float64)
    return {
        "kl_div": (lambda r: F.kl_div(logp, probs, reduction=r), kl_div_ref(a["logp"], a["probs"]), 1),
        "kl_div-log_target": (
            lambda r: F.kl_div(logp, logq, reduction=r, log_target=True),
            kl_div_ref(a["logp"], a["logq"], True),
            1,
        ),
        "huber_loss": (lambda r: F.huber_loss(x, y, r, 0.7), huber_ref(a["x"], a["y"], 0.7), 1),
        "margin_ranking_loss": (
            lambda r: F.margin_ranking_loss(x1, x2, rank_target, 0.3, reduction=r),
            margin_ranking_ref(a["x1"], a["x2"], a["rank"], 0.3),
            1,
        ),
        "soft_margin_loss": (
            lambda r: F.soft_margin_loss(x * 3.0, signs, reduction=r),
            soft_margin_ref(f64(x * 3.0), a["signs"]),
            1,
        ),
        "hinge_embedding_loss": (
            lambda r: F.hinge_embedding_loss(x, hinge_target, 0.5, reduction=r),
            hinge_ref(a["x"], a["hinge"], 0.5),
            1,
        ),
        "poisson_nll_loss": (lambda r: F.poisson_nll_loss(x, counts, reduction=r), poisson_ref(a["x"], a["counts"]), 1),
        "poisson_nll_loss-rates-full": (
            lambda r: F.poisson_nll_loss(rates, counts, log_input=False, full=True, reduction=r),
            poisson_ref(a["rates"], a["counts"], False, True),
            1,
        ),
        "cosine_embedding_loss": (
            lambda r: F.cosine_embedding_loss(e1, e2, pair, 0.2, reduction=r),
            cosine_embedding_ref(a["e1"], a["e2"], a["pair"], 0.2),
            10,
        ),
        "triplet_margin_loss": (
            lambda r: F.triplet_margin_loss(e1, e2, e3, reduction=r),
            triplet_ref(a["e1"], a["e2"], a["e3"]),
            10,
        ),
        "triplet_margin_loss-p1-swap": (
            lambda r: F.triplet_margin_loss(e1, e2, e3, 0.5, p=1, swap=True, reduction=r),
            triplet_ref(a["e1"], a["e2"], a["e3"], 0.5, 1, swap=True),
            10,
        ),
    }


LOSS_CASES = tuple(_loss_cases(dt.float32))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", LOSS_CASES)
def test_loss_matches_reference(case, reduction, dtype):
    call, per_element, inner = _loss_cases(dtype)[case]
    out = call(reduction)
    assert out.dtype is dtype
    n = inner if reduction == "none" else inner * per_element.size
    assert_close(out, _reduce(per_element, reduction), n)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_kl_div_batchmean_divides_by_the_batch_size(dtype):
    for case in ("kl_div", "kl_div-log_target"):
        call, per_element, _ = _loss_cases(dtype)[case]
        assert_close(call("batchmean"), per_element.sum() / 4, per_element.size)
    scalar = F.kl_div(ampcore.tensor(-1.0), ampcore.tensor(0.5), reduction="batchmean")  # 0-d: just the sum
    np.testing.assert_allclose(scalar.item(), 0.5 * (math.log(0.5) + 1.0), rtol=1e-6)


def test_kl_div_zero_targets_give_finite_gradients():
    x = ampcore.tensor([-1.0, -2.0], dtype="float64", requires_grad=True)
    t = ampcore.tensor([0.0, 0.5], dtype="float64", requires_grad=True)
    F.kl_div(x, t, reduction="sum").backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, -0.5])
    # d/dt = log t + 1 - x; torch gives NaN at t = 0 (0/0 in xlogy's backward), here the masked
    # t log t term contributes 0 and -t x its -x
    np.testing.assert_allclose(t.grad.numpy(), [1.0, math.log(0.5) + 1.0 + 2.0], rtol=1e-15)


def test_losses_stay_finite_where_the_naive_formula_overflows():
    x = ampcore.tensor([-100.0, 80.0, 0.0])
    y = ampcore.tensor([1.0, 1.0, -1.0])
    out = F.soft_margin_loss(x, y, reduction="none")  # torch: log1p(exp(100)) = inf; exp(-80) is still normal
    np.testing.assert_allclose(f64(out), np.logaddexp(0.0, -f64(x) * f64(y)), rtol=ref.tolerance(dt.float32))


def test_poisson_full_masks_small_counts_with_finite_target_gradient():
    x = ampcore.tensor([0.5, 0.2, 0.3], dtype="float64")
    t = ampcore.tensor([0.0, 1.0, 3.0], dtype="float64", requires_grad=True)
    out = F.poisson_nll_loss(x, t, full=True, reduction="none")
    np.testing.assert_allclose(out.numpy(), poisson_ref(f64(x), f64(t).copy(), full=True), rtol=1e-15)
    out.sum().backward()
    stirling = math.log(3.0) + 0.5 / 3.0
    np.testing.assert_allclose(t.grad.numpy(), [-0.5, -0.2, -0.3 + stirling], rtol=1e-14)


def test_cosine_embedding_loss_on_a_single_pair():
    a, b = randn(7), randn(7, seed=1)
    out = F.cosine_embedding_loss(a, b, ampcore.tensor(-1.0), margin=-0.5)
    assert out.shape == ()
    assert_close(out, cosine_embedding_ref(f64(a), f64(b), np.array(-1.0), -0.5), 7)


def test_huber_loss_weight_and_shape_warning():
    x, y, w = randn(3, 4), randn(3, 4, seed=1), randn(3, 4, seed=2, positive=True)
    assert_close(F.huber_loss(x, y, weight=w), (huber_ref(f64(x), f64(y)) * f64(w)).mean(), 12)
    with pytest.warns(UserWarning, match=r"huber_loss\(\): target shape \(4,\) differs from input shape \(3, 4\)"):
        F.huber_loss(x, randn(4))


def test_loss_gradients():
    x = randn(3, 4, dtype=dt.float64, requires_grad=True)
    y = randn(3, 4, seed=1, dtype=dt.float64, requires_grad=True)
    signs = ampcore.tensor(_signs(3, 4, seed=2))
    probs = ampcore.tensor(ref.softmax(_rng(3).standard_normal((3, 4)), 1), requires_grad=True)
    assert gradcheck(lambda a, t: F.kl_div(a, t, reduction="batchmean"), [x, probs])
    assert gradcheck(lambda a, t: F.kl_div(a, t, log_target=True), [x, y])
    assert gradcheck(lambda a, b: F.huber_loss(a, b, delta=0.6), [x, y])
    assert gradcheck(lambda a, b: F.margin_ranking_loss(a, b, signs, 0.2, reduction="sum"), [x, y])
    assert gradcheck(lambda a, t: F.soft_margin_loss(a * 2.0, t), [x, y])
    assert gradcheck(lambda a: F.hinge_embedding_loss(a, signs, 0.4, reduction="none"), [x])
    counts = ampcore.tensor(_rng(4).poisson(2.0, (3, 4)).astype(np.float64), requires_grad=True)
    assert gradcheck(lambda a, t: F.poisson_nll_loss(a, t, full=True), [x, counts])
    rates = ampcore.tensor(np.abs(f64(x)) + 0.2, requires_grad=True)
    assert gradcheck(lambda a: F.poisson_nll_loss(a, counts, log_input=False, reduction="sum"), [rates])
    z = randn(3, 4, seed=5, dtype=dt.float64, requires_grad=True)
    pair = ampcore.tensor([1.0, -1.0, -1.0])
    assert gradcheck(lambda a, b: F.cosine_embedding_loss(a, b, pair, margin=-0.9, reduction="none"), [x, y])
    for p, swap in ((2, False), (1, True), (3, True)):
        assert gradcheck(partial(F.triplet_margin_loss, margin=2.0, p=p, swap=swap), [x, y, z])


def test_loss_errors_name_the_bad_value():
    x, t = ampcore.ones(4, 3), ampcore.ones(4, 3)
    with pytest.raises(
        ValueError,
        match=r"unknown reduction 'avg'; valid reductions are 'none', 'batchmean', "
        r"'sum', 'mean'",
    ):
        F.kl_div(x, t, reduction="avg")
    with pytest.raises(ValueError, match="size_average and reduce are deprecated"):
        F.kl_div(x, t, size_average=True)
    with pytest.raises(TypeError, match=r"kl_div\(\) needs a floating target, got dtype int64"):
        F.kl_div(x, ampcore.ones(4, 3, dtype="int64"))
    with pytest.raises(ValueError, match=r"unknown reduction 'batchmean'"):
        F.huber_loss(x, t, reduction="batchmean")
    with pytest.raises(ValueError, match=r"huber_loss\(\): delta must be > 0, got 0"):
        F.huber_loss(x, t, delta=0)
    with pytest.raises(ValueError, match=r"weight of shape \(3,\) must have the input's shape \(4, 3\)"):
        F.huber_loss(x, t, weight=ampcore.ones(3))
    with pytest.raises(ValueError, match=r"same number of dimensions, got shapes \(3,\), \(3,\) and \(1, 3\)"):
        F.margin_ranking_loss(ampcore.ones(3), ampcore.ones(3), ampcore.ones(1, 3))
    with pytest.raises(ValueError, match="size_average and reduce are deprecated"):
        F.soft_margin_loss(x, t, reduce=False)
    with pytest.raises(TypeError, match=r"hinge_embedding_loss\(\) needs a floating input, got dtype int64"):
        F.hinge_embedding_loss(ampcore.tensor([1]), ampcore.tensor([1]))
    with pytest.raises(ValueError, match=r"unknown reduction 'batchmean'"):
        F.poisson_nll_loss(x, t, reduction="batchmean")
    with pytest.raises(ValueError, match=r"target must be 0-D or 1-D .* got shape \(4, 3\)"):
        F.cosine_embedding_loss(x, x, t)
    with pytest.raises(ValueError, match=r"a 1-D target needs 2-D inputs, got shapes \(3,\) and \(3,\)"):
        F.cosine_embedding_loss(ampcore.ones(3), ampcore.ones(3), ampcore.ones(1))
    with pytest.raises(ValueError, match=r"triplet_margin_loss\(\): margin must be > 0, got 0"):
        F.triplet_margin_loss(x, x, x, margin=0)
    with pytest.raises(ValueError, match=r"same number of dimensions, got shapes \(4, 3\), \(3,\) and \(4, 3\)"):
        F.triplet_margin_loss(x, ampcore.ones(3), x)
    with pytest.raises(TypeError, match=r"p must be a real number .* got None"):
        F.triplet_margin_loss(x, x, x, p=None)


# --------------------------------------------------------------------------- tensor ops
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_addcmul_and_addcdiv_broadcast_and_match_reference(dtype):
    a, b, c = randn(4, 3, 5, dtype=dtype), randn(4, 1, 5, seed=1, dtype=dtype), randn(3, 1, seed=2, dtype=dtype)
    out = F.addcmul(a, b, c, value=0.5)
    assert out.dtype is dtype and out.shape == (4, 3, 5)
    assert_close(out, f64(a) + 0.5 * f64(b) * f64(c))
    d = randn(3, 1, seed=3, dtype=dtype, positive=True)
    assert_close(F.addcdiv(a, b, d, value=-2), f64(a) - 2 * f64(b) / f64(d))
    assert_close(F.addcdiv(a, b, d), f64(a) + f64(b) / f64(d))


def test_addcmul_and_addcdiv_promote_like_torch():
    i = ampcore.tensor([1, 2, 3])
    out = F.addcmul(i, i, i, value=2)
    assert out.dtype is dt.int64 and out.tolist() == [3, 10, 21]
    h = randn(3, dtype=dt.float16)
    assert F.addcmul(i, h, ampcore.ones(3, dtype="bfloat16")).dtype is dt.float32
    out = F.addcdiv(ampcore.tensor([1]), ampcore.tensor([2.0]), ampcore.tensor([3]))  # true division
    np.testing.assert_allclose(out.numpy(), [1 + 2 / 3], rtol=1e-7)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_dot_matches_reference(dtype):
    a, b = randn(50, dtype=dtype), randn(50, seed=1, dtype=dtype)
    out = F.dot(a, b)
    assert out.dtype is dtype and out.shape == ()
    assert_close(out, np.dot(f64(a), f64(b)), 50)


def test_integer_dot_and_tensordot_are_exact():
    a = ampcore.tensor(np.array([1, 2, 3], np.int32))
    out = F.dot(a, a)
    assert out.dtype is dt.int32 and out.item() == 14
    m = np.arange(12).reshape(3, 4)
    out = F.tensordot(ampcore.tensor(m), ampcore.tensor(m.T.copy()), dims=1)
    assert out.dtype is dt.int64
    np.testing.assert_array_equal(out.numpy(), m @ m.T)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize(
    "dims, b_shape",
    [
        (0, (2, 3)),
        (1, (5, 2)),
        (2, (3, 5, 2)),
        (([1, 0], [0, 1]), (3, 4, 2)),
        (([2, 0], [0, 2]), (5, 2, 4)),
        (([], []), (2,)),
    ],
    ids=str,
)
def test_tensordot_matches_numpy(dims, b_shape, dtype):
    a, b = randn(4, 3, 5, dtype=dtype), randn(*b_shape, seed=1, dtype=dtype)
    out = F.tensordot(a, b, dims)
    expected = np.tensordot(f64(a), f64(b), dims)
    assert out.dtype is dtype
    n = int(np.prod([a.shape[d] for d in (range(3 - dims, 3) if isinstance(dims, int) else dims[0])]))
    assert_close(out, expected, n)


def test_tensordot_sums_a_contracted_dimension_of_size_one_first():
    a, b = randn(2, 3), randn(1, 4, seed=1)
    expected = f64(a).sum(1, keepdims=True) @ f64(b)
    assert_close(F.tensordot(a, b, dims=([1], [0])), expected, 3)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("batch", [(6,), (2, 3), ()], ids=str)
def test_bilinear_matches_einsum(batch, dtype):
    x1, x2 = randn(*batch, 5, dtype=dtype), randn(*batch, 4, seed=1, dtype=dtype)
    w, b = randn(3, 5, 4, seed=2, dtype=dtype), randn(3, seed=3, dtype=dtype)
    out = F.bilinear(x1, x2, w, b)
    assert out.dtype is dtype and out.shape == batch + (3,)
    assert_close(out, bilinear_ref(f64(x1), f64(x2), f64(w), f64(b)), 20)
    assert_close(F.bilinear(x1, x2, w), bilinear_ref(f64(x1), f64(x2), f64(w)), 20)


def test_tensor_op_gradients():
    a = randn(3, 4, dtype=dt.float64, requires_grad=True)
    b = randn(1, 4, seed=1, dtype=dt.float64, requires_grad=True)
    c = randn(3, 1, seed=2, dtype=dt.float64, requires_grad=True, positive=True)
    assert gradcheck(lambda x, y, z: F.addcmul(x, y, z, value=-0.5), [a, b, c])
    assert gradcheck(lambda x, y, z: F.addcdiv(x, y, z, value=3), [a, b, c])
    u, v = randn(6, dtype=dt.float64, requires_grad=True), randn(6, seed=1, dtype=dt.float64, requires_grad=True)
    assert gradcheck(F.dot, [u, v])
    t = randn(2, 3, 4, dtype=dt.float64, requires_grad=True)
    s = randn(4, 3, 5, seed=1, dtype=dt.float64, requires_grad=True)
    assert gradcheck(lambda x, y: F.tensordot(x, y, ([1, 2], [1, 0])), [t, s])
    assert gradcheck(lambda x, y: F.tensordot(x, y, 1), [t, s])
    x1, x2 = (
        randn(2, 3, dtype=dt.float64, requires_grad=True),
        randn(2, 4, seed=1, dtype=dt.float64, requires_grad=True),
    )
    w = randn(5, 3, 4, seed=2, dtype=dt.float64, requires_grad=True)
    bias = randn(5, seed=3, dtype=dt.float64, requires_grad=True)
    assert gradcheck(F.bilinear, [x1, x2, w, bias])


def test_tensor_op_errors_name_the_bad_value():
    i = ampcore.tensor([1, 2])
    with pytest.raises(TypeError, match=r"addcmul\(\): value must be an int for int64 tensors, got 0.5"):
        F.addcmul(i, i, i, value=0.5)
    with pytest.raises(TypeError, match=r"addcdiv\(\): integer division of tensor1 \(int64\) by tensor2 \(int64\)"):
        F.addcdiv(ampcore.ones(2), i, i)
    with pytest.raises(TypeError, match=r"addcmul\(\) argument 'tensor2' must be a Tensor, got float"):
        F.addcmul(ampcore.ones(2), ampcore.ones(2), 2.0)
    with pytest.raises(ValueError, match=r"dot\(\) needs 1-D tensors, got shapes \(2, 2\) and \(2, 2\)"):
        F.dot(ampcore.ones(2, 2), ampcore.ones(2, 2))
    with pytest.raises(ValueError, match=r"dot\(\): the vectors have 3 and 4 elements"):
        F.dot(ampcore.ones(3), ampcore.ones(4))
    with pytest.raises(TypeError, match=r"dot\(\) needs both tensors in one dtype, got float32 and float64"):
        F.dot(ampcore.ones(3), ampcore.ones(3, dtype="float64"))
    a, b = ampcore.ones(2, 3), ampcore.ones(3, 2)
    with pytest.raises(ValueError, match=r"dims must be >= 0, got dims=-1"):
        F.tensordot(a, b, -1)
    with pytest.raises(ValueError, match=r"dims=3 is more than the dimensions"):
        F.tensordot(a, b, 3)
    with pytest.raises(TypeError, match=r"dims must be an int or a pair of sequences of ints .* got \(1, 0\)"):
        F.tensordot(a, b, (1, 0))
    with pytest.raises(ValueError, match=r"dims_a and dims_b must have the same length"):
        F.tensordot(a, b, ([1], [0, 1]))
    with pytest.raises(ValueError, match=r"a has size 3 in dim 1 and b has size 2 in dim 1"):
        F.tensordot(a, b, ([1], [1]))
    with pytest.raises(ValueError, match=r"dimension 0 of a appears more than once"):
        F.tensordot(a, b, ([0, 0], [0, 1]))
    with pytest.raises(IndexError, match=r"dimension 2 is out of range for a of shape \(2, 3\)"):
        F.tensordot(a, b, ([2], [0]))
    x1, x2, w = ampcore.ones(2, 3), ampcore.ones(2, 4), ampcore.ones(5, 3, 4)
    with pytest.raises(
        TypeError,
        match=r"bilinear\(\) needs all tensors in one dtype, got input1: float32, "
        r"input2: float64, weight: float32",
    ):
        F.bilinear(x1, ampcore.ones(2, 4, dtype="float64"), w)
    with pytest.raises(ValueError, match=r"weight must be 3-D .* got shape \(3, 4\)"):
        F.bilinear(x1, x2, ampcore.ones(3, 4))
    with pytest.raises(ValueError, match=r"input batch dimensions do not match: shapes \(2, 3\) and \(1, 4\)"):
        F.bilinear(x1, ampcore.ones(1, 4), w)
    with pytest.raises(ValueError, match=r"input2 of shape \(2, 5\) does not fit weight of shape \(5, 3, 4\)"):
        F.bilinear(x1, ampcore.ones(2, 5), w)
    with pytest.raises(ValueError, match=r"bias of shape \(1, 5\) does not fit weight of shape \(5, 3, 4\)"):
        F.bilinear(x1, x2, w, ampcore.ones(1, 5))


# --------------------------------------------------------------------------- modules
def test_activation_and_similarity_modules_equal_their_functional_forms():
    x, y = randn(4, 3, 5), randn(4, 3, 5, seed=1)
    np.testing.assert_array_equal(nn.Softplus(2.0, 3.0)(x).numpy(), F.softplus(x, 2.0, 3.0).numpy())
    np.testing.assert_array_equal(nn.Softmin(dim=1)(x).numpy(), F.softmin(x, 1).numpy())
    np.testing.assert_array_equal(
        nn.CosineSimilarity(dim=2, eps=1e-6)(x, y).numpy(), F.cosine_similarity(x, y, 2, 1e-6).numpy()
    )
    prelu = nn.PReLU(3, init=0.1)
    np.testing.assert_array_equal(prelu(x).numpy(), F.prelu(x, ampcore.full((3,), 0.1)).numpy())
    assert repr(prelu) == "PReLU(num_parameters=3)"
    assert "beta=2.0, threshold=3.0" in repr(nn.Softplus(2.0, 3.0))
    with pytest.raises(TypeError, match=r"Softmin needs the dimension"):
        nn.Softmin()


def test_prelu_and_bilinear_parameters_get_gradients():
    prelu = nn.PReLU(4)
    x = randn(2, 4, 3)
    prelu(x).sum().backward()
    negative = np.minimum(f64(x), 0.0).sum(axis=(0, 2))
    np.testing.assert_allclose(prelu.weight.grad.numpy(), negative, rtol=1e-6)

    ampcore.manual_seed(0)
    layer = nn.Bilinear(5, 4, 3)
    bound = 1 / math.sqrt(5)
    assert layer.weight.shape == (3, 5, 4) and layer.bias.shape == (3,)
    assert np.abs(layer.weight.numpy()).max() <= bound and np.abs(layer.bias.numpy()).max() <= bound
    x1, x2 = randn(6, 5), randn(6, 4, seed=1)
    out = layer(x1, x2)
    np.testing.assert_array_equal(out.numpy(), F.bilinear(x1, x2, layer.weight, layer.bias).numpy())
    out.sum().backward()
    np.testing.assert_allclose(
        layer.weight.grad.numpy(), np.einsum("ni,nj->ij", f64(x1), f64(x2))[None].repeat(3, 0), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(layer.bias.grad.numpy(), np.full(3, 6.0))
    assert nn.Bilinear(2, 3, 4, bias=False).bias is None
    assert repr(layer) == "Bilinear(in1_features=5, in2_features=4, out_features=3, bias=True)"


def test_loss_modules_equal_their_functional_forms():
    x, y, z = randn(6, 10), randn(6, 10, seed=1), randn(6, 10, seed=2)
    signs, pair = ampcore.tensor(_signs(6, 10).astype(np.float32)), ampcore.tensor(_signs(6, seed=1).astype(np.float32))
    logp = F.log_softmax(x, 1)
    probs = F.softmax(y, 1)
    counts = ampcore.tensor(_rng(3).poisson(2.0, (6, 10)))
    cases = [
        (nn.KLDivLoss(reduction="batchmean"), (logp, probs), F.kl_div(logp, probs, reduction="batchmean")),
        (
            nn.KLDivLoss(log_target=True),
            (logp, F.log_softmax(y, 1)),
            F.kl_div(logp, F.log_softmax(y, 1), log_target=True),
        ),
        (nn.HuberLoss(reduction="sum", delta=0.5), (x, y), F.huber_loss(x, y, "sum", 0.5)),
        (nn.MarginRankingLoss(margin=0.2), (x, y, signs), F.margin_ranking_loss(x, y, signs, 0.2)),
        (nn.SoftMarginLoss(reduction="none"), (x, signs), F.soft_margin_loss(x, signs, reduction="none")),
        (nn.HingeEmbeddingLoss(margin=2.0), (x, signs), F.hinge_embedding_loss(x, signs, 2.0)),
        (nn.PoissonNLLLoss(log_input=True, full=True), (x, counts), F.poisson_nll_loss(x, counts, full=True)),
        (nn.CosineEmbeddingLoss(margin=0.1), (x, y, pair), F.cosine_embedding_loss(x, y, pair, 0.1)),
        (
            nn.TripletMarginLoss(margin=0.5, p=1, swap=True),
            (x, y, z),
            F.triplet_margin_loss(x, y, z, 0.5, 1, swap=True),
        ),
    ]
    for module, args, expected in cases:
        np.testing.assert_array_equal(module(*args).numpy(), expected.numpy(), err_msg=repr(module))
    assert repr(nn.KLDivLoss(reduction="batchmean")) == "KLDivLoss(reduction='batchmean')"
    with pytest.raises(ValueError, match=r"reduction 'batchmean' is not valid"):
        nn.HuberLoss(reduction="batchmean")
    with pytest.raises(ValueError, match=r"HuberLoss delta must be > 0, got -1"):
        nn.HuberLoss(delta=-1)
    with pytest.raises(ValueError, match=r"TripletMarginLoss margin must be > 0, got 0"):
        nn.TripletMarginLoss(margin=0)


# --------------------------------------------------------------------------- optional: torch itself
def test_values_and_gradients_agree_with_torch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    rng = _rng(7)
    x, y, z = (rng.standard_normal((4, 3, 5)) for _ in range(3))
    sgn, w3 = _signs(4, 3, 5, seed=8), rng.standard_normal(3)
    tiny = x.copy()
    tiny[0, :, 0] = 0.0
    tiny[1, :, 1] = 1e-10
    probs = ref.softmax(z, 1)
    probs[0, 0, 0] = 0.0
    cases = [
        ("prelu", lambda f, a, b: f.prelu(a, b), [x, w3]),
        ("softplus", lambda f, a: f.softplus(a * 5, 2.0, 3.0), [x]),
        ("softmin", lambda f, a: f.softmin(a, 1), [x]),
        ("normalize", lambda f, a: f.normalize(a, 3, -1), [tiny]),
        ("normalize-inf", lambda f, a: f.normalize(a, math.inf, (1, 2)), [x]),
        ("cosine_similarity", lambda f, a, b: f.cosine_similarity(a, b[:1]), [tiny, y]),
        ("kl_div", lambda f, a: f.kl_div(a, _like(f, probs), reduction="batchmean"), [ref.log_softmax(x, 1)]),
        ("huber_loss", lambda f, a, b: f.huber_loss(a, b, delta=0.5), [x, y]),
        ("margin_ranking_loss", lambda f, a, b: f.margin_ranking_loss(a, b, _like(f, sgn), 0.1), [x, y]),
        ("soft_margin_loss", lambda f, a: f.soft_margin_loss(a, _like(f, sgn), reduction="sum"), [x]),
        ("hinge_embedding_loss", lambda f, a: f.hinge_embedding_loss(a, _like(f, sgn), reduction="none"), [x]),
        ("poisson_nll_loss", lambda f, a: f.poisson_nll_loss(a, _like(f, np.abs(z) * 3), full=True), [x]),
        ("cosine_embedding_loss", lambda f, a, b: f.cosine_embedding_loss(a[0], b[0], _like(f, sgn[0, :, 0])), [x, y]),
        ("triplet_margin_loss", lambda f, a, b, c: f.triplet_margin_loss(a, b, c, p=3, swap=True), [x, y, z]),
        ("bilinear", lambda f, a, b, c: f.bilinear(a, b, c), [x, y[..., :4], rng.standard_normal((2, 5, 4))]),
    ]
    torch_ops = dict(addcmul=torch.addcmul, addcdiv=torch.addcdiv, dot=torch.dot, tensordot=torch.tensordot)
    cases += [
        ("addcmul", lambda f, a, b, c: f.addcmul(a, b, c, value=0.3), [x, y[:, :1], z[0]]),
        ("addcdiv", lambda f, a, b, c: f.addcdiv(a, b, c + 5, value=2), [x, y, z]),
        ("dot", lambda f, a, b: f.dot(a, b), [x[0, 0], y[0, 0]]),
        ("tensordot", lambda f, a, b: f.tensordot(a, b, ([0, 2], [2, 0])), [x, rng.standard_normal((5, 2, 4))]),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn, arrays in cases:
            ours = [ampcore.tensor(a, requires_grad=True) for a in arrays]
            theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
            f_torch = _TorchNamespace(tf, torch_ops)
            out, expected = fn(F, *ours), fn(f_torch, *theirs)
            np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12, err_msg=name)
            weights = rng.standard_normal(expected.shape)
            (out * ampcore.tensor(weights)).sum().backward()
            (expected * torch.tensor(weights)).sum().backward()
            for a, b in zip(ours, theirs):
                scale = max(1.0, float(np.abs(b.grad.numpy()).max()))
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12 * scale, err_msg=name)


def _like(f, a):
    """``a`` as a constant tensor of the namespace ``f`` (ampcore's F or the torch shim)."""
    return f.constant(a) if isinstance(f, _TorchNamespace) else ampcore.tensor(a)


class _TorchNamespace:
    """torch.nn.functional plus the torch.* tensor ops, so one lambda drives both libraries."""

    def __init__(self, functional, extra):
        self._functional, self._extra = functional, extra

    def __getattr__(self, name):
        return self._extra.get(name) or getattr(self._functional, name)

    def constant(self, a):
        import torch

        return torch.tensor(a)
