"""The fused ``adamw_step_amp`` kernel of the opencl and cuda backends (the CUDA simulator here): the step count
and the found-inf flag stay on the device, so an eager float16 AMP step with ``AdamW(fused=True)`` under a
GradScaler reads the host 0 times (1 before: the scaler's skip decision), with the same bits as the one-read
path, skipped steps included.  The kernels' agreement with float64 Adam is the conformance suite's
(``fused``'s ``adamw_step_amp`` check); here, what a user of each backend sees."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ampcore
from ampcore import nn, optim
from ampcore.nn import functional as F
from ampcore.training import TrainConfig, train

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")


def _opencl_device() -> str:
    pytest.importorskip("pyopencl")
    from ampcore_opencl.plugin import OpenCLBackend

    backend = OpenCLBackend()
    for i in range(backend.device_count() if backend.availability().ok else 0):
        if backend.device_status(i).ok:
            return f"opencl:{i}"
    pytest.skip(f"no usable OpenCL device: {backend.availability().reason}")


HERE = Path(__file__).parent


@pytest.fixture(params=["opencl", pytest.param("cuda", marks=needs_gxx)])
def on_device(request: pytest.FixtureRequest, run_python: Any) -> Callable[[str], Any]:
    """``on_device(check)`` runs the module function ``check(device)`` on an opencl device that builds kernels
    (in this process), or on cuda:0 of the h100 simulator in a fresh interpreter (the variable is read per
    process, and the registry here must not keep a simulated default device), and returns its result."""
    if request.param == "opencl":
        device = _opencl_device()
        return lambda check: globals()[check](device)

    def run(check: str) -> Any:
        code = f"import json, {Path(__file__).stem} as t; print(json.dumps(t.{check}('cuda:0')))"
        proc = run_python(code, path=HERE, env={"AMPCORE_CUDA_SIMULATOR": "h100"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return run


def _model(device: str) -> nn.Module:
    ampcore.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 32, device=device), nn.ReLU(), nn.Linear(32, 5, device=device))


def _steps(device: str, fused: bool, xs: list[np.ndarray], y: np.ndarray) -> tuple[list[np.ndarray], list, int]:
    """One float16 AMP step per batch in ``xs``: the parameters after the last, what ``scaler.step`` returned per
    step, and the host reads of all the steps."""
    model = _model(device)
    opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, fused=fused)
    scaler = ampcore.GradScaler(device.split(":")[0], init_scale=2.0**10)
    target = ampcore.tensor(y, device=device)
    batches = [ampcore.tensor(x, device=device) for x in xs]
    stepped = []
    with ampcore.count_host_syncs() as syncs:
        for x in batches:
            opt.zero_grad()
            with ampcore.autocast(device.split(":")[0], dtype="float16"):
                loss = F.cross_entropy(model(x), target)
            scaler.scale(loss).backward()
            stepped.append(scaler.step(opt))
            scaler.update()
    return [p.detach().numpy() for p in model.parameters()], stepped, syncs.count


def has_the_kernel(device: str) -> bool:
    return ampcore.plugins.registry.get_backend(device.split(":")[0]).kernels.has("adamw_step_amp")


def fused_against_one_read(device: str) -> dict[str, Any]:
    """Five float16 AMP steps, the third overflowing, with AdamW(fused=True) and with fused=False."""
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((8, 12)).astype(np.float32) for _ in range(5)]
    xs[2][3, 4] = 1e30  # float16 overflow in the forward: the scaler skips this step on both paths
    y = rng.integers(0, 5, 8)
    on_device, stepped, reads = _steps(device, True, xs, y)
    one_read, decided, reads_before = _steps(device, False, xs, y)
    differ = [i for i, (a, b) in enumerate(zip(on_device, one_read)) if a.tobytes() != b.tobytes()]
    return dict(reads=reads, reads_before=reads_before, stepped=stepped, decided=decided, differ=differ)


def train_reads(device: str) -> dict[str, Any]:
    result = train(TrainConfig(device=device, epochs=1, dtype="float16"))
    return dict(
        per_step=result.host_syncs_per_step,
        by_reason=result.host_syncs_by_reason,
        skipped=result.skipped_steps,
        finite=bool(np.isfinite(result.epoch_losses).all()),
    )


def test_the_backend_has_the_kernel(on_device):
    assert on_device("has_the_kernel")


def test_an_eager_amp_step_with_fused_adamw_reads_the_host_zero_times_with_the_one_read_paths_bits(on_device):
    got = on_device("fused_against_one_read")
    assert got["reads"] == 0, f"{got['reads']} host reads in 5 fused AMP steps"
    assert got["reads_before"] == 5  # the unfused optimizer: the scaler reads found-inf once per step
    assert got["stepped"] == [None] * 5 and got["decided"] == [True, True, False, True, True]
    assert got["differ"] == [], f"parameters {got['differ']}: the device-side skip changed the bits"


def test_ampcore_train_under_float16_reads_the_host_zero_times_per_step(on_device):
    got = on_device("train_reads")
    assert got["per_step"] == 0.0 and got["by_reason"] == {}, got
    assert got["skipped"] == 0 and got["finite"]
