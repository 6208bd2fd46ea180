"""Losses against NumPy references (explicit log-sum-exp, stable BCE), their gradients and errors."""

import math

import functional_reference as ref
import numpy as np
import pytest
from functional_reference import assert_close, f64, randn

import ampcore
import ampcore.nn.functional as F
from ampcore import dtypes as dt
from ampcore.syncs import count_host_syncs
from ampcore.testing import gradcheck

REDUCTIONS = ("mean", "sum", "none")


def _targets(shape, classes, seed=0, ignore=()):
    t = np.random.default_rng(seed).integers(0, classes, shape)
    for i in ignore:
        t.flat[i] = -100
    return ampcore.tensor(t)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("shape", [(6, 5), (2, 5, 3)], ids=["NC", "NCd"])
def test_cross_entropy_matches_log_sum_exp_reference(shape, smoothing, weighted, reduction):
    x = randn(*shape) * 2.0
    target_shape = shape[:1] + shape[2:]
    t = _targets(target_shape, shape[1], ignore=(1, 4))
    w = ampcore.tensor([0.5, 1.0, 2.0, 1.5, 0.25]) if weighted else None
    out = F.cross_entropy(x, t, weight=w, reduction=reduction, label_smoothing=smoothing)
    expected = ref.cross_entropy(f64(x), t.numpy(), None if w is None else f64(w), -100, reduction, smoothing)
    assert_close(out, expected, int(np.prod(shape)))


def test_cross_entropy_custom_ignore_index_and_all_ignored_mean_is_nan():
    x, t = randn(4, 3), ampcore.tensor([0, 2, 2, 1])
    out = F.cross_entropy(x, t, ignore_index=2)
    assert_close(out, ref.cross_entropy(f64(x), t.numpy(), ignore_index=2), 12)
    assert math.isnan(F.cross_entropy(x, ampcore.full((4,), -100)).item())


def test_cross_entropy_with_probability_targets():
    x = randn(4, 3, 2)
    p = ampcore.tensor(ref.softmax(np.random.default_rng(1).standard_normal((4, 3, 2)), 1).astype(np.float32))
    w = ampcore.tensor([1.0, 2.0, 0.5])
    logp = ref.log_softmax(f64(x), 1)
    smoothed = f64(p) * 0.9 + 0.1 / 3
    per = -(logp * smoothed * f64(w).reshape(1, 3, 1)).sum(1)
    assert_close(F.cross_entropy(x, p, weight=w, label_smoothing=0.1), per.mean(), 24)
    assert_close(F.cross_entropy(x, p, weight=w, label_smoothing=0.1, reduction="none"), per, 24)


def test_cross_entropy_on_unbatched_input():
    x, t = randn(5), ampcore.tensor(3)
    assert_close(F.cross_entropy(x, t), -ref.log_softmax(f64(x), 0)[3], 5)


@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16], ids=str)
def test_low_precision_cross_entropy_keeps_its_dtype(dtype):
    x, t = randn(8, 10, dtype=dtype), _targets((8,), 10)
    out = F.cross_entropy(x, t)
    assert out.dtype is dtype
    assert_close(out, ref.cross_entropy(f64(x), t.numpy()), 80)


