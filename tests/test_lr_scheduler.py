"""ampcore.optim.lr_scheduler against torch's closed forms, computed by hand here."""

from __future__ import annotations

import math

import pytest

import ampcore
from ampcore.optim import SGD, AdamW, lr_scheduler

approx = pytest.approx


def _opt(lr=0.1, cls=SGD, **kwargs):
    return cls([ampcore.zeros(2, requires_grad=True)], lr=lr, **kwargs)


def _lrs(scheduler, n):
    """The lr at epochs 0..n-1 (the constructor sets epoch 0), stepping the optimizer first as torch asks."""
    out = []
    for _ in range(n):
        out.append(scheduler.optimizer.param_groups[0]["lr"])
        assert scheduler.get_last_lr() == [scheduler.optimizer.param_groups[0]["lr"]]
        scheduler.step()
    return out


def test_step_lr():
    assert _lrs(lr_scheduler.StepLR(_opt(), step_size=3, gamma=0.5), 8) == approx(
        [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025]
    )


def test_lambda_lr_one_function_or_one_per_group():
    assert _lrs(lr_scheduler.LambdaLR(_opt(), lambda e: 0.9**e), 4) == approx([0.1, 0.09, 0.081, 0.0729])
    opt = SGD(
        [
            {"params": [ampcore.zeros(1, requires_grad=True)], "lr": 1.0},
            {"params": [ampcore.zeros(1, requires_grad=True)]},
        ],
        lr=2.0,
    )
    sched = lr_scheduler.LambdaLR(opt, [lambda e: e + 1, lambda e: 1 / (e + 1)])
    sched.step()
    assert sched.get_last_lr() == approx([2.0, 1.0])
    with pytest.raises(ValueError, match="expected 2 values for lr_lambda, got 1"):
        lr_scheduler.LambdaLR(opt, [lambda e: 1.0])


def test_linear_lr_warms_up_then_holds():
    got = _lrs(lr_scheduler.LinearLR(_opt(0.3), start_factor=0.5, end_factor=1.0, total_iters=4), 7)
    assert got == approx([0.15, 0.1875, 0.225, 0.2625, 0.3, 0.3, 0.3])
    with pytest.raises(ValueError, match=r"start_factor must be in \(0, 1\], got 0"):
        lr_scheduler.LinearLR(_opt(), start_factor=0)


def test_cosine_annealing_lr():
    got = _lrs(lr_scheduler.CosineAnnealingLR(_opt(1.0), T_max=4, eta_min=0.2), 5)
    want = [0.2 + 0.8 * (1 + math.cos(math.pi * e / 4)) / 2 for e in range(5)]
    assert got == approx(want) and got[-1] == approx(0.2) and got[2] == approx(0.6)


def test_one_cycle_lr_cos_with_momentum_cycling_sgd():
    opt = _opt(1.0, momentum=0.9)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    lrs, moms = [], []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"])
        if len(lrs) < 10:
            sched.step()
    initial, low = 1.0 / 25, 1.0 / 25 / 1e4
    # phase 1: steps 0..2 (end_step = 0.3 * 10 - 1 = 2), phase 2: steps 2..9
    want_lr = [initial + (1.0 - initial) * (1 - math.cos(math.pi * s / 2)) / 2 for s in range(3)]
    want_lr += [low + (1.0 - low) * (1 + math.cos(math.pi * (s - 2) / 7)) / 2 for s in range(3, 10)]
    want_m = [0.85 + 0.1 * (1 + math.cos(math.pi * s / 2)) / 2 for s in range(3)]
    want_m += [0.95 - 0.1 * (1 + math.cos(math.pi * (s - 2) / 7)) / 2 for s in range(3, 10)]
    assert lrs == approx(want_lr) and moms == approx(want_m)
    assert lrs[0] == approx(0.04) and lrs[2] == approx(1.0) and lrs[-1] == approx(low)
    with pytest.raises(ValueError, match="Tried to step 11 times"):
        sched.step()
        sched.step()


def test_one_cycle_lr_linear_three_phase_cycles_adams_beta1():
    opt = _opt(cls=AdamW)
    sched = lr_scheduler.OneCycleLR(
        opt, max_lr=0.5, epochs=2, steps_per_epoch=5, anneal_strategy="linear", three_phase=True
    )
    lrs, betas = [], []
    for i in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        betas.append(opt.param_groups[0]["betas"])
        if i < 9:
            sched.step()
    a, low = 0.5 / 25, 0.5 / 25 / 1e4
    # phases end at steps 2, 4 and 9
    want = [a, a + (0.5 - a) / 2, 0.5, (0.5 + a) / 2, a] + [a + (low - a) * (s - 4) / 5 for s in range(5, 10)]
    assert lrs == approx(want)
    assert [b[0] for b in betas[:5]] == approx([0.95, 0.9, 0.85, 0.9, 0.95]) and betas[0][1] == 0.999
    with pytest.raises(ValueError, match="either total_steps OR"):
        lr_scheduler.OneCycleLR(_opt(), max_lr=1.0)
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        _no_momentum_optimizer()


