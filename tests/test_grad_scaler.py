"""GradScaler: construction, scaling, the per-optimizer stages, skipping inf/NaN steps bit for bit, the scale
update rule against a plain-Python trajectory, state dicts and resuming, warnings, host syncs, torch parity."""

from __future__ import annotations

import copy
import math
import warnings
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ampcore
from ampcore import dtypes as dt
from ampcore import nn, optim
from ampcore.amp.state import thread_state
from ampcore.grad_scaler import GradScaler
from ampcore.nn import functional as F
from ampcore.nn.utils import clip_grad_norm_

F32_MAX = float(np.finfo(np.float32).max)
INF, NAN = float("inf"), float("nan")


@pytest.fixture(autouse=True)
def _seed_and_no_bfloat16_history(monkeypatch):
    """A fixed seed, and no bfloat16 autocast region remembered from other tests (the scaler warns about it)."""
    ampcore.manual_seed(0)
    monkeypatch.setattr(thread_state, "last_dtype", {})


# --------------------------------------------------------------------------- helpers
def linear_problem(n_in=3, n_out=2, batch=4, seed=0):
    rng = np.random.default_rng(seed)
    model = nn.Linear(n_in, n_out)
    x = ampcore.tensor(rng.standard_normal((batch, n_in)), dtype=dt.float32)
    y = ampcore.tensor(rng.integers(0, n_out, batch))
    return model, x, y


def mse(model, x):
    return (model(x) ** 2).mean()


def params_of(model_or_params):
    params = model_or_params.parameters() if isinstance(model_or_params, nn.Module) else model_or_params
    return [p.numpy().copy() for p in params]


def assert_same_arrays(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype
        np.testing.assert_array_equal(a, e)


def opt_snapshot(opt):
    """Every optimizer state value (numpy copies of tensors, step counts) keyed by (param index, name)."""
    out = {}
    for pid, st_ in opt.state_dict()["state"].items():
        for key, value in st_.items():
            out[(pid, key)] = value.numpy().copy() if isinstance(value, ampcore.Tensor) else value
    return out


def assert_same_opt_state(actual, expected):
    assert actual.keys() == expected.keys()
    for key in expected:
        if isinstance(expected[key], np.ndarray):
            np.testing.assert_array_equal(actual[key], expected[key])
        else:
            assert actual[key] == expected[key]


def poison(p, value, position=0):
    """Put ``value`` (inf/NaN) into ``p.grad`` at flat ``position``."""
    g = p.grad.numpy().copy()
    g.flat[position] = value
    p.grad = ampcore.tensor(g, dtype=p.grad.dtype)


def expected_trajectory(n_steps, bad, init, growth=2.0, backoff=0.5, interval=2):
    """The scale after each update and whether each step ran, by the rule, in plain Python floats."""
    scale, tracker, scales, stepped = init, 0, [], []
    for i in range(n_steps):
        if i in bad:
            scale, tracker = scale * backoff, 0
        else:
            tracker += 1
            if tracker == interval:
                scale = scale * growth if math.isfinite(scale * growth) else scale
                tracker = 0
        scales.append(scale)
        stepped.append(i not in bad)
    return scales, stepped


def started(scaler, device="cpu"):
    """``scaler`` after a first scale() (which creates its scale on the device)."""
    scaler.scale(ampcore.tensor(1.0, device=device))
    return scaler


# --------------------------------------------------------------------------- construction
def test_defaults_match_torch_and_getters_report_them():
    scaler = GradScaler("cpu")
    assert scaler.get_scale() == 2.0**16
    assert scaler.get_growth_factor() == 2.0 and scaler.get_backoff_factor() == 0.5
    assert scaler.get_growth_interval() == 2000 and scaler.get_growth_tracker() == 0
    assert scaler.is_enabled() and scaler.skipped_steps == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(growth_factor=1.0), r"growth_factor .*greater than 1.*got 1\.0"),
        (dict(growth_factor=0.5), r"growth_factor .*got 0\.5"),
        (dict(backoff_factor=1.0), r"backoff_factor .*got 1\.0"),
        (dict(backoff_factor=0.0), r"backoff_factor .*got 0\.0"),
        (dict(backoff_factor=1.5), r"backoff_factor .*got 1\.5"),
        (dict(init_scale=0.0), r"init_scale .*got 0\.0"),
        (dict(init_scale=-8.0), r"init_scale .*got -8\.0"),
        (dict(init_scale=INF), r"init_scale .*got inf"),
        (dict(init_scale=NAN), r"init_scale .*got nan"),
        (dict(growth_interval=0), r"growth_interval .*got 0"),
        (dict(growth_interval=2.5), r"growth_interval .*got 2\.5"),
        (dict(growth_interval=True), r"growth_interval .*got True"),
        (dict(min_scale=8.0, max_scale=4.0), r"min_scale 8\.0 is greater than max_scale 4\.0"),
        (dict(min_scale=-1.0), r"min_scale .*got -1\.0"),
        (dict(stall_warning_after=0), r"stall_warning_after .*got 0"),
    ],
)
def test_bad_constructor_arguments_raise_naming_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GradScaler("cpu", **kwargs)


def test_an_init_scale_that_overflows_float32_is_rejected():
    """The scale is stored in float32: 1e39 would become inf there and every step would be skipped forever."""
    with pytest.raises(ValueError, match="init_scale"):
        GradScaler("cpu", init_scale=1e39)


def test_min_max_and_stall_options_are_keyword_only():
    with pytest.raises(TypeError):
        GradScaler("cpu", 1.0, 2.0, 0.5, 10, True, 0.5)


