"""The float8 scale rules on the device (ampcore.float8.device_scaling) give the bits of the NumPy reference
(ampcore.float8.scaling) on every backend: cpu, each usable OpenCL device, and the cuda backend on the CUDA
simulator (in a fresh interpreter, as the simulator is chosen per process)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ampcore
from ampcore.float8 import device_scaling as dev
from ampcore.float8 import scaling as ref

FORMATS = ("float8_e4m3fn", "float8_e5m2")
TINY = np.float32(2.0**-149)


def _samples() -> np.ndarray:
    """Every significand at a few exponents, random magnitudes over the float32 range, and the edge values."""
    bits = np.arange(0, 1 << 23, 97, dtype=np.uint32)
    sweeps = [((np.uint32(e) << 23) | bits).view(np.float32) for e in (1, 90, 127, 180, 230, 254)]
    rng = np.random.default_rng(0)
    random = rng.integers(1, 255 << 23, 50_000, dtype=np.uint32).view(np.float32)
    edges = np.array(
        [0.0, TINY, 2.0**-126, 1e-13, 1e-12, 0.5, 1.0, 448.0, 57344.0, 3.4e38, np.inf, np.nan], dtype=np.float32
    )
    return np.concatenate(sweeps + [random, edges])


def _same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), what
    diff = np.flatnonzero(got[~nan].view(np.uint32) != want[~nan].view(np.uint32))
    assert diff.size == 0, f"{what}: {diff.size} differ, first {got[~nan][diff[0]]!r} != {want[~nan][diff[0]]!r}"


def check_device(device: str) -> None:
    """Every rule on ``device`` against the reference; raises AssertionError naming the first difference."""
    amax = _samples()
    t = ampcore.tensor(amax, device=device)
    positive = amax[np.isfinite(amax) & (amax > 2.0**-126)]
    _same_bits(
        dev.round_down_pow2(ampcore.tensor(positive, device=device)).numpy(),
        ref._round_down_pow2(positive),
        f"round_down_pow2 on {device}",
    )
    for name in FORMATS:
        for pow2 in (False, True):
            _same_bits(
                dev.current_scale(t, name, pow2).numpy(),
                ref.current_scale(amax, name, pow2),
                f"current_scale {name} pow2={pow2} on {device}",
            )
        _same_bits(dev.mx_scale(t, name).numpy(), ref.mx_scale(amax, name), f"mx_scale {name} on {device}")
        for margin, pow2 in ((0, False), (3, False), (1, True)):
            got = dev.delayed_scale(t, 0.25, name, margin=margin, round_to_pow2=pow2).numpy()
            want = [ref.delayed_scale([a], name, 0.25, margin=margin, round_to_pow2=pow2) for a in amax[-2000:]]
            _same_bits(got[-2000:], np.array(want), f"delayed_scale {name} margin={margin} pow2={pow2} on {device}")
    history = dev.AmaxHistory(3)
    seen: list[float] = []
    for value in (1.0, 5.0, 2.0, 3.0, np.nan, 4.0, 4.0, 1.0):
        history.append(ampcore.tensor(np.float32(value), device=device))
        seen = (seen + [value])[-3:]
        for algo in ("max", "most_recent"):
            got = history.amax(algo).numpy()
            want = np.float32(np.max(seen) if algo == "max" else seen[-1])
            assert np.array_equal(got, want, equal_nan=True), (device, algo, seen, got)
    assert len(history) == 3 and history.steps == 8


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


@pytest.mark.parametrize("device", _devices())
def test_every_scale_rule_gives_the_reference_bits_on_the_device(device: str) -> None:
    check_device(device)


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")
def test_every_scale_rule_gives_the_reference_bits_on_simulated_cuda() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMPCORE_")} | {"AMPCORE_CUDA_SIMULATOR": "h100"}
    code = f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import {__name__} as t; "
    code += "t.check_device('cuda:0'); print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-2000:] + proc.stderr[-3000:]


def test_the_history_refuses_an_amax_before_the_first_cast() -> None:
    with pytest.raises(ValueError, match="empty"):
        dev.AmaxHistory(4).amax("max")
