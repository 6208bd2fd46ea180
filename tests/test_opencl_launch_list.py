"""The opencl backend's capture runner (ampcore_opencl.launch_list): a captured program recorded at its first
replay and replayed from a prebuilt list of enqueues, on each OpenCL device.

The conformance suite checks every op and fused chain replayed twice against eager; here: replays on new input
values and new arrays (a list that kept reading the recorded buffers, or wrote its results where the previous
replay's lie, fails), whole training steps, and where the list records again or declines."""

from __future__ import annotations

import numpy as np
import pytest
from test_compile import amp_step

import ampcore
from ampcore import nn, optim
from ampcore_opencl.launch_list import LaunchListRunner

pytestmark = pytest.mark.usefixtures("opencl_device")


def _runner(compiled):
    (entry,) = compiled._compiled.entries.values()
    return entry.run


def _device(opencl_device):
    return f"opencl:{opencl_device}"


def test_replays_read_each_calls_arrays_and_hand_back_new_results(opencl_device):
    """Every replay computes from the arrays it is handed (new values each call) and returns results of its own:
    the results of earlier replays stay as they were."""
    device = _device(opencl_device)
    rng = np.random.default_rng(0)

    def f(x, w, b):
        return ((x @ w + b).relu() * 0.5).to(ampcore.float16), (x * 2.0).sum()

    compiled = ampcore.compile(f)
    calls = [
        [ampcore.tensor(rng.standard_normal(s).astype(np.float32), device=device) for s in ((9, 20), (20, 7), (7,))]
        for _ in range(6)
    ]
    got = [compiled(*args) for args in calls]
    run = _runner(compiled)
    assert isinstance(run, LaunchListRunner) and run.declined is None, run
    assert run.recordings == 1 and run.replays == 3, (run.recordings, run.replays)
    for args, (y, s) in zip(calls, got):
        want_y, want_s = f(*args)
        assert y.numpy().tobytes() == want_y.numpy().tobytes()
        assert s.numpy().tobytes() == want_s.numpy().tobytes()


def test_in_place_state_and_skipped_steps_match_eager(opencl_device):
    """float16 AMP training steps (a fused AdamW step writing its state in place, a GradScaler, an overflowing
    batch among them) replayed from the list: losses, parameters and the skip count are eager's bits."""
    device = _device(opencl_device)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((16, 12)).astype(np.float32) for _ in range(8)]
    xs[5][2, 3] = np.inf
    ys = [rng.integers(0, 4, 16) for _ in range(8)]

    runs = []
    for compiled in (False, True):
        ampcore.manual_seed(3)
        model = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 4)).to(device)
        opt = optim.AdamW(model.parameters(), lr=1e-2, fused=True)
        scaler = ampcore.GradScaler("opencl")
        fn = ampcore.compile(amp_step) if compiled else amp_step
        losses = [
            fn(model, opt, scaler, ampcore.tensor(x, device=device), ampcore.tensor(y, device=device), ampcore.float16)
            for x, y in zip(xs, ys)
        ]
        losses = [v.numpy() for v in losses]
        runs.append(([v.tobytes() for v in losses], [p.numpy().tobytes() for p in model.parameters()]))
        runs[-1] += (scaler.skipped_steps,)
        if compiled:
            run = _runner(fn)
            assert isinstance(run, LaunchListRunner) and run.declined is None and run.replays == 5, run
    assert runs[0] == runs[1] and runs[0][2] == 1


def test_a_scheduled_learning_rate_and_dropout_replay_from_the_list(opencl_device):
    """The steps that take a value drawn anew each replay (the learning rate a schedule changes every step,
    dropout's seed) are called afresh inside the list: every replay is the list's, and losses and parameters are
    eager's bits from the same seeds."""
    device = _device(opencl_device)
    rng = np.random.default_rng(2)
    xs = [ampcore.tensor(rng.standard_normal((8, 5)).astype(np.float32), device=device) for _ in range(7)]
    ys = [ampcore.tensor(rng.integers(0, 3, 8), device=device) for _ in range(7)]

    def train(compiled):
        ampcore.manual_seed(4)
        model = nn.Sequential(nn.Linear(5, 16), nn.Dropout(0.3), nn.ReLU(), nn.Linear(16, 3)).to(device)
        opt = optim.AdamW(model.parameters(), lr=0.1, fused=True)
        scaler = ampcore.GradScaler("opencl", enabled=False)
        fn = ampcore.compile(amp_step) if compiled else amp_step
        losses = []
        for i, (x, y) in enumerate(zip(xs, ys)):
            opt.param_groups[0]["lr"] = 0.1 / (1 + i)  # a new rate every step
            losses.append(fn(model, opt, scaler, x, y, ampcore.float32).numpy().tobytes())
        return losses, [p.numpy().tobytes() for p in model.parameters()], fn

    eager_losses, eager_params, _ = train(False)
    losses, params, fn = train(True)
    assert losses == eager_losses and params == eager_params
    run = _runner(fn)
    assert isinstance(run, LaunchListRunner) and run.declined is None, run
    assert run.recordings == 1 and run.replays == len(xs) - 3 and run.reference_calls == 0, run


def test_explain_names_the_list(opencl_device):
    device = _device(opencl_device)
    x = ampcore.ones(4, 4, device=device)
    text = ampcore.compiler.explain(lambda x: (x + 1.0) * 2.0, x).runner
    assert "prebuilt list of enqueues" in text, text