def test_scale_is_created_lazily_on_the_first_scale_call():
    scaler = GradScaler("cpu", init_scale=8.0)
    assert scaler._scale is None and scaler.get_scale() == 8.0
    scaler.scale(ampcore.tensor(1.0))
    assert scaler._scale is not None and scaler._scale.device == ampcore.device("cpu")
    assert scaler._scale.dtype == dt.float32 and scaler._growth_tracker.dtype == dt.int32
    assert scaler.get_scale() == 8.0 and scaler.get_growth_tracker() == 0


# --------------------------------------------------------------------------- scale()
def test_scaled_loss_is_loss_times_scale_exactly_for_any_scale():
    scaler = GradScaler("cpu", init_scale=3.7)
    loss = ampcore.tensor(1.2345678, dtype=dt.float32)
    assert scaler.scale(loss).item() == float(np.float32(1.2345678) * np.float32(3.7))


def test_float16_loss_is_scaled_in_float32():
    scaler = GradScaler("cpu")  # 65536 * 2 overflows float16, not float32
    out = scaler.scale(ampcore.tensor(2.0, dtype=dt.float16))
    assert out.dtype == dt.float32 and out.item() == 131072.0


def test_nested_lists_tuples_and_namedtuples_keep_their_types():
    Pair = namedtuple("Pair", "a b")
    scaler = GradScaler("cpu", init_scale=4.0)
    t = ampcore.tensor
    out = scaler.scale(Pair(t(1.0), [t(2.0), (t(3.0), [t(4.0)])]))
    assert type(out) is Pair and type(out.b) is list and type(out.b[1]) is tuple and type(out.b[1][1]) is list
    assert [out.a.item(), out.b[0].item(), out.b[1][0].item(), out.b[1][1][0].item()] == [4.0, 8.0, 12.0, 16.0]


@pytest.mark.parametrize(
    "bad", [{"loss": ampcore.tensor(1.0)}, 3, 2.5, np.ones(2)], ids=["dict", "int", "float", "ndarray"]
)
def test_scale_refuses_anything_but_tensors_and_sequences(bad):
    with pytest.raises(TypeError, match="Tensor"):
        GradScaler("cpu").scale(bad)


def test_gradients_are_scale_times_unscaled_gradients_for_power_of_two_scales():
    model, x, _ = linear_problem()
    mse(model, x).backward()
    reference = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    GradScaler("cpu", init_scale=2.0**12).scale(mse(model, x)).backward()
    assert_same_arrays([p.grad.numpy() for p in model.parameters()], [g * np.float32(2.0**12) for g in reference])


def test_scaler_for_cpu_refuses_a_tensor_on_another_device_type(register_fake):
    fake = register_fake()
    with pytest.raises(ValueError, match=fake.name):
        GradScaler("cpu").scale(ampcore.ones(2, device=fake.name))


def test_scaler_works_on_another_backend(register_fake):
    fake = register_fake()
    p = nn.Parameter(ampcore.tensor([1.0, -2.0], device=fake.name))
    opt = optim.SGD([p], lr=0.5)
    scaler = GradScaler(fake.name, init_scale=4.0, growth_interval=1)
    scaler.scale((p * 3.0).sum()).backward()
    assert scaler.step(opt) is True
    scaler.update()
    np.testing.assert_array_equal(p.numpy(), np.array([-0.5, -3.5], np.float32))
    assert scaler.get_scale() == 8.0


# --------------------------------------------------------------------------- stages
@pytest.fixture
def problem():
    """(scaler, optimizer, model, x) after one scaled backward."""
    model, x, _ = linear_problem()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu")
    scaler.scale(mse(model, x)).backward()
    return scaler, opt, model, x


@pytest.fixture
def scaled_sgd(problem):
    return problem[:2]


def test_unscale_twice_before_update_raises(scaled_sgd):
    scaler, opt = scaled_sgd
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_.* already been called"):
        scaler.unscale_(opt)


def test_unscale_after_step_raises(scaled_sgd):
    scaler, opt = scaled_sgd
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)


def test_second_step_before_update_raises_and_update_resets_the_stage(problem):
    scaler, opt, model, x = problem
    assert scaler.step(opt) is True
    with pytest.raises(RuntimeError, match="step.* already been called"):
        scaler.step(opt)
    scaler.update()
    opt.zero_grad()
    scaler.scale(mse(model, x)).backward()
    scaler.unscale_(opt)  # READY again
    assert scaler.step(opt) is True


@pytest.mark.parametrize("how", ["positional", "keyword"])
def test_step_with_a_closure_raises(scaled_sgd, how):
    scaler, opt = scaled_sgd
    closure = lambda: 1.0  # noqa: E731
    with pytest.raises(RuntimeError, match="closure"):
        scaler.step(opt, closure) if how == "positional" else scaler.step(opt, closure=closure)


@pytest.mark.parametrize("method", ["unscale_", "step", "update"])
def test_methods_before_any_scale_call_raise(method):
    model, _, _ = linear_problem()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu")
    with pytest.raises(RuntimeError, match="before scale"):
        scaler.update() if method == "update" else getattr(scaler, method)(opt)


def test_step_without_gradients_raises():
    model, _, _ = linear_problem()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = started(GradScaler("cpu"))
    with pytest.raises(RuntimeError, match="no parameter .* has a gradient"):
        scaler.step(opt)


def test_update_without_step_or_unscale_raises(scaled_sgd):
    scaler, _ = scaled_sgd
    with pytest.raises(RuntimeError, match="no inf/NaN checks"):
        scaler.update()