def test_cross_entropy_and_nll_backward():
    x = randn(4, 3, 2, dtype=dt.float64, requires_grad=True)
    t = _targets((4, 2), 3, ignore=(3,))
    w = ampcore.tensor([0.5, 2.0, 1.0], dtype="float64")
    assert gradcheck(lambda x: F.cross_entropy(x, t, weight=w, label_smoothing=0.1), [x])
    assert gradcheck(lambda x: F.cross_entropy(x, t, reduction="none"), [x])
    p = ampcore.tensor(ref.softmax(np.random.default_rng(2).standard_normal((4, 3, 2)), 1))
    assert gradcheck(lambda x: F.cross_entropy(x, p), [x])
    assert gradcheck(lambda x: F.nll_loss(x, t, weight=w, reduction="sum"), [x])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_picks_the_weighted_target_log_probability(reduction):
    logp = F.log_softmax(randn(5, 4), 1)
    t = ampcore.tensor([3, 0, -100, 1, 3])
    w = np.array([1.0, 2.0, 3.0, 0.5])
    a, idx = f64(logp), t.numpy()
    per = np.array([0.0 if k == -100 else -a[i, k] * w[k] for i, k in enumerate(idx)])
    expected = {"none": per, "sum": per.sum(), "mean": per.sum() / sum(w[k] for k in idx if k != -100)}
    out = F.nll_loss(logp, t, weight=ampcore.tensor(w.astype(np.float32)), reduction=reduction)
    assert_close(out, expected[reduction], 5)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses_match_numpy(reduction):
    x, y = randn(3, 4), randn(3, 4, seed=1)
    d = f64(x) - f64(y)
    red = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    assert_close(F.mse_loss(x, y, reduction=reduction), red(d**2), 12)
    assert_close(F.l1_loss(x, y, reduction=reduction), red(np.abs(d)), 12)
    for beta in (0.5, 1.0, 0.0):
        huber = np.abs(d) if beta == 0 else np.where(np.abs(d) < beta, 0.5 * d**2 / beta, np.abs(d) - 0.5 * beta)
        assert_close(F.smooth_l1_loss(x, y, reduction=reduction, beta=beta), red(huber), 12)


def test_regression_losses_backward():
    x = randn(3, 4, dtype=dt.float64, requires_grad=True)
    y = randn(3, 4, seed=1, dtype=dt.float64, requires_grad=True)
    assert gradcheck(F.mse_loss, [x, y])
    assert gradcheck(lambda a, b: F.l1_loss(a, b, reduction="sum"), [x, y])
    assert gradcheck(lambda a, b: F.smooth_l1_loss(a, b, beta=0.7), [x, y])


def test_regression_loss_warns_on_broadcasting_shapes():
    with pytest.warns(UserWarning, match=r"target shape \(3,\) differs from input shape \(2, 3\)"):
        F.mse_loss(ampcore.ones(2, 3), ampcore.ones(3))


def _bce(p, y, w=None):
    loss = -(y * np.maximum(np.log(p), -100) + (1 - y) * np.maximum(np.log(1 - p), -100))
    return loss if w is None else loss * w


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_matches_numpy(reduction):
    p = ampcore.tensor(np.random.default_rng(0).uniform(0.05, 0.95, (3, 4)).astype(np.float32))
    y, w = ampcore.tensor(np.random.default_rng(1).random((3, 4)).astype(np.float32)), randn(4, positive=True)
    red = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    out = F.binary_cross_entropy(p, y, weight=w, reduction=reduction)
    assert_close(out, red(_bce(f64(p), f64(y), f64(w))), 12)


def test_binary_cross_entropy_is_finite_at_zero_and_one():
    p = ampcore.tensor([0.0, 1.0, 0.0, 1.0, 0.5], requires_grad=True)
    y = ampcore.tensor([1.0, 0.0, 0.0, 1.0, 1.0])
    out = F.binary_cross_entropy(p, y, reduction="none")
    np.testing.assert_allclose(out.numpy(), [100.0, 100.0, 0.0, 0.0, math.log(2)], rtol=1e-6)
    out.sum().backward()
    assert np.isfinite(p.grad.numpy()).all()


def test_binary_cross_entropy_backward():
    p = ampcore.tensor(np.random.default_rng(0).uniform(0.1, 0.9, (2, 3)), requires_grad=True)
    y = ampcore.tensor(np.random.default_rng(1).random((2, 3)), requires_grad=True)
    assert gradcheck(F.binary_cross_entropy, [p, y])


