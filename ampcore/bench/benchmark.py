"""``ampcore bench``'s measurement: every configuration of one model, timed interleaved, as a JSON-ready dict.

Order of work, one model per run:

1. The initial weights and batches are made once (seeded), so every
   configuration starts from the same parameters and sees the same data.
2. Memory, one configuration alive at a time: peak device memory of building
   it and training two steps, and the bytes its graph saved for backward.
3. Time: every configuration is built, then stepped round-robin (A, B, C, A,
   B, C, ...), ``warmup`` rounds untimed and ``steps`` rounds timed, so drift
   in machine load falls on all alike.  Each step ends by waiting for its
   device.  Each device of each framework is one phase, and the phases run
   one after the other: after each op, the worker threads of OpenBLAS,
   torch's OpenMP and PoCL spin waiting for more work, so interleaving two
   libraries on one CPU let each one's idle threads take the cores from the
   other (torch and ampcore both ran 4-5x slower).  Making torch's threads
   wait passively (``OMP_WAIT_POLICY=PASSIVE``) fixed that only by slowing
   torch by about a quarter, which would flatter ampcore.  So float32 and
   AMP on one device are interleaved; ampcore against torch is not.
4. Losses and loss scales are read once, after the timing.

The result's layout is the JSON schema in ``docs/bench.md`` (``SCHEMA``).
"""

from __future__ import annotations

import gc
import importlib.metadata
import importlib.util
import os
import platform
import statistics
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

import numpy as np

from .. import __version__
from ..creation import manual_seed
from ..plugins import available_backends, get_backend, resolve_device
from ..plugins.registry import registry
from . import torch_reference
from .models import ModelSpec, make_batches, parameter_count
from .config import LR, Config, History
from .runs import footprint, make_run

__all__ = ["SCHEMA", "BenchSettings", "configurations", "run_benchmark"]

SCHEMA = "ampcore-bench/1"
AMP_DTYPES = ("float16", "bfloat16")
BATCH_COUNT = 4  # distinct batches a run cycles through
PHASE_PAUSE = 0.5  # seconds between two devices' (or frameworks') timing phases


