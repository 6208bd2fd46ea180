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
    steps = []
    result = train(TrainConfig(device=fake.name, epochs=1, batch_size=256), on_step=steps.append)
    assert result.device == fake.name
    assert fake.calls["matmul"] >= 3 * result.steps
    assert [s.step for s in steps] == list(range(1, result.steps + 1)) and steps[-1].total_steps == result.steps


@pytest.mark.parametrize("kwargs, message", [
    ({"dtype": "bfloat16"}, "mixed precision arrives with issue #4"),
    ({"epochs": 0}, "epochs must be a positive integer"),
    ({"batch_size": 1.5}, "batch_size must be a positive integer"),
    ({"lr": -1.0}, "lr must be a positive number"),
])
def test_bad_config_is_refused_up_front(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)