def _bce_logits(x, y, pos_weight=None):
    softplus = np.log1p(np.exp(-np.abs(x)))
    if pos_weight is None:
        return np.maximum(x, 0) - x * y + softplus
    return (1 - y) * x + ((pos_weight - 1) * y + 1) * (softplus + np.maximum(-x, 0))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits_is_stable_and_matches_numpy(reduction):
    x = ampcore.tensor([[-300.0, -20.0, -1.0, 0.0], [0.5, 3.0, 40.0, 300.0]])
    y = ampcore.tensor([[0.0, 1.0, 0.3, 1.0], [1.0, 0.0, 1.0, 0.0]])
    pw = ampcore.tensor([1.0, 2.0, 0.5, 3.0])
    red = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    out = F.binary_cross_entropy_with_logits(x, y, reduction=reduction)
    assert np.isfinite(out.numpy()).all()
    assert_close(out, red(_bce_logits(f64(x), f64(y))), 8)
    out = F.binary_cross_entropy_with_logits(x, y, reduction=reduction, pos_weight=pw)
    assert_close(out, red(_bce_logits(f64(x), f64(y), f64(pw))), 8)


def test_binary_cross_entropy_with_logits_backward():
    x = randn(3, 4, dtype=dt.float64, requires_grad=True)
    y = ampcore.tensor(np.random.default_rng(1).random((3, 4)), requires_grad=True)
    pw = randn(4, seed=2, dtype=dt.float64, requires_grad=True, positive=True)
    w = randn(4, seed=3, dtype=dt.float64, positive=True)
    assert gradcheck(lambda a, b, c: F.binary_cross_entropy_with_logits(a, b, w, pos_weight=c), [x, y, pw])
    z = ampcore.zeros(2, dtype="float64", requires_grad=True)
    F.binary_cross_entropy_with_logits(z, ampcore.tensor([0.0, 1.0], dtype="float64"), reduction="sum").backward()
    np.testing.assert_allclose(z.grad.numpy(), [0.5, -0.5])  # sigmoid(0) - y, also at the kink of |x|


@pytest.mark.parametrize("dtype", [dt.float64, dt.float32, dt.float16, dt.bfloat16], ids=str)
def test_binary_cross_entropy_with_logits_keeps_losses_far_below_one(dtype):
    # log(1 + e) with e = exp(-|x|) rounds to 0 once e < eps / 2: x = 20, y = 1 has loss 2.06e-9, not 0;
    # float16 (normal down to 6e-5) loses x = 8, y = 1 (3.4e-4) unless computed in float32.
    xs, ys = [8.0, -8.0, 5.0, -9.0], [1.0, 0.0, 1.0, 0.0]
    if dtype is not dt.float16:
        xs, ys = xs + [20.0, -30.0], ys + [1.0, 0.0]
    x, y = (ampcore.tensor(np.array(v).astype(dtype.numpy), dtype=dtype) for v in (xs, ys))
    out = F.binary_cross_entropy_with_logits(x, y, reduction="none")
    assert out.dtype is dtype
    # relative error alone: an absolute tolerance of eps would accept 0 for every one of these losses
    np.testing.assert_allclose(f64(out), _bce_logits(f64(x), f64(y)), rtol=ref.tolerance(dtype))


def test_binary_cross_entropy_with_logits_backward_at_large_logits():
    x = ampcore.tensor([20.0, -25.0, 8.0, -8.0, 1e-3], dtype="float64", requires_grad=True)
    y = ampcore.tensor([1.0, 0.0, 0.3, 1.0, 1.0], dtype="float64", requires_grad=True)
    pw = ampcore.tensor([2.0, 0.5, 1.0, 3.0, 1.5], dtype="float64", requires_grad=True)
    assert gradcheck(F.binary_cross_entropy_with_logits, [x, y])
    assert gradcheck(lambda a, b, c: F.binary_cross_entropy_with_logits(a, b, pos_weight=c), [x, y, pw])
    x.grad = None
    F.binary_cross_entropy_with_logits(x, y, reduction="sum").backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 / (1 + np.exp(-f64(x))) - f64(y), rtol=1e-12, atol=1e-15)


def test_binary_cross_entropy_gradient_is_torchs_rule_for_saturated_predictions():
    # torch: d/dp = (p - y) / max(p (1 - p), 1e-12), not the zero slope of the clamped log
    p = ampcore.tensor(np.array([0.0, 1.0, 1e-45, 0.25], np.float32), requires_grad=True)
    y = ampcore.tensor([1.0, 0.0, 1.0, 1.0], requires_grad=True)
    loss = F.binary_cross_entropy(p, y, weight=ampcore.tensor([1.0, 1.0, 1.0, 2.0]), reduction="sum")
    np.testing.assert_allclose(loss.item(), 300.0 + 2 * math.log(4), rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(p.grad.numpy(), [-1e12, 1e12, -1e12, -8.0], rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), [np.inf, -np.inf, 103.2789, 2 * math.log(3)], rtol=1e-6)