def test_update_after_unscale_only_applies_the_rule(scaled_sgd):
    scaler, opt = scaled_sgd
    scaler.set_growth_interval(1)
    scaler.unscale_(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**17


# --------------------------------------------------------------------------- unscale_
def count_unscale_kernel_calls(monkeypatch):
    table = ampcore.get_backend("cpu").kernels
    original, calls = table.unscale_and_check, []

    def counting(grads, inv_scale, found_inf):
        calls.append([g.dtype for g in grads])
        return original(grads, inv_scale, found_inf)

    monkeypatch.setattr(table, "unscale_and_check", counting)
    return calls


def test_unscale_makes_one_fused_call_per_dtype_and_no_host_sync(monkeypatch):
    f32 = [nn.Parameter(ampcore.randn(3, i + 1)) for i in range(10)]
    f64 = [nn.Parameter(ampcore.randn(2, dtype=dt.float64)) for _ in range(2)]
    opt = optim.SGD(f32 + f64, lr=0.1)
    scaler = GradScaler("cpu", init_scale=4.0)
    loss = sum(p.sum() for p in f32).to(dtype=dt.float64) + sum(p.sum() for p in f64)
    scaler.scale(loss).backward()
    calls = count_unscale_kernel_calls(monkeypatch)
    with ampcore.count_host_syncs() as syncs:
        scaler.unscale_(opt)
    assert syncs.count == 0
    assert sorted(len(c) for c in calls) == [2, 10]
    assert all(p.grad.numpy().tolist() == np.ones(p.shape).tolist() for p in f32 + f64)


@settings(max_examples=60, deadline=None)
@given(
    scale=st.floats(min_value=1e-3, max_value=2.0**40, allow_nan=False, allow_infinity=False),
    seed=st.integers(0, 2**32 - 1),
)
def test_unscale_multiplies_by_the_float32_reciprocal_of_the_scale(scale, seed):
    rng = np.random.default_rng(seed)
    g32 = (rng.standard_normal(7) * 1e3).astype(np.float32)
    g64 = rng.standard_normal(5) * 1e3
    p32, p64 = nn.Parameter(ampcore.zeros(7)), nn.Parameter(ampcore.zeros(5, dtype=dt.float64))
    opt = optim.SGD([p32, p64], lr=0.1)
    scaler = started(GradScaler("cpu", init_scale=scale))
    p32.grad, p64.grad = ampcore.tensor(g32), ampcore.tensor(g64, dtype=dt.float64)
    scaler.unscale_(opt)
    inv = np.float32(1) / np.float32(scale)
    np.testing.assert_array_equal(p32.grad.numpy(), g32 * inv)
    np.testing.assert_array_equal(p64.grad.numpy(), g64 * np.float64(inv))


def test_float16_gradients_raise_and_change_nothing():
    p = nn.Parameter(ampcore.tensor([1.0, 2.0], dtype=dt.float16))
    q = nn.Parameter(ampcore.tensor([1.0, 2.0]))
    opt = optim.SGD([q, p], lr=0.1)
    scaler = started(GradScaler("cpu", init_scale=4.0))
    q.grad, p.grad = ampcore.tensor([4.0, 8.0]), ampcore.tensor([4.0, 8.0], dtype=dt.float16)
    with pytest.raises(ValueError, match="float16 gradients"):
        scaler.unscale_(opt)
    assert q.grad.numpy().tolist() == [4.0, 8.0]


def test_bfloat16_gradients_are_unscaled():
    p = nn.Parameter(ampcore.tensor([1.0, 2.0, 3.0], dtype=dt.bfloat16))
    opt = optim.SGD([p], lr=1.0)
    scaler = started(GradScaler("cpu", init_scale=3.0))
    p.grad = ampcore.tensor([3.0, -6.0, 300.0], dtype=dt.bfloat16)
    scaler.unscale_(opt)
    assert p.grad.dtype == dt.bfloat16
    assert p.grad.numpy().astype(np.float32).tolist() == [1.0, -2.0, 100.0]


# --------------------------------------------------------------------------- step(): skipping
@pytest.mark.parametrize("value", [INF, -INF, NAN], ids=["+inf", "-inf", "nan"])
@pytest.mark.parametrize("which", [0, 1], ids=["weight", "bias"])
@pytest.mark.parametrize("position", [0, -1], ids=["first", "last"])
def test_inf_or_nan_gradient_skips_adam_step_bit_for_bit(value, which, position):
    model, x, _ = linear_problem()
    opt = optim.Adam(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**8)
    scaler.scale(mse(model, x)).backward()
    assert scaler.step(opt) is True  # a clean step first, so that there is Adam state to keep
    scaler.update()
    opt.zero_grad()
    params, state = params_of(model), opt_snapshot(opt)
    scaler.scale(mse(model, x)).backward()
    poison(list(model.parameters())[which], value, position)
    assert scaler.step(opt) is False
    assert_same_arrays(params_of(model), params)
    assert_same_opt_state(opt_snapshot(opt), state)
    assert opt_snapshot(opt)[(0, "step")] == 1
    assert scaler.skipped_steps == 1
    scaler.update()
    assert scaler.get_scale() == 2.0**7


def test_inf_gradient_skips_sgd_momentum_step_bit_for_bit():
    model, x, _ = linear_problem()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = GradScaler("cpu", init_scale=2.0**8)
    for poisoned in (False, True):
        opt.zero_grad()
        params, state = params_of(model), opt_snapshot(opt)
        scaler.scale(mse(model, x)).backward()
        if poisoned:
            poison(model.bias, INF, -1)
        assert scaler.step(opt) is (not poisoned)
        scaler.update()
    assert_same_arrays(params_of(model), params)
    assert_same_opt_state(opt_snapshot(opt), state)
    assert set(state) == {(0, "momentum_buffer"), (1, "momentum_buffer")}


def test_step_returns_true_and_updates_like_the_plain_optimizer():
    model, x, _ = linear_problem()
    reference = copy.deepcopy(model)
    ref_opt = optim.Adam(reference.parameters(), lr=0.1)
    mse(reference, x).backward()
    ref_opt.step()
    opt = optim.Adam(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**10)
    scaler.scale(mse(model, x)).backward()
    assert scaler.step(opt) is True and scaler.skipped_steps == 0
    assert_same_arrays(params_of(model), params_of(reference))


# --------------------------------------------------------------------------- update(): the rule
def test_scale_trajectory_and_skipped_steps_follow_the_rule_with_injected_infs():
    bad, n = {2, 5, 6}, 10
    model, x, _ = linear_problem()
    opt = optim.SGD(model.parameters(), lr=0.05)
    scaler = GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    scales, stepped = [], []
    for i in range(n):
        opt.zero_grad()
        before = params_of(model)
        scaler.scale(mse(model, x)).backward()
        if i in bad:
            poison(model.weight, NAN if i == 5 else INF, i % 2 - 1)
        stepped.append(scaler.step(opt))
        scaler.update()
        scales.append(scaler.get_scale())
        if i in bad:
            assert_same_arrays(params_of(model), before)
        else:
            assert not all(np.array_equal(a, b) for a, b in zip(params_of(model), before))
    assert (scales, stepped) == expected_trajectory(n, bad, 2.0**10, interval=2)
    assert scaler.skipped_steps == len(bad)


def test_tracker_counts_clean_steps_and_resets_on_growth_and_on_inf():
    model, x, _ = linear_problem()
    opt = optim.SGD(model.parameters(), lr=0.01)
    scaler = GradScaler("cpu", init_scale=16.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=3)
    seen = []
    for i in range(6):
        opt.zero_grad()
        scaler.scale(mse(model, x)).backward()
        if i == 4:
            poison(model.bias, INF)
        scaler.step(opt)
        scaler.update()
        seen.append((scaler.get_scale(), scaler.get_growth_tracker()))
    assert seen == [(16.0, 1), (16.0, 2), (64.0, 0), (64.0, 1), (16.0, 0), (16.0, 1)]


def test_growth_that_would_overflow_float32_keeps_the_scale():
    p = nn.Parameter(ampcore.tensor([1e-30]))
    opt = optim.SGD([p], lr=0.0)
    scaler = GradScaler("cpu", init_scale=2.0**127, growth_interval=1)
    scaler.scale(p.sum()).backward()
    assert scaler.step(opt) is True
    scaler.update()
    assert scaler.get_scale() == 2.0**127 and scaler.get_growth_tracker() == 0
    assert 2.0**127 * 2.0 > F32_MAX


def test_inf_in_the_second_optimizer_only_backs_off_and_skips_only_that_optimizer():
    m1, x, _ = linear_problem(seed=1)
    m2, _, _ = linear_problem(seed=2)
    o1, o2 = optim.SGD(m1.parameters(), lr=0.1), optim.SGD(m2.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**8)
    before2 = params_of(m2)
    before1 = params_of(m1)
    scaler.scale(mse(m1, x) + mse(m2, x)).backward()
    poison(m2.weight, INF, -1)
    assert scaler.step(o1) is True
    assert scaler.step(o2) is False
    scaler.update()
    assert scaler.get_scale() == 2.0**7 and scaler.get_growth_tracker() == 0 and scaler.skipped_steps == 1
    assert_same_arrays(params_of(m2), before2)
    assert not np.array_equal(params_of(m1)[0], before1[0])


@pytest.mark.parametrize("new_scale", [3.0, ampcore.tensor([3.0])], ids=["float", "tensor"])
def test_update_with_new_scale_sets_it_and_keeps_the_tracker(scaled_sgd, new_scale):
    scaler, opt = scaled_sgd
    scaler.step(opt)
    scaler.update()
    assert scaler.get_growth_tracker() == 1
    scaler.update(new_scale=new_scale)
    assert scaler.get_scale() == 3.0 and scaler.get_growth_tracker() == 1


@pytest.mark.parametrize(
    "bad",
    [0.0, -2.0, INF, NAN, 1e39, ampcore.tensor([1.0, 2.0]), ampcore.tensor([2.0], requires_grad=True)],
    ids=["zero", "negative", "inf", "nan", "inf-in-float32", "2-element", "requires-grad"],
)
def test_bad_new_scale_raises_and_keeps_the_scale(bad):
    scaler = started(GradScaler("cpu", init_scale=8.0))
    with pytest.raises(ValueError, match="new_scale"):
        scaler.update(new_scale=bad)
    assert scaler.get_scale() == 8.0


def run_always(scaler, steps, bad=()):
    """``steps`` iterations of a tiny problem (inf injected at ``bad``); the scale after each update."""
    p = nn.Parameter(ampcore.tensor([0.5, -1.5]))
    opt = optim.SGD([p], lr=0.01)
    scales = []
    for i in range(steps):
        opt.zero_grad()
        scaler.scale((p * p).sum()).backward()
        if i in bad:
            poison(p, INF)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales


def test_max_scale_caps_growth_and_min_scale_floors_backoff():
    grow = GradScaler("cpu", init_scale=4.0, growth_interval=1, max_scale=20.0)
    assert run_always(grow, 4) == [8.0, 16.0, 20.0, 20.0]
    shrink = GradScaler("cpu", init_scale=4.0, min_scale=0.75, stall_warning_after=None)
    assert run_always(shrink, 4, bad=range(4)) == [2.0, 1.0, 0.75, 0.75]


def test_scales_outside_min_max_are_rejected_where_they_enter():
    with pytest.raises(ValueError, match=r"init_scale 65536.0 is outside \[min_scale, max_scale\] = \[None, 1024.0\]"):
        GradScaler("cpu", init_scale=2.0**16, max_scale=1024.0)
    scaler = started(GradScaler("cpu", init_scale=8.0, min_scale=2.0, max_scale=64.0))
    with pytest.raises(ValueError, match=r"new_scale 128.0 is outside"):
        scaler.update(new_scale=128.0)
    with pytest.raises(ValueError, match=r"scale 1.0 is outside"):
        scaler.load_state_dict({**scaler.state_dict(), "scale": 1.0})
    assert scaler.get_scale() == 8.0


def test_a_tensor_new_scale_is_copied_on_the_device_without_a_host_read(scaled_sgd):
    scaler, opt = scaled_sgd
    scaler.step(opt)
    value = ampcore.tensor([3.0])
    with ampcore.count_host_syncs() as syncs:
        scaler.update(new_scale=value)
    assert syncs.count == 0
    value.fill_(5.0)  # a copy: later changes to the caller's tensor do not move the scale
    assert scaler.get_scale() == 3.0


# --------------------------------------------------------------------------- stall warning
def test_stall_warning_once_after_n_backoffs_in_a_row_and_rearmed_by_a_clean_step():
    scaler = GradScaler("cpu", init_scale=2.0**10, stall_warning_after=3)
    p = nn.Parameter(ampcore.tensor([1.0]))
    opt = optim.SGD([p], lr=0.1)
    counts = []
    for i in range(9):
        opt.zero_grad()
        scaler.scale(p.sum()).backward()
        if i != 5:
            poison(p, INF)
        scaler.step(opt)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scaler.update()
        stalls = [w for w in caught if "in a row" in str(w.message)]
        assert all(issubclass(w.category, UserWarning) for w in stalls)
        if stalls:
            assert "backed off 3 iterations in a row" in str(stalls[0].message)
        counts.append(len(stalls))
    # infs at 0-4 (warn at the 3rd), clean at 5, infs at 6-8 (warn again at the 3rd)
    assert counts == [0, 0, 1, 0, 0, 0, 0, 0, 1]


# --------------------------------------------------------------------------- getters, setters, state dicts
def test_setters_validate_and_change_the_factors():
    scaler = GradScaler("cpu")
    scaler.set_growth_factor(3.0)
    scaler.set_backoff_factor(0.25)
    scaler.set_growth_interval(7)
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(), scaler.get_growth_interval()) == (3.0, 0.25, 7)
    with pytest.raises(ValueError, match=r"growth_factor .*got 0\.9"):
        scaler.set_growth_factor(0.9)
    with pytest.raises(ValueError, match=r"backoff_factor .*got 1\.0"):
        scaler.set_backoff_factor(1.0)
    with pytest.raises(ValueError, match=r"growth_interval .*got 0"):
        scaler.set_growth_interval(0)
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(), scaler.get_growth_interval()) == (3.0, 0.25, 7)


