"""optim.Adagrad, RMSprop and Adadelta against their update rules in float64 NumPy (and torch where installed)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import ampcore
from ampcore import optim


def adagrad(p, grads, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
    acc = np.full_like(p, initial_accumulator_value)
    for step, g in enumerate(grads, start=1):
        g = g + weight_decay * p
        acc = acc + g * g
        p = p - lr / (1 + (step - 1) * lr_decay) * g / (np.sqrt(acc) + eps)
    return p


def rmsprop(p, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False, maximize=False):
    sq, avg_g, buf = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for g in grads:
        g = -g if maximize else g
        g = g + weight_decay * p
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            avg_g = alpha * avg_g + (1 - alpha) * g
            avg = np.sqrt(sq - avg_g * avg_g) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    return p


def adadelta(p, grads, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0):
    sq, acc = np.zeros_like(p), np.zeros_like(p)
    for g in grads:
        g = g + weight_decay * p
        sq = rho * sq + (1 - rho) * g * g
        delta = np.sqrt(acc + eps) / np.sqrt(sq + eps) * g
        acc = rho * acc + (1 - rho) * delta * delta
        p = p - lr * delta
    return p


CASES = [
    ("Adagrad", adagrad, {}),
    ("Adagrad", adagrad, {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1, "initial_accumulator_value": 0.2}),
    ("RMSprop", rmsprop, {}),
    ("RMSprop", rmsprop, {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.1}),
    ("RMSprop", rmsprop, {"maximize": True}),
    ("Adadelta", adadelta, {}),
    ("Adadelta", adadelta, {"lr": 0.5, "rho": 0.8, "weight_decay": 0.1}),
]


def _steps(cls, kwargs, dtype, steps=5):
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) for _ in range(steps)]
    p = ampcore.tensor(p0, dtype=dtype, requires_grad=True)
    opt = getattr(optim, cls)([p], **kwargs)
    for g in grads:
        p.grad = ampcore.tensor(g, dtype=dtype)
        opt.step()
    return p0, grads, p, opt


@pytest.mark.parametrize(("cls", "rule", "kwargs"), CASES)
def test_float64_steps_follow_the_rule(cls, rule, kwargs):
    p0, grads, p, opt = _steps(cls, kwargs, ampcore.float64)
    want = rule(p0, grads, **kwargs)
    # a handful of float64 operations per step, five steps: a few ulps of the largest value
    np.testing.assert_allclose(
        p.detach().numpy(), want, rtol=0, atol=64 * np.finfo(np.float64).eps * np.abs(want).max()
    )
    assert opt.state[p]["step"] == 5


@pytest.mark.parametrize(("cls", "rule", "kwargs"), CASES[::2])
def test_bfloat16_parameters_step_in_float32_state_and_round_once(cls, rule, kwargs):
    p0, grads, p, opt = _steps(cls, kwargs, ampcore.bfloat16, steps=1)
    bf = ampcore.tensor(p0, dtype=ampcore.bfloat16).to(dtype=ampcore.float64).numpy()
    g = ampcore.tensor(grads[0], dtype=ampcore.bfloat16).to(dtype=ampcore.float64).numpy()
    want = rule(bf, [g], **kwargs)
    # float32 computation (a few ulps of float32), then one rounding to bfloat16 (half its ulp, 2**-8 relative)
    got = p.detach().to(dtype=ampcore.float64).numpy()
    np.testing.assert_allclose(got, want, rtol=2.0**-8 + 2.0**-20, atol=1e-6)
    assert p.dtype is ampcore.bfloat16 and all(
        t.dtype is ampcore.float32 for t in opt.state[p].values() if hasattr(t, "dtype")
    )


def test_state_dict_round_trip_continues_identically():
    _, grads, p, opt = _steps("RMSprop", {"momentum": 0.5, "centered": True}, ampcore.float32, steps=2)
    q = ampcore.tensor(p.detach().numpy(), requires_grad=True)
    other = optim.RMSprop([q], momentum=0.5, centered=True)
    other.load_state_dict(opt.state_dict())
    for t, o in ((p, opt), (q, other)):
        t.grad = ampcore.ones(3, 4)
        o.step()
    assert np.array_equal(p.detach().numpy(), q.detach().numpy())


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        ("Adagrad", {"lr": -1.0}, "invalid learning rate -1.0"),
        ("RMSprop", {"alpha": -0.1}, "invalid alpha value -0.1"),
        ("Adadelta", {"rho": 1.5}, "invalid rho value 1.5"),
        ("Adagrad", {"fused": True}, "Adagrad\\(fused=True\\) is not supported"),
    ],
)
def test_bad_hyper_parameters_name_themselves(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        getattr(optim, cls)([ampcore.ones(2, requires_grad=True)], **kwargs)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.parametrize(("cls", "rule", "kwargs"), CASES)
def test_the_same_steps_as_torch(cls, rule, kwargs):
    import torch

    p0, grads, p, _ = _steps(cls, kwargs, ampcore.float64)
    t = torch.tensor(p0, requires_grad=True)
    opt = getattr(torch.optim, cls)([t], **kwargs)
    for g in grads:
        t.grad = torch.tensor(g)
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=0, atol=1e-14)