def _no_momentum_optimizer():
    class Plain(ampcore.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, dict(lr=0.1))

    lr_scheduler.OneCycleLR(Plain([ampcore.zeros(1, requires_grad=True)]), max_lr=1.0, total_steps=5)


def test_sequential_lr_warm_up_then_cosine():
    opt = _opt(1.0)
    warm = lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=2)
    cos = lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    sched = lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2])
    got = _lrs(sched, 7)
    want = [0.25, 0.625] + [(1 + math.cos(math.pi * e / 4)) / 2 for e in range(5)]
    assert got == approx(want)
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2, 3])
    with pytest.raises(ValueError, match="same optimizer"):
        lr_scheduler.SequentialLR(opt, [warm, lr_scheduler.StepLR(_opt(), 2)], milestones=[2])


@pytest.mark.parametrize(
    "make",
    [
        lambda o: lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
        lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=5),
        lambda o: lr_scheduler.LinearLR(o, total_iters=3),
        lambda o: lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=8),
        lambda o: lr_scheduler.SequentialLR(
            o, [lr_scheduler.LinearLR(o, total_iters=2), lr_scheduler.StepLR(o, 2)], milestones=[2]
        ),
    ],
    ids=["StepLR", "CosineAnnealingLR", "LinearLR", "OneCycleLR", "SequentialLR"],
)
def test_state_dict_resumes_the_schedule(make):
    straight = _lrs(make(_opt(momentum=0.9)), 7)
    opt = _opt(momentum=0.9)
    first = make(opt)
    head = _lrs(first, 3)  # epochs 0..2; the scheduler now stands at epoch 3
    saved_opt, saved = opt.state_dict(), first.state_dict()
    assert "optimizer" not in saved
    opt2 = _opt(momentum=0.9)
    second = make(opt2)  # torch's resume order: build both, then load the optimizer, then the scheduler
    opt2.load_state_dict(saved_opt)
    second.load_state_dict(saved)
    assert head + _lrs(second, 4) == approx(straight)


def test_resuming_needs_initial_lr():
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(_opt(), step_size=2, last_epoch=3)


def test_lambda_lr_state_dict_skips_functions_and_keeps_callable_objects():
    class Warm:
        def __init__(self):
            self.n = 2

        def __call__(self, e):
            return min(1.0, (e + 1) / self.n)

    opt = SGD(
        [{"params": [ampcore.zeros(1, requires_grad=True)]}, {"params": [ampcore.zeros(1, requires_grad=True)]}], lr=1.0
    )
    fn = Warm()
    sd = lr_scheduler.LambdaLR(opt, [lambda e: 1.0, fn]).state_dict()
    assert sd["lr_lambdas"] == [None, {"n": 2}]
    fn2 = Warm()
    fn2.n = 9
    other = lr_scheduler.LambdaLR(opt, [lambda e: 1.0, fn2])
    other.load_state_dict(sd)
    assert fn2.n == 2


# --------------------------------------------------------------------------- ExponentialLR, MultiStepLR, plateau
def _sgd(lr=1.0):
    from ampcore import nn, optim

    return optim.SGD(nn.Linear(1, 1).parameters(), lr=lr)


def test_exponential_and_multistep_follow_their_closed_forms():
    from ampcore.optim import lr_scheduler

    opt = _sgd()
    exp = lr_scheduler.ExponentialLR(opt, gamma=0.5)
    lrs = []
    for _ in range(3):
        exp.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == [0.5, 0.25, 0.125]
    opt = _sgd()
    multi = lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.1)
    seen = []
    for _ in range(5):
        seen.append(opt.param_groups[0]["lr"])
        multi.step()
    assert seen == pytest.approx([1.0, 1.0, 0.1, 0.1, 0.01])


def test_reduce_on_plateau_waits_patience_then_cools_down_and_respects_min_lr():
    from ampcore.optim import lr_scheduler

    opt = _sgd()
    plateau = lr_scheduler.ReduceLROnPlateau(opt, patience=2, cooldown=1, factor=0.5, min_lr=0.3)
    lrs = []
    for metric in [5, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]:
        plateau.step(ampcore.tensor(float(metric)))
        lrs.append(opt.param_groups[0]["lr"])
    # torch's sequence for the same metrics: 3 bad epochs > patience 2 -> halve, 1 epoch cooldown, and so on
    assert lrs == [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.3, 0.3, 0.3, 0.3]
    assert plateau.get_last_lr() == [0.3] and plateau.state_dict()["best"] == 4.0
    with pytest.raises(TypeError, match=r"needs the metric: scheduler.step\(val_loss\)"):
        plateau.step()
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        lr_scheduler.ReduceLROnPlateau(opt, factor=1.5)