def test_setters_take_effect_in_the_next_update():
    scaler = GradScaler("cpu", init_scale=8.0, growth_interval=100)
    scaler.set_growth_interval(1)
    scaler.set_growth_factor(4.0)
    assert run_always(scaler, 1) == [32.0]
    scaler.set_backoff_factor(0.125)
    assert run_always(scaler, 1, bad={0}) == [4.0]


def test_state_dict_has_torchs_keys():
    scaler = GradScaler("cpu", init_scale=8.0, growth_factor=3.0, backoff_factor=0.25, growth_interval=5)
    assert scaler.state_dict() == {
        "scale": 8.0,
        "growth_factor": 3.0,
        "backoff_factor": 0.25,
        "growth_interval": 5,
        "_growth_tracker": 0,
        "skipped_steps": 0,
    }


def test_load_state_dict_before_the_first_scale_is_used_by_the_lazy_scale():
    saved = {
        "scale": 32.0,
        "growth_factor": 4.0,
        "backoff_factor": 0.25,
        "growth_interval": 3,
        "_growth_tracker": 2,
        "skipped_steps": 5,
    }
    scaler = GradScaler("cpu")
    scaler.load_state_dict(saved)
    assert scaler._scale is None and scaler.state_dict() == saved
    assert run_always(scaler, 1) == [128.0]  # tracker 2 -> 3 == interval: grows by 4
    assert scaler.get_growth_tracker() == 0 and scaler.skipped_steps == 5


