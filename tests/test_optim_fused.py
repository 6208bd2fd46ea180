"""torch's ``foreach=`` / ``fused=`` options, and the fused AMP step that skips on the device (0 host syncs)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ampcore
from ampcore import nn
from ampcore.optim import SGD, Adam, AdamW


def _model():
    ampcore.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


def _bits(model):
    return [p.numpy().tobytes() for p in model.parameters()]


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_foreach_and_fused_are_accepted_and_kept_in_the_param_groups(cls):
    opt = cls(_model().parameters(), lr=0.1, foreach=True)
    assert opt.param_groups[0]["foreach"] is True and opt.param_groups[0]["fused"] is None
    assert opt.state_dict()["param_groups"][0]["foreach"] is True


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_fused_and_foreach_together_or_not_bools_are_refused(cls):
    params = list(_model().parameters())
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
        cls(params, lr=0.1, foreach=True, fused=True)
    with pytest.raises(TypeError, match="fused must be None, True or False, got 'yes'"):
        cls(params, lr=0.1, fused="yes")


def test_unsupported_fused_combinations_name_the_option(register_fake):
    params = list(_model().parameters())
    with pytest.raises(ValueError, match=r"SGD\(fused=True\) is not supported"):
        SGD(params, lr=0.1, fused=True)
    with pytest.raises(ValueError, match=r"Adam\(fused=True\) does not support amsgrad=True"):
        Adam(params, fused=True, amsgrad=True)
    fake = register_fake()
    w = ampcore.zeros(3, device=fake.name, requires_grad=True)
    with pytest.raises(
        ValueError, match=rf"AdamW\(fused=True\): backend\(s\) \['{fake.name}'\] have no fused adamw_step"
    ):
        AdamW([w], fused=True)
    AdamW([w], fused=None)  # the default picks the reference composition there


@pytest.mark.parametrize("cls", [Adam, AdamW])
@pytest.mark.parametrize("dtype", [ampcore.float32, ampcore.bfloat16])
def test_fused_true_false_and_none_give_the_same_bits(cls, dtype):
    runs = []
    for fused in (True, False, None):
        model = _model().to(dtype)
        opt = cls(model.parameters(), lr=1e-2, weight_decay=0.1, fused=fused)
        ampcore.manual_seed(1)
        for _ in range(4):
            opt.zero_grad()
            (model(ampcore.randn(4, 6).to(dtype)).float() ** 2).mean().backward()
            opt.step()
        runs.append(_bits(model))
    assert runs[0] == runs[1] == runs[2]


def _amp_run(fused, steps=8, overflow_at=(2, 5), bad_label_at=()):
    model = _model()
    opt = AdamW(model.parameters(), lr=1e-2, fused=fused)
    scaler = ampcore.GradScaler("cpu", init_scale=2.0**14, growth_interval=3)
    ampcore.manual_seed(1)
    losses, syncs, results = [], [], []
    for i in range(steps):
        x = ampcore.randn(4, 6) * (1e6 if i in overflow_at else 1.0)
        y = ampcore.tensor([0, 1, 7 if i in bad_label_at else 2, 1])
        opt.zero_grad()
        with ampcore.count_host_syncs() as counter:
            with ampcore.autocast("cpu", dtype=ampcore.float16):
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            results.append(scaler.step(opt))
            scaler.update()
        syncs.append(counter.count)
        losses.append(loss)
    return model, opt, scaler, losses, syncs, results


def test_fused_amp_step_skips_on_the_device_with_no_host_sync_and_matches_unfused_bit_for_bit():
    model_f, opt_f, scaler_f, losses_f, syncs_f, results_f = _amp_run(fused=True)
    model_u, opt_u, scaler_u, losses_u, syncs_u, results_u = _amp_run(fused=False)
    assert syncs_f == [0] * 8 and syncs_u == [1] * 8
    assert results_f == [None] * 8 and results_u == [True, True, False, True, True, False, True, True]
    assert [t.numpy().tobytes() for t in losses_f] == [t.numpy().tobytes() for t in losses_u]
    assert _bits(model_f) == _bits(model_u)
    assert scaler_f.skipped_steps == scaler_u.skipped_steps == 2 and scaler_f.get_scale() == scaler_u.get_scale()
    sd_f, sd_u = opt_f.state_dict(), opt_u.state_dict()
    for pid, st in sd_u["state"].items():
        assert int(sd_f["state"][pid]["step"].item()) == st["step"] == 6  # the skipped steps were not counted
        assert sd_f["state"][pid]["exp_avg"].numpy().tobytes() == st["exp_avg"].numpy().tobytes()


def test_a_fused_amp_checkpoint_resumes_in_an_unfused_optimizer():
    model, opt, scaler, *_ = _amp_run(fused=True, steps=3)
    fresh = AdamW(model.parameters(), lr=1e-2, fused=False)
    fresh.load_state_dict(opt.state_dict())
    assert all(st["step"] == 2 for st in fresh.state.values())


def test_a_failed_label_check_skips_the_fused_step_and_raises_at_the_next_read():
    model = _model()
    opt = AdamW(model.parameters(), lr=1e-2, fused=True)
    scaler = ampcore.GradScaler("cpu")
    before = _bits(model)
    with ampcore.autocast("cpu", dtype=ampcore.float16):
        loss = nn.functional.cross_entropy(model(ampcore.randn(4, 6)), ampcore.tensor([0, 1, 9, 1]))
    scaler.scale(loss).backward()
    with ampcore.count_host_syncs() as counter:
        scaler.step(opt)
        scaler.update()
    assert counter.count == 0
    with pytest.raises(ValueError, match="target class 9 is out of range"):
        loss.item()
    assert _bits(model) == before
    assert scaler.get_scale() == 2.0**16  # a bad label is not an overflow: the scale did not back off


def test_unfused_amp_keeps_the_one_read_path_and_its_return_value():
    *_, syncs, results = _amp_run(fused=None, steps=3, overflow_at=(1,))
    assert syncs == [1, 1, 1] and results == [True, False, True]


def test_adamw_step_amp_kernel_writes_nothing_when_skip_is_set():
    k = ampcore.get_backend("cpu").kernels
    p, g = np.ones(3, np.float32), np.full(3, 0.5, np.float32)
    m, v = np.zeros(3, np.float32), np.zeros(3, np.float32)
    steps, hyper = np.zeros(1, np.float32), dict(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0)
    out = k.adamw_step_amp([p], [g], [m], [v], steps, np.ones(1, np.float32), decoupled=True, **hyper)
    assert out[3][0] == 0 and (out[0][0] == 1).all() and (out[1][0] == 0).all()
    out = k.adamw_step_amp([p], [g], [m], [v], steps, np.zeros(1, np.float32), decoupled=True, **hyper)
    ref = k.adamw_step(
        [np.ones(3, np.float32)],
        [g],
        [np.zeros(3, np.float32)],
        [np.zeros(3, np.float32)],
        step=1,
        decoupled=True,
        **hyper,
    )
    assert out[3][0] == 1 and out[0][0].tobytes() == ref[0][0].tobytes()


@pytest.mark.parametrize("skip", [0.0, 1.0])
@pytest.mark.parametrize("decoupled", [True, False])
@pytest.mark.parametrize("param_dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64], ids=str)
def test_the_cpu_kernel_is_the_reference_composition_bit_for_bit(skip, decoupled, param_dtype):
    from ampcore.optim.adam import adamw_step_amp_reference

    k = ampcore.get_backend("cpu").kernels
    rng = np.random.default_rng(0)
    mdt = np.float64 if param_dtype is np.float64 else np.float32

    def inputs():
        r = np.random.default_rng(1)
        return (
            [r.standard_normal((3, 4)).astype(param_dtype), r.standard_normal(5).astype(param_dtype)],
            [r.standard_normal((3, 4)).astype(param_dtype), r.standard_normal(5).astype(param_dtype)],
            [r.standard_normal((3, 4)).astype(mdt), r.standard_normal(5).astype(mdt)],
            [r.random((3, 4)).astype(mdt), r.random(5).astype(mdt)],
        )

    hyper = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, decoupled=decoupled)
    steps, flag = np.full(1, float(rng.integers(0, 50)), np.float32), np.full(1, skip, np.float32)
    ref = adamw_step_amp_reference(k, *inputs(), steps.copy(), flag, **hyper)
    got = k.adamw_step_amp(*inputs(), steps.copy(), flag, **hyper)
    for r, g in zip(ref[:3], got[:3]):
        assert [a.tobytes() for a in r] == [a.tobytes() for a in g]
    assert ref[3].tobytes() == got[3].tobytes() == (steps + (skip == 0)).tobytes()
    if skip:
        assert [a.tobytes() for a in got[0]] == [a.tobytes() for a in inputs()[0]]


def test_queued_checks_are_compacted_by_fused_steps_and_the_first_failure_is_raised():
    from ampcore import syncs

    model = _model()
    opt = AdamW(model.parameters(), lr=1e-2, fused=True)
    scaler = ampcore.GradScaler("cpu")
    for i in range(3 * syncs.MAX_PENDING_CHECKS):  # more steps than the queue holds: no read is forced
        opt.zero_grad()
        with ampcore.count_host_syncs() as counter:
            with ampcore.autocast("cpu", dtype=ampcore.float16):
                target = ampcore.tensor([0, 1, 5 if i == 70 else 2, 1])
                loss = nn.functional.cross_entropy(model(ampcore.randn(4, 6)), target)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        assert counter.count == 0
        assert len(syncs._state.pending[ampcore.device("cpu")]) == 1
    with pytest.raises(RuntimeError, match="more than 64 checks were queued"):
        loss.item()  # the step-70 failure was beyond the kept details, and is still reported
    # Once a check has failed, every later step skips too, until the read that raises it: steps 0..69 counted.
    assert all(int(st["step"].item()) == 70 for st in opt.state.values())
