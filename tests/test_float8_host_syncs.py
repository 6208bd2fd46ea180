"""A float8 training step reads nothing from the host, for every recipe on every backend (issue 35).

Counted with ampcore.syncs.count_host_syncs around whole steps (forward under autocast, backward, the
optimizer step), after a first step: amaxes, scales, the delayed recipe's history and the per-step stats stay
on the device.  The stats are read when float8_stats() asks, in one transfer per tensor, and they are the
numbers the casts used.  The cuda backend runs on the CUDA simulator in a fresh interpreter per profile.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import ampcore
from ampcore import nn, optim
from ampcore.float8 import RECIPES, convert_to_float8_training
from ampcore.syncs import count_host_syncs
from ampcore.training import TrainConfig, train

STEPS = 3


def float8_step_syncs(device: str, recipe: str) -> dict:
    """Host reads of ``STEPS`` float8 training steps on ``device``, and what reading the stats then costs."""
    ampcore.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 16)).to(device)
    convert_to_float8_training(model, recipe)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    x, y = ampcore.randn(32, 64, device=device), ampcore.randn(32, 16, device=device)

    def step() -> None:
        opt.zero_grad()
        with ampcore.autocast(x.device.type):
            loss = ((model(x).float() - y) ** 2).mean()  # no deferred label check: only float8 could read
        loss.backward()
        opt.step()

    step()
    with count_host_syncs() as during:
        for _ in range(STEPS):
            step()
    with count_host_syncs() as stats_read:
        stats = model.float8_stats()
    again = model.float8_stats()
    return {
        "step": during.count,
        "reasons": dict(during.by_reason),
        "stats_reads": dict(stats_read.by_reason),
        "steps_recorded": [len(roles["amax"]) for layer in stats.values() for roles in layer.values()],
        "stable": stats == again,
        "scales_positive": all(s > 0 for layer in stats.values() for r in layer.values() for s in r["scale"]),
    }


def _check(result: dict, where: str) -> None:
    assert result["step"] == 0, f"{where}: a float8 step read the host: {result['reasons']}"
    # 2 layers x 3 roles, each recorded once per step (the first step's too); read in one transfer per tensor,
    # two where the recipe counts saturated values
    assert result["steps_recorded"] == [STEPS + 1] * 6, result
    assert set(result["stats_reads"]) == {"float8 stats"} and 6 <= result["stats_reads"]["float8 stats"] <= 12
    assert result["stable"] and result["scales_positive"], result


def _devices() -> list[object]:
    """cpu, each OpenCL device (an unusable one skipped with its reason) and a real GPU's cuda:0 where there is
    one (the simulated cuda backend runs in the subprocess tests below)."""
    found: list[object] = ["cpu"]
    from ampcore_cuda import runtime

    if runtime.probe().ok and not runtime.simulated():
        found.append("cuda:0")
    try:
        backend = ampcore.get_backend("opencl")
    except Exception:  # noqa: BLE001 - not installed: nothing to run there
        return found
    for i in range(backend.device_count() if backend.availability().ok else 0):
        usable = backend.device_status(i)
        marks = () if usable.ok else pytest.mark.skip(reason=f"opencl:{i} is unusable here: {usable.reason}")
        found.append(pytest.param(f"opencl:{i}", marks=marks, id=f"opencl:{i}"))
    return found


@pytest.mark.parametrize("recipe", list(RECIPES))
@pytest.mark.parametrize("device", _devices())
def test_a_float8_training_step_reads_nothing_from_the_host(device: str, recipe: str) -> None:
    _check(float8_step_syncs(device, recipe), f"{device} {recipe}")


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")
@pytest.mark.parametrize("profile", ["h100", "b200"])
def test_a_float8_training_step_reads_nothing_from_the_host_on_simulated_cuda(profile: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMPCORE_")} | {"AMPCORE_CUDA_SIMULATOR": profile}
    code = (
        f"import sys, json; sys.path.insert(0, {os.path.dirname(__file__)!r}); import {__name__} as t; "
        f"print(json.dumps({{r: t.float8_step_syncs('cuda:0', r) for r in {list(RECIPES)!r}}}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for recipe, result in json.loads(proc.stdout.strip().splitlines()[-1]).items():
        _check(result, f"cuda:0 ({profile}) {recipe}")


def test_ampcore_train_float8_reads_only_the_deferred_label_checks() -> None:
    """Eager, bfloat16 autocast has no GradScaler, so the optimizer reads the queued label checks once a step
    (``checks``, as the float32 baseline does); the float8 casts add no read.  Captured (the default), the
    step reads nothing at all."""
    result = train(TrainConfig(device="cpu", epochs=1, float8="delayed", compile=False))
    assert result.host_syncs_by_reason == {"checks": result.steps}, result.host_syncs_by_reason
    captured = train(TrainConfig(device="cpu", epochs=1, float8="delayed"))
    assert captured.host_syncs_by_reason == {}, captured.host_syncs_by_reason
    rows = result.float8_stats
    assert rows and all(row["steps"] == result.steps for name, row in rows.items() if name.endswith("grad_output"))
    assert all(row["steps"] >= result.steps for row in rows.values())  # evaluation casts input and weight too