def test_load_state_dict_after_scale_replaces_the_device_scale():
    scaler = started(GradScaler("cpu"))
    scaler.load_state_dict(
        {"scale": 2.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 4, "_growth_tracker": 1}
    )
    assert scaler.get_scale() == 2.0 and scaler.get_growth_tracker() == 1


GOOD = {
    "scale": 16.0,
    "growth_factor": 2.0,
    "backoff_factor": 0.5,
    "growth_interval": 4,
    "_growth_tracker": 1,
    "skipped_steps": 2,
}


@pytest.mark.parametrize(
    "change, error",
    [
        (dict(scale=0.0), ValueError),
        (dict(scale=-1.0), ValueError),
        (dict(scale=INF), ValueError),
        (dict(growth_factor=1.0), ValueError),
        (dict(backoff_factor=1.5), ValueError),
        (dict(growth_interval=0), ValueError),
        (dict(_growth_tracker=4), ValueError),
        (dict(_growth_tracker=-1), ValueError),
        (dict(_growth_tracker=1.5), ValueError),
        (dict(skipped_steps=-1), ValueError),
        (dict(scale=None), ValueError),
    ],
)
@pytest.mark.parametrize("after_scale", [False, True], ids=["lazy", "started"])
def test_bad_state_dict_raises_and_changes_nothing(change, error, after_scale):
    scaler = GradScaler("cpu", init_scale=8.0, growth_interval=10)
    if after_scale:
        started(scaler)
    before = scaler.state_dict()
    with pytest.raises(error):
        scaler.load_state_dict({**GOOD, **change})
    assert scaler.state_dict() == before