@dataclass(frozen=True)
class BenchSettings:
    """What to measure: a model, the devices (None: device 0 of every available backend), the AMP dtypes
    (None: each one a device can compute in), step counts, and whether to measure torch too."""

    model: ModelSpec
    devices: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    steps: int = 20
    warmup: int = 3
    seed: int = 0
    batch: int | None = None
    torch: bool = True

    def __post_init__(self) -> None:
        for name, low in (("steps", 1), ("warmup", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.batch is not None and (not isinstance(self.batch, int) or self.batch < 1):
            raise ValueError(f"batch must be a positive integer, got {self.batch!r}")
        for name in self.dtypes or ():
            if name not in AMP_DTYPES:
                raise ValueError(f"AMP dtype {name!r} is not one of {', '.join(AMP_DTYPES)} (float32 always runs "
                                 "as the baseline)")

    @property
    def batch_size(self) -> int:
        return self.model.batch if self.batch is None else self.batch


def _amp_dtypes(device: str, wanted: tuple[str, ...] | None) -> list[str]:
    """The AMP dtypes ``device`` computes in (natively or emulated), in AMP_DTYPES order, filtered by ``wanted``."""
    d = resolve_device(device)
    caps = get_backend(d.type).capabilities(d.index)
    computable = {x.name for x in caps.native | caps.emulated}
    return [name for name in AMP_DTYPES if name in computable and (wanted is None or name in wanted)]


def configurations(settings: BenchSettings) -> list[Config]:
    """Every configuration to run: per ampcore device float32 and the AMP dtypes it computes in, then torch's
    on cpu and on cuda when torch sees a GPU (only the device types named, when devices are named), in float32
    and the AMP dtypes asked for."""
    devices = list(settings.devices) if settings.devices else [f"{b.name}:0" for b in available_backends()]
    configs: list[Config] = []
    # Always with the index: "cpu" and "cpu:0" are one device, one name (and measured once).
    for name in dict.fromkeys(f"{d.type}:{d.index}" for d in map(resolve_device, devices)):
        configs += [Config("ampcore", name, p) for p in ["float32", *_amp_dtypes(name, settings.dtypes)]]
    if settings.torch:
        named = {d.split(":")[0] for d in devices} if settings.devices else None
        for device in torch_reference.devices():
            if named is None or device in named:  # torch beside the device types asked for, by default cpu and cuda
                configs += [Config("torch", device, p) for p in ["float32", *(settings.dtypes or AMP_DTYPES)]]
    return configs


def _initial_weights(spec: ModelSpec, seed: int, device: str) -> tuple[dict[str, np.ndarray], int]:
    """The seeded initial parameters as host arrays, and their count: every configuration loads these."""
    manual_seed(seed)
    model = spec.build(device)
    return {k: v.numpy() for k, v in model.state_dict().items()}, parameter_count(model)


def run_benchmark(settings: BenchSettings, on_step: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure every configuration of ``settings``; ``on_step(label)`` is called after each unit of work
    (a memory measurement or a step), for a progress bar.  Returns the result as the documented JSON dict."""
    tick = on_step or (lambda label: None)
    spec = settings.model
    configs = configurations(settings)
    weights, n_params = _initial_weights(spec, settings.seed, configs[0].device)
    batches = make_batches(spec, settings.seed + 1, BATCH_COUNT, settings.batch_size)

    memory: dict[Config, tuple[int | None, int]] = {}
    for config in configs:
        gc.collect()
        memory[config] = footprint(spec, config, weights, batches)
        tick(config.label)
    gc.collect()

    runs = {config: make_run(spec, config, weights, batches) for config in configs}
    times: dict[Config, list[float]] = {config: [] for config in configs}
    for phase in dict.fromkeys((c.framework, c.device) for c in configs):
        time.sleep(PHASE_PAUSE)  # let the previous phase's idle worker threads stop spinning
        group = {config: run for config, run in runs.items() if (config.framework, config.device) == phase}
        for round_ in range(settings.warmup + settings.steps):
            for config, run in group.items():
                start = time.perf_counter()
                run.step()
                elapsed = time.perf_counter() - start
                if round_ >= settings.warmup:
                    times[config].append(elapsed)
                tick(config.label)
    histories = {config: run.history() for config, run in runs.items()}
    del runs
    return _result(settings, configs, n_params, times, memory, histories)


# ----------------------------------------------------------------------------- the result
def _step_stats(times: list[float]) -> dict[str, float]:
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else (times[0],) * 3
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "q1": q1, "q3": q3,
            "iqr": q3 - q1}


def _config_result(config: Config, settings: BenchSettings, times: list[float], peak: int | None, saved: int,
                   history: History) -> dict[str, Any]:
    stats = _step_stats(times)
    return {
        "id": config.label, "framework": config.framework, "device": config.device,
        "precision": config.precision, "amp": config.amp, "loss_scaling": config.loss_scaling,
        "step_seconds": stats, "times_seconds": times, "samples_per_second": settings.batch_size / stats["median"],
        "peak_memory_bytes": peak, "saved_for_backward_bytes": saved,
        "losses": history.losses, "final_loss": history.losses[-1] if history.losses else None,
        "loss_scales": history.scales, "skipped_steps": history.skipped_steps,
        "host_syncs_per_step": (history.host_syncs / (settings.warmup + settings.steps)
                                if config.framework == "ampcore" else None),
    }


def _add_ratios(rows: dict[Config, dict[str, Any]]) -> None:
    """Speedup, memory and loss against each row's float32 baseline, and the ampcore/torch step-time ratio."""
    for config, row in rows.items():
        base = rows.get(config.baseline)
        median = row["step_seconds"]["median"]
        row["speedup_vs_float32"] = base["step_seconds"]["median"] / median if base else None
        row["peak_memory_vs_float32"] = (row["peak_memory_bytes"] / base["peak_memory_bytes"]
                                         if base and row["peak_memory_bytes"] and base["peak_memory_bytes"] else None)
        row["saved_bytes_vs_float32"] = (row["saved_for_backward_bytes"] / base["saved_for_backward_bytes"]
                                         if base and base["saved_for_backward_bytes"] else None)
        row["final_loss_diff_vs_float32"] = (row["final_loss"] - base["final_loss"]
                                             if base and row["final_loss"] is not None and base["final_loss"] is not None
                                             else None)
        twin = Config("torch", config.device.split(":")[0], config.precision)
        row["step_time_vs_torch"] = (median / rows[twin]["step_seconds"]["median"]
                                     if config.framework == "ampcore" and twin in rows else None)


def _processor() -> str | None:
    """The CPU's model name: the cpu backend reads it (``platform.processor()`` is empty on Linux)."""
    for backend in available_backends():
        if backend.name == "cpu":
            return backend.capabilities(0).device_name
    return platform.processor() or None


def _versions() -> dict[str, Any]:
    versions: dict[str, Any] = {"ampcore": __version__, "numpy": np.__version__, "python": platform.python_version()}
    for module in ("torch", "matplotlib"):
        try:
            versions[module] = importlib.metadata.version(module)
        except importlib.metadata.PackageNotFoundError:
            versions[module] = None
    return versions


def _backends(configs: list[Config]) -> list[dict[str, Any]]:
    entry_points = registry.entry_points()
    out = []
    for name in dict.fromkeys(c.device for c in configs if c.framework == "ampcore"):
        d = resolve_device(name)
        distribution, version, _ = entry_points.get(d.type, (None, None, None))
        out.append({"device": name, "backend": d.type, "distribution": distribution, "version": version,
                    "capabilities": get_backend(d.type).capabilities(d.index).as_dict()})
    return out


def _result(settings: BenchSettings, configs: list[Config], n_params: int, times: dict[Config, list[float]],
            memory: dict[Config, tuple[int | None, int]], histories: dict[Config, History]) -> dict[str, Any]:
    rows = {c: _config_result(c, settings, times[c], *memory[c], histories[c]) for c in configs}
    _add_ratios(rows)
    spec = settings.model
    return {
        "schema": SCHEMA,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "machine": platform.machine(), "processor": _processor(),
                    "cpu_count": os.cpu_count()},
        "versions": _versions(),
        "model": {"name": spec.name, "description": spec.description, "batch": settings.batch_size,
                  "input_shape": list(spec.input_shape), "classes": spec.classes, "parameters": n_params},
        "settings": {"steps": settings.steps, "warmup": settings.warmup, "seed": settings.seed,
                     "optimizer": "AdamW", "lr": LR, "batches": BATCH_COUNT, "torch": settings.torch,
                     "timing": "round-robin within each (framework, device) phase; phases in turn"},
        "backends": _backends(configs),
        "configs": list(rows.values()),
    }

