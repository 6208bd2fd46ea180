"""End to end: the digits MLP trains in float32 to a useful accuracy, reproducibly, on the device it is given."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ampcore.data import load_digits, train_test_split
from ampcore.training import TrainConfig, train


def test_digits_are_the_shipped_1797_images_scaled_to_unit_range():
    x, y = load_digits()
    assert x.shape == (1797, 64) and x.dtype == np.float32 and y.shape == (1797,) and y.dtype == np.int64
    assert x.min() == 0.0 and x.max() == 1.0
    assert np.bincount(y).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def test_split_is_seeded_disjoint_and_stratified():
    x, y = load_digits()
    rows = np.arange(len(y), dtype=np.float32)[:, None]
    r_tr, y_tr, r_te, y_te = train_test_split(rows, y, 0.2, seed=3)
    assert len(r_te) == 359 and len(r_tr) + len(r_te) == len(y)
    assert not set(r_tr[:, 0]) & set(r_te[:, 0])
    assert np.all(np.abs(np.bincount(y_te) - 0.2 * np.bincount(y)) <= 0.5)
    again = train_test_split(rows, y, 0.2, seed=3)
    assert np.array_equal(again[2], r_te) and not np.array_equal(train_test_split(rows, y, 0.2, seed=4)[2], r_te)
    with pytest.raises(ValueError, match="test_fraction must be between 0 and 1"):
        train_test_split(x, y, 1.0)


def test_digits_mlp_reaches_90_percent_test_accuracy_in_float32_on_cpu():
    start = time.perf_counter()
    result = train(TrainConfig(device="cpu", dtype="float32", seed=0))
    assert result.test_accuracy >= 0.9, result
    assert result.train_accuracy >= 0.95, result
    assert result.epoch_losses[-1] < result.epoch_losses[0] / 5, result.epoch_losses
    assert result.device == "cpu" and result.steps == 23 * result.epochs
    # About 1.5 s on 2 idle cores; the bound only catches pathological slowdowns, not load from neighbours.
    assert 0 < result.seconds < time.perf_counter() - start < 120


def test_same_seed_gives_the_same_run_and_another_seed_does_not():
    first, again = (train(TrainConfig(device="cpu", epochs=2, seed=7)) for _ in range(2))
    other = train(TrainConfig(device="cpu", epochs=2, seed=8))
    assert first.epoch_losses == again.epoch_losses and first.test_accuracy == again.test_accuracy
    assert other.epoch_losses != first.epoch_losses


def test_training_runs_on_the_device_it_is_given(register_fake):
    fake = register_fake()
    reports = []
    result = train(
        TrainConfig(device=fake.name, epochs=2, batch_size=256, dtype="float16", progress_every=4),
        on_progress=reports.append,
    )
    assert result.device == fake.name and result.dtype == "float16" and result.amp
    assert fake.calls["matmul"] >= 3 * result.steps
    assert fake.calls["unscale_and_check"] == fake.calls["update_scale"] == result.steps
    # every 4th step and at each epoch's end (6 steps per epoch)
    assert [r.step for r in reports] == [4, 6, 8, 12] and reports[-1].total_steps == result.steps == 12
    assert all(r.loss_scale == 2.0**16 and r.skipped_steps == 0 for r in reports)


@pytest.fixture(scope="module")
def fp32_run():
    return train(TrainConfig(device="cpu", amp=False, seed=0))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_amp_training_on_cpu_reaches_the_float32_accuracy_within_one_point(fp32_run, dtype):
    amp = train(TrainConfig(device="cpu", dtype=dtype, seed=0))
    assert amp.dtype == dtype and amp.amp and fp32_run.dtype == "float32" and not fp32_run.amp
    assert fp32_run.test_accuracy >= 0.9, fp32_run
    assert amp.test_accuracy >= fp32_run.test_accuracy - 0.01, (amp, fp32_run)
    assert amp.epoch_losses[-1] < amp.epoch_losses[0] / 5, amp.epoch_losses
    if dtype == "float16":  # the scaler runs, and on clean digits no step overflows
        assert amp.loss_scale == 2.0**16 and amp.skipped_steps == 0
    else:  # bfloat16 needs no scaler
        assert amp.loss_scale is None


def test_a_float16_training_step_reads_nothing_from_the_host():
    # The fused AdamW under the GradScaler skips on the device (adamw_step_amp) and the label checks stay queued.
    result = train(TrainConfig(device="cpu", epochs=1, dtype="float16", compile=False))
    assert result.host_syncs_per_step == 0.0 and result.host_syncs_by_reason == {}


def test_a_float32_training_step_syncs_with_the_host_exactly_once():
    result = train(TrainConfig(device="cpu", epochs=1, amp=False, compile=False))  # the optimizer reads the checks
    assert result.host_syncs_per_step == 1.0 and result.host_syncs_by_reason == {"checks": result.steps}


@pytest.mark.parametrize("amp", [True, False])
def test_a_captured_training_step_reads_nothing_from_the_host(amp):
    # Captured (the default), float32 too: the optimizer skips on the device where a label check failed, and the
    # checks stay queued (read at the end, with the losses).
    result = train(TrainConfig(device="cpu", epochs=1, dtype="float16", amp=amp))
    assert result.compiled and result.captured_steps == result.steps - 3  # a warm-up and two recordings
    assert result.host_syncs_per_step == 0.0 and result.host_syncs_by_reason == {}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_captured_training_is_bit_identical_to_eager_and_skips_the_same_steps(dtype, monkeypatch):
    """``ampcore train``'s captured steps against its eager ones, with inf injected into a few inputs: float16 skips
    the same steps on the device (and backs off the scale alike), every run ends with the same bits."""
    x, y = load_digits()
    if dtype == "float16":  # float32 and bfloat16 have no scaler: an inf would make every later step NaN
        x = x.copy()
        x[[5, 400, 900], 3] = np.inf  # rows of three different batches
        monkeypatch.setattr("ampcore.training.load_digits", lambda: (x, y))
    results = [
        train(TrainConfig(device="cpu", epochs=2, dtype=dtype, amp=dtype != "float32", compile=mode))
        for mode in (False, True)
    ]
    eager, captured = (r.as_dict() for r in results)
    assert captured["captured_steps"] > 0
    for key in ("final_loss", "epoch_losses", "train_accuracy", "test_accuracy", "loss_scale", "skipped_steps"):
        assert repr(captured[key]) == repr(eager[key]), key  # repr: a NaN (a skipped step's loss) equals itself
    if dtype == "float16":
        assert eager["skipped_steps"] >= 3


def test_progress_reports_read_the_host_only_at_report_points():
    reports = []
    result = train(TrainConfig(device="cpu", epochs=1, dtype="float16", progress_every=5), on_progress=reports.append)
    assert result.host_syncs_by_reason == {"progress": len(reports)} and len(reports) == 5  # 5, 10, 15, 20, 23
    assert result.host_syncs_per_step == 0.0
    assert abs(sum(r.loss * n for r, n in zip(reports, [5, 5, 5, 5, 3])) / 23 - result.epoch_losses[0]) < 1e-5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"dtype": "float8"},
            "dtype 'float8'.* is not a training dtype; choose one of 'float16', 'bfloat16', 'float32'",
        ),
        ({"progress_every": 0}, "progress_every must be a positive integer"),
        ({"epochs": 0}, "epochs must be a positive integer"),
        ({"batch_size": 1.5}, "batch_size must be a positive integer"),
        ({"lr": -1.0}, "lr must be a positive number"),
    ],
)
def test_bad_config_is_refused_up_front(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


@pytest.mark.parametrize("alias, name", [("fp16", "float16"), ("bf16", "bfloat16"), ("fp32", "float32"), (None, None)])
def test_config_takes_the_dtype_aliases_and_keeps_the_canonical_name(alias, name):
    assert TrainConfig(dtype=alias).dtype == name


def test_the_backends_once_per_process_loading_is_not_training_time(monkeypatch):
    """ampcore train --compare times two runs in one process: the backend's one-time loading (numba's target, its
    cached loops) is done before the clock starts, so it is charged to neither run."""
    from ampcore import training
    from ampcore.plugins import get_backend

    events: list[str] = []
    backend = get_backend("cpu")
    monkeypatch.setattr(backend, "warm_up", lambda index=0: (events.append("warm_up"), time.sleep(2.0)))
    step = training.train_step
    monkeypatch.setattr(training, "train_step", lambda *a: (events.append("step"), step(*a))[1])
    result = train(TrainConfig(epochs=1, compile=False))
    assert events[0] == "warm_up" and events.count("warm_up") == 1 and events.count("step") == result.steps
    assert result.seconds < 2.0


def test_the_cpu_backend_warms_up_its_compiled_loops():
    from ampcore.plugins import get_backend
    from ampcore_cpu import compiled

    get_backend("cpu").warm_up()
    assert compiled.warm.cache_info().currsize == 1