def test_state_dict_missing_a_key_raises_and_changes_nothing():
    scaler = GradScaler("cpu", init_scale=8.0)
    bad = {k: v for k, v in GOOD.items() if k != "growth_factor"}
    with pytest.raises(ValueError, match="growth_factor"):
        scaler.load_state_dict(bad)
    assert scaler.get_scale() == 8.0


def test_empty_state_dict_raises_runtime_error():
    with pytest.raises(RuntimeError, match="empty"):
        GradScaler("cpu").load_state_dict({})


def amp_run(model, opt, scaler, batches, bad, start=0):
    """AMP training steps ``start..len(batches)-1`` (float16 autocast), inf injected at ``bad``."""
    results = []
    for i in range(start, len(batches)):
        x, y = batches[i]
        opt.zero_grad()
        with ampcore.autocast("cpu", dtype="float16"):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        if i in bad:
            poison(model[0].weight, INF if i % 2 else NAN, i % 3 - 1)
        results.append(scaler.step(opt))
        scaler.update()
    return results


def mlp(seed):
    ampcore.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def test_resumed_training_is_bit_identical_to_an_uninterrupted_run():
    rng = np.random.default_rng(3)
    batches = [
        (ampcore.tensor(rng.standard_normal((6, 4)), dtype=dt.float32), ampcore.tensor(rng.integers(0, 3, 6)))
        for _ in range(12)
    ]
    bad, k = {1, 6, 7, 10}, 5

    def fresh(seed):
        model = mlp(seed)
        return model, optim.AdamW(model.parameters(), lr=0.01), GradScaler("cpu", init_scale=2.0**10, growth_interval=3)

    model, opt, scaler = fresh(0)
    straight = amp_run(model, opt, scaler, batches, bad)

    model_a, opt_a, scaler_a = fresh(0)
    first = amp_run(model_a, opt_a, scaler_a, batches[:k], bad)
    ckpt = copy.deepcopy({"model": model_a.state_dict(), "opt": opt_a.state_dict(), "scaler": scaler_a.state_dict()})
    del model_a, opt_a, scaler_a

    model_b, opt_b, scaler_b = fresh(99)
    scaler_b = GradScaler("cpu")  # other settings: all come from the checkpoint
    model_b.load_state_dict(ckpt["model"])
    opt_b.load_state_dict(ckpt["opt"])
    scaler_b.load_state_dict(ckpt["scaler"])
    rest = amp_run(model_b, opt_b, scaler_b, batches, bad, start=k)

    assert first + rest == straight
    assert straight == [i not in bad for i in range(12)]
    assert_same_arrays(params_of(model_b), params_of(model))
    assert scaler_b.state_dict() == scaler.state_dict()
    assert_same_opt_state(opt_snapshot(opt_b), opt_snapshot(opt))


# --------------------------------------------------------------------------- usage patterns
def test_clipping_after_unscale_sees_unscaled_gradients():
    model, x, _ = linear_problem(batch=8)
    reference = copy.deepcopy(model)
    ref_opt = optim.SGD(reference.parameters(), lr=0.1)
    mse(reference, x).backward()
    ref_norm = clip_grad_norm_(reference.parameters(), max_norm=0.01).item()
    ref_opt.step()

    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**14)
    scaler.scale(mse(model, x)).backward()
    scaler.unscale_(opt)
    norm = clip_grad_norm_(model.parameters(), max_norm=0.01).item()
    assert norm > 0.01  # clipping happened
    assert norm == pytest.approx(ref_norm, rel=1e-6)
    assert scaler.step(opt) is True
    scaler.update()
    for a, e in zip(params_of(model), params_of(reference)):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


def test_gradient_accumulation_matches_one_big_batch():
    model, x, _ = linear_problem(batch=8)
    reference = copy.deepcopy(model)
    mse(reference, x).backward()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**10)
    chunks = 4
    for c in range(chunks):
        scaler.scale(mse(model, x[2 * c : 2 * c + 2]) / chunks).backward()
    scaler.unscale_(opt)
    for p, r in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), r.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert scaler.step(opt) is True


def test_several_losses_each_scaled_and_backpropagated():
    model, x, _ = linear_problem()
    reference = copy.deepcopy(model)
    (mse(reference, x) + reference(x).sum()).backward()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**6)
    scaler.scale(mse(model, x)).backward()
    scaler.scale(model(x).sum()).backward()
    scaler.unscale_(opt)
    for p, r in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), r.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_one_scaler_two_optimizers_both_step_and_one_update():
    m1, x, _ = linear_problem(seed=1)
    m2, _, _ = linear_problem(seed=2)
    r1, r2 = copy.deepcopy(m1), copy.deepcopy(m2)
    (mse(r1, x) + mse(r2, x)).backward()
    optim.SGD(r1.parameters(), lr=0.1).step()
    optim.SGD(r2.parameters(), lr=0.1).step()
    o1, o2 = optim.SGD(m1.parameters(), lr=0.1), optim.SGD(m2.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**8, growth_interval=1)
    scaler.scale(mse(m1, x) + mse(m2, x)).backward()
    assert scaler.step(o1) is True and scaler.step(o2) is True
    scaler.update()
    assert scaler.get_scale() == 2.0**9
    assert_same_arrays(params_of(m1), params_of(r1))
    assert_same_arrays(params_of(m2), params_of(r2))