def test_binary_cross_entropy_keeps_losses_far_below_one():
    # -log(1 - p) for p = 1e-8: log(1 - p) in float32 is log(1) = 0; torch's log1p(-p) is -1e-8
    p, y = ampcore.tensor([1e-8, 0.5]), ampcore.tensor([0.0, 0.0])
    np.testing.assert_allclose(
        F.binary_cross_entropy(p, y, reduction="none").numpy(), [1e-8, math.log(2)], rtol=ref.tolerance(dt.float32)
    )


@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss"])
def test_low_precision_mean_loss_over_many_elements_does_not_overflow(loss):
    # 1e5 float16 terms sum far past 65504; the mean sums in float32 and rounds once, as torch
    a, b = randn(100_000, dtype=dt.float16), randn(100_000, seed=1, dtype=dt.float16)
    d = f64(a) - f64(b)
    expected = np.mean(d * d) if loss == "mse_loss" else np.mean(np.abs(d))
    assert_close(getattr(F, loss)(a, b), expected)


def test_loss_errors_name_the_bad_value():
    x = ampcore.ones(4, 3)
    with pytest.raises(ValueError, match=r"unknown reduction 'avg'; valid reductions are 'none', 'mean', 'sum'"):
        F.cross_entropy(x, ampcore.tensor([0, 1, 2, 0]), reduction="avg")
    with pytest.raises(
        ValueError,
        match=r"float \(class-probability\) targets must have the input's shape "
        r"\(4, 3\), got \(4,\)",
    ):
        F.cross_entropy(x, ampcore.ones(4))
    with pytest.raises(ValueError, match=r"target of shape \(3,\) does not match input of shape \(4, 3\)"):
        F.cross_entropy(x, ampcore.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"weight of shape \(2,\) does not match 3 classes"):
        F.cross_entropy(x, ampcore.tensor([0, 1, 2, 0]), weight=ampcore.ones(2))
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        F.cross_entropy(x, ampcore.tensor([0, 1, 2, 0]), label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"target shape \(4,\) must equal the input shape \(4, 3\)"):
        F.binary_cross_entropy(x * 0.5, ampcore.ones(4))
    with pytest.raises(ValueError, match="size_average and reduce are deprecated"):
        F.mse_loss(x, x, size_average=True)


def test_class_index_range_is_checked_on_the_device_and_raised_at_the_next_read():
    x = ampcore.randn(4, 3, requires_grad=True)
    with count_host_syncs() as syncs:
        loss = F.nll_loss(x, ampcore.tensor([0, 3, 1, -100]))
    assert syncs.count == 0
    with pytest.raises(
        ValueError,
        match=r"nll_loss\(\): target class 3 is out of range for 3 classes .*"
        r"found by a check on the device",
    ):
        loss.item()
    assert loss.item() == loss.item()  # the failed check was reported once, then cleared


def test_a_failed_deferred_check_stops_the_optimizer_step_before_anything_changes():
    from ampcore import nn, optim

    model = nn.Linear(3, 3)
    opt = optim.SGD(model.parameters(), lr=0.1)
    before = [p.numpy().copy() for p in model.parameters()]
    F.cross_entropy(model(ampcore.randn(2, 3)), ampcore.tensor([1, 7])).backward()
    with pytest.raises(ValueError, match=r"cross_entropy\(\): target class 7 is out of range for 3 classes"):
        opt.step()
    assert all((p.numpy() == b).all() for p, b in zip(model.parameters(), before))


def test_ignored_and_in_range_targets_queue_a_check_that_passes():
    x = ampcore.randn(3, 4)
    loss = F.cross_entropy(x, ampcore.tensor([3, -100, 0]))
    assert loss.item() > 0