# --------------------------------------------------------------------------- disabled scalers
def test_disabled_scaler_is_a_pass_through():
    model, x, _ = linear_problem()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", enabled=False)
    loss = mse(model, x)
    outputs = [loss, (loss,)]
    assert scaler.scale(loss) is loss and scaler.scale(outputs) is outputs
    loss.backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    scaler.unscale_(opt)
    assert_same_arrays([p.grad.numpy() for p in model.parameters()], grads)
    before = params_of(model)
    calls = []

    def closure():
        calls.append(1)
        return "loss"

    assert scaler.step(opt, closure) == "loss" and calls == [1]
    assert not np.array_equal(params_of(model)[0], before[0])
    scaler.update()
    scaler.update(new_scale=123.0)
    assert scaler.state_dict() == {} and scaler.get_scale() == 1.0 and not scaler.is_enabled()
    scaler.load_state_dict(GOOD)
    assert scaler.state_dict() == {} and scaler.get_scale() == 1.0


def test_for_dtype_enables_only_float16():
    assert GradScaler.for_dtype("bfloat16", "cpu").is_enabled() is False
    assert GradScaler.for_dtype(dt.float32, "cpu").is_enabled() is False
    assert GradScaler.for_dtype("float16").is_enabled() is True
    assert GradScaler.for_dtype(dt.float16, "cpu", enabled=False).is_enabled() is False
    assert GradScaler.for_dtype("float16", "cpu", init_scale=4.0).get_scale() == 4.0


def test_for_dtype_none_follows_the_backends_autocast_dtype(register_fake):
    assert ampcore.get_backend("cpu").capabilities().autocast_dtype == dt.bfloat16
    assert GradScaler.for_dtype(None, "cpu").is_enabled() is False
    fake = register_fake(autocast_dtype=dt.float16)
    assert GradScaler.for_dtype(None, fake.name).is_enabled() is True


# --------------------------------------------------------------------------- warnings
def test_enabled_scaler_after_bfloat16_autocast_warns_once():
    model, x, _ = linear_problem()
    scaler = GradScaler("cpu")
    with pytest.warns(UserWarning, match="bfloat16") as caught:
        for _ in range(2):
            with ampcore.autocast("cpu", dtype="bfloat16"):
                loss = mse(model, x)
            scaler.scale(loss)
    assert len([w for w in caught if "bfloat16" in str(w.message)]) == 1


def test_step_on_gradients_that_were_not_scaled_warns_once():
    model, x, _ = linear_problem()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**8)
    scaler.scale(mse(model, x)).backward()
    scaler.step(opt)
    scaler.update()
    for attempt in range(2):  # the mistake, twice: one warning
        opt.zero_grad()
        loss = mse(model, x)
        scaler.scale(loss)  # computed, but not the tensor backward() runs on
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loss.backward()
            scaler.step(opt)
            scaler.update()
        mistakes = [w for w in caught if "scaler.scale(loss).backward()" in str(w.message)]
        assert len(mistakes) == (1 if attempt == 0 else 0)
        assert all(issubclass(w.category, UserWarning) for w in mistakes)


def test_correct_amp_usage_emits_no_warning():
    model = mlp(0)
    opt = optim.AdamW(model.parameters(), lr=0.01)
    scaler = GradScaler("cpu", growth_interval=2)
    x, y = ampcore.randn(5, 4), ampcore.tensor([0, 1, 2, 0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            opt.zero_grad()
            with ampcore.autocast("cpu", dtype="float16"):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()


# --------------------------------------------------------------------------- host syncs
def test_amp_iteration_makes_exactly_one_host_sync_and_scale_unscale_update_none():
    model = mlp(0)
    opt = optim.AdamW(model.parameters(), lr=0.01)
    scaler = GradScaler("cpu")
    x, y = ampcore.randn(5, 4), ampcore.tensor([0, 1, 2, 0, 1])
    for _ in range(2):  # the first iteration creates the scale; the second has nothing lazy left
        opt.zero_grad()
        counts = {}
        with ampcore.count_host_syncs() as syncs:
            with ampcore.autocast("cpu", dtype="float16"):
                loss = F.cross_entropy(model(x), y)  # queues a device-side class-range check
        counts["forward"] = syncs.count
        with ampcore.count_host_syncs() as syncs:
            scaled = scaler.scale(loss)
        counts["scale"] = syncs.count
        with ampcore.count_host_syncs() as syncs:
            scaled.backward()
        counts["backward"] = syncs.count
        with ampcore.count_host_syncs() as syncs:
            scaler.unscale_(opt)
        counts["unscale_"] = syncs.count
        with ampcore.count_host_syncs() as syncs:
            assert scaler.step(opt) is True
        counts["step"] = syncs.count
        with ampcore.count_host_syncs() as syncs:
            scaler.update()
        counts["update"] = syncs.count
        assert counts == {"forward": 0, "scale": 0, "backward": 0, "unscale_": 0, "step": 1, "update": 0}


def test_step_without_unscale_makes_one_host_sync_for_flag_and_queued_checks():
    model = mlp(0)
    opt = optim.SGD(model.parameters(), lr=0.01)
    scaler = GradScaler("cpu")
    x, y = ampcore.randn(5, 4), ampcore.tensor([0, 1, 2, 0, 1])
    with ampcore.count_host_syncs() as syncs:
        with ampcore.autocast("cpu", dtype="float16"):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    assert syncs.count == 1


def test_a_failed_queued_check_is_raised_by_step_before_anything_changes():
    model = mlp(0)
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu")
    before = params_of(model)
    with ampcore.autocast("cpu", dtype="float16"):
        loss = F.cross_entropy(model(ampcore.randn(2, 4)), ampcore.tensor([1, 7]))
    scaler.scale(loss).backward()
    with pytest.raises(ValueError, match="target class 7 is out of range"):
        scaler.step(opt)
    assert_same_arrays(params_of(model), before)


def test_two_optimizers_make_one_host_sync_each():
    m1, m2 = mlp(1), mlp(2)
    o1, o2 = optim.SGD(m1.parameters(), lr=0.1), optim.SGD(m2.parameters(), lr=0.1)
    scaler = GradScaler("cpu")
    x, y = ampcore.randn(5, 4), ampcore.tensor([0, 1, 2, 0, 1])
    with ampcore.count_host_syncs() as syncs:
        with ampcore.autocast("cpu", dtype="float16"):
            loss = F.cross_entropy(m1(x), y) + F.cross_entropy(m2(x), y)
        scaler.scale(loss).backward()
        scaler.step(o1)
        scaler.step(o2)
        scaler.update()
    assert syncs.count == 2


# --------------------------------------------------------------------------- torch parity
def test_scale_trajectory_and_skips_match_torch():
    torch = pytest.importorskip("torch")
    if not hasattr(torch.amp, "GradScaler"):
        pytest.skip("torch.amp.GradScaler needs torch >= 2.3")
    bad, n = {1, 2, 6, 9, 10}, 14
    w0 = np.random.default_rng(0).standard_normal(4).astype(np.float32)
    x0 = np.random.default_rng(1).standard_normal(4).astype(np.float32)

    class PlainSGD:
        """Just what torch's GradScaler needs of an optimizer (torch.optim's first step costs seconds of imports)."""

        def __init__(self, params, lr):
            self.param_groups, self.lr = [{"params": params}], lr

        def step(self):
            with torch.no_grad():
                for p in self.param_groups[0]["params"]:
                    p -= self.lr * p.grad

        def zero_grad(self):
            for p in self.param_groups[0]["params"]:
                p.grad = None

    tw = torch.nn.Parameter(torch.tensor(w0))
    t_opt = PlainSGD([tw], lr=0.01)
    t_scaler = torch.amp.GradScaler("cpu", init_scale=2.0**9, growth_interval=2)
    t_scales, t_stepped = [], []
    for i in range(n):
        t_opt.zero_grad()
        before = tw.detach().clone()
        t_scaler.scale((tw * torch.tensor(x0)).square().sum()).backward()
        if i in bad:
            tw.grad[i % 4] = float("inf") if i % 2 else float("nan")
        t_scaler.step(t_opt)
        t_scaler.update()
        t_scales.append(t_scaler.get_scale())
        t_stepped.append(not torch.equal(before, tw.detach()))

    aw = nn.Parameter(ampcore.tensor(w0))
    a_opt = optim.SGD([aw], lr=0.01)
    a_scaler = GradScaler("cpu", init_scale=2.0**9, growth_interval=2)
    a_scales, a_stepped = [], []
    for i in range(n):
        a_opt.zero_grad()
        a_scaler.scale(((aw * ampcore.tensor(x0)) ** 2).sum()).backward()
        if i in bad:
            poison(aw, INF if i % 2 else NAN, i % 4)
        a_stepped.append(a_scaler.step(a_opt))
        a_scaler.update()
        a_scales.append(a_scaler.get_scale())

    assert a_scales == t_scales and a_stepped == t_stepped
    assert t_stepped == [i not in bad for i in range(n)]
    np.testing.assert_allclose(aw.numpy(), tw.detach().numpy(), rtol=1e-6)
    t_state = t_scaler.state_dict()
    assert {k: a_scaler.state_dict()[k] for k in t_state} == t_state


def test_the_grad_scaler_guide_examples_run(run_python):
    guide = (Path(__file__).resolve().parents[1] / "docs" / "grad-scaler.md").read_text()
    blocks = [b.split("\n", 1)[1] for b in guide.split("```")[1::2] if b.startswith("python\n")]
    assert len(blocks) >= 3
    proc = run_python("import warnings\nwarnings.simplefilter('error')\n" + "\n".join(blocks))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:3] == ["True", "65536.0", "0"]


# --------------------------------------------------------------------------- a kernel failing inside unscale_
def test_after_unscale_fails_midway_a_retry_is_refused_and_fresh_gradients_step(register_fake):
    """Gradients in two dtypes are two unscale_and_check calls; the second fails after the first unscaled its
    group in place. Stepping those gradients again would unscale them twice: refused with the remedy. A fresh
    scaled backward (or update()) starts over, and the step is then exactly the clean one."""
    fake = register_fake()
    model = nn.Sequential(nn.Linear(3, 2, device=fake.name), nn.Linear(2, 2, device=fake.name, dtype="float64"))
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler(fake.name)
    x = ampcore.ones(4, 3, device=fake.name)

    def backward() -> None:
        opt.zero_grad()
        # the float64 layer takes float64 input: a matrix product needs one dtype, as in torch
        scaler.scale(model[1](model[0](x).double()).to("float32").sum()).backward()

    backward()
    fake.fail_on = ("unscale_and_check", fake.calls.get("unscale_and_check", 0) + 2)
    with pytest.raises(ampcore.KernelError, match="kernel 'unscale_and_check'"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="may be partly unscaled; redo the iteration"):
        scaler.step(opt)
    before = params_of(model)
    backward()
    assert scaler.step(opt) is True
    scaler.update()
    clean = nn.Sequential(nn.Linear(3, 2, device=fake.name), nn.Linear(2, 2, device=fake.name, dtype="float64"))
    clean.load_state_dict(dict(zip(clean.state_dict(), before)))
    clean_opt = optim.SGD(clean.parameters(), lr=0.1)
    clean_opt.zero_grad()
    clean[1](clean[0](x).double()).to("float32").sum().backward()
    clean_opt.step()
    assert_same_arrays(params_of(model), params_of(clean))
