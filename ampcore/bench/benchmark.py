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

A device its backend reports unusable (``device_status``) is not measured,
and a device whose work raises at any stage is dropped from then on: both
are listed in the result's ``refused`` with a one-line reason, and the
other devices are measured as usual.

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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np

from .. import __version__
from ..backend import BackendUnavailableError
from ..creation import manual_seed
from ..float8 import parse_recipe
from ..plugins import available_backends, get_backend, resolve_device, thread_info
from ..plugins.registry import registry
from . import torch_reference
from .config import LR, Config, History
from .models import ModelSpec, make_batches, parameter_count
from .runs import footprint, make_run

__all__ = [
    "SCHEMA",
    "BenchSettings",
    "NothingMeasured",
    "Refusals",
    "SimulatedDeviceError",
    "check_not_simulated",
    "configurations",
    "run_benchmark",
]

SCHEMA = "ampcore-bench/1"
AMP_DTYPES = ("float16", "bfloat16")
BATCH_COUNT = 4  # distinct batches a run cycles through
PHASE_PAUSE = 0.5  # seconds between two devices' (or frameworks') timing phases
Phase = tuple[str, str]  # (framework, device): Config.phase
T = TypeVar("T")


@dataclass(frozen=True)
class BenchSettings:
    """What to measure: a model, the devices (None: every device of every available backend; an unusable one
    is refused), the AMP dtypes (None: each one a device can compute in), step counts, and whether to measure
    torch too."""

    model: ModelSpec
    devices: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    steps: int = 20
    warmup: int = 3
    seed: int = 0
    batch: int | None = None
    torch: bool = True
    float8: tuple[str, ...] = ()  # float8 recipes: one more ampcore row per recipe and device
    compile: bool = False  # also each ampcore configuration with its step captured (ampcore.compile)

    def __post_init__(self) -> None:
        object.__setattr__(self, "float8", tuple(str(parse_recipe(r)) for r in self.float8))
        for name, low in (("steps", 1), ("warmup", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.batch is not None and (not isinstance(self.batch, int) or self.batch < 1):
            raise ValueError(f"batch must be a positive integer, got {self.batch!r}")
        for name in self.dtypes or ():
            if name not in AMP_DTYPES:
                raise ValueError(
                    f"AMP dtype {name!r} is not one of {', '.join(AMP_DTYPES)} (float32 always runs as the baseline)"
                )

    @property
    def batch_size(self) -> int:
        return self.model.batch if self.batch is None else self.batch


class NothingMeasured(RuntimeError):  # noqa: N818 - in ampcore.bench.benchmark.__all__: renaming it breaks callers
    """No device could be measured; ``refused`` lists each one with the reason, as the result would."""

    def __init__(self, refused: list[dict[str, str]]):
        self.refused = refused
        reasons = "; ".join(f"{r['framework']} {r['device']}: {r['reason']}" for r in refused)
        super().__init__(f"no device could be measured ({reasons})" if refused else "there is no device to measure")


class Refusals:
    """The phases (framework, device) that cannot be measured, each with a one-line reason."""

    def __init__(self) -> None:
        self.reasons: dict[Phase, str] = {}

    def attempt(self, phase: Phase, fn: Callable[..., T], *args: Any) -> T | None:
        """``fn(*args)``; None if ``phase`` is already refused (``fn`` not called) or if ``fn`` raises, which
        refuses it with the exception's reason."""
        if phase in self.reasons:
            return None
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - a driver error or a kernel bug on one device must not cost the others' results
            self.reasons[phase] = _reason(exc)
            return None

    def live(self, configs: list[Config]) -> list[Config]:
        """``configs`` without those of refused phases."""
        return [c for c in configs if c.phase not in self.reasons]

    def as_list(self) -> list[dict[str, str]]:
        """The refusals as the result's ``refused`` list, in the order they happened."""
        return [{"framework": f, "device": d, "reason": r} for (f, d), r in self.reasons.items()]


def _reason(exc: Exception) -> str:
    """An unusable device's or backend's own reason, else the exception's type and first line of its message."""
    if isinstance(exc, BackendUnavailableError):
        return exc.reason
    first = str(exc).partition("\n")[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _usable_device(name: str) -> str:
    """``name`` as ``type:index``; BackendUnavailableError with the reason when the device cannot run here,
    SimulatedDeviceError when it is a simulator."""
    d = resolve_device(name)
    check_not_simulated(f"{d.type}:{d.index}")
    return f"{d.type}:{d.index}"


class SimulatedDeviceError(ValueError):
    """A benchmark asked to time a simulated device: its timings are the CPU's, never the device's."""


def check_not_simulated(device: str) -> None:
    """SimulatedDeviceError when ``device``'s capabilities say it is simulated (``extra["simulated"]``, as the
    cuda backend's say under ``AMPCORE_CUDA_SIMULATOR``): a benchmark never reports those timings as GPU ones."""
    d = resolve_device(device)
    simulated = get_backend(d.type).capabilities(d.index).extra.get("simulated")
    if simulated:
        raise SimulatedDeviceError(
            f"{d.type}:{d.index} is simulated ({simulated}): its timings would be the CPU "
            "running a simulation, not GPU figures; benchmark it on a real device"
        )


def _amp_dtypes(device: str, wanted: tuple[str, ...] | None) -> list[str]:
    """The AMP dtypes ``device`` computes in (natively or emulated), in AMP_DTYPES order, filtered by ``wanted``."""
    d = resolve_device(device)
    caps = get_backend(d.type).capabilities(d.index)
    computable = {x.name for x in caps.native | caps.emulated}
    return [name for name in AMP_DTYPES if name in computable and (wanted is None or name in wanted)]


def configurations(settings: BenchSettings, refusals: Refusals | None = None) -> list[Config]:
    """Every configuration to run: per ampcore device float32 and the AMP dtypes it computes in, then torch's
    on cpu and on cuda when torch sees a GPU (only the device types named, when devices are named), in float32
    and the AMP dtypes asked for.  An ampcore device that is unusable or whose capabilities cannot be read is
    left out, with the reason recorded in ``refusals``."""
    refusals = Refusals() if refusals is None else refusals
    names = settings.devices or tuple(f"{b.name}:{i}" for b in available_backends() for i in range(b.device_count()))
    # Always with the index: "cpu" and "cpu:0" are one device, one name (and measured once).
    devices = [refusals.attempt(("ampcore", name), _usable_device, name) for name in names]
    configs: list[Config] = []
    for name in dict.fromkeys(d for d in devices if d is not None):
        dtypes = refusals.attempt(("ampcore", name), _amp_dtypes, name, settings.dtypes)
        if dtypes is not None:
            configs += [Config("ampcore", name, p) for p in ["float32", *dtypes]]
            float8: list[Config] = []
            if settings.float8 and dtypes:  # float8 Linears beside bfloat16 (else the device's AMP dtype)
                base = "bfloat16" if "bfloat16" in dtypes else dtypes[0]
                float8 = [Config("ampcore", name, base, recipe) for recipe in settings.float8]
                configs += float8
            if settings.compile:  # each one again, captured, timed interleaved with the eager ones
                configs += [Config("ampcore", name, p, compiled=True) for p in ["float32", *dtypes]]
                configs += [Config("ampcore", name, c.precision, c.float8, compiled=True) for c in float8]
    if settings.torch:
        named = {d.split(":")[0] for d in settings.devices} if settings.devices else None
        for device in torch_reference.devices():
            if named is None or device in named:  # torch beside the device types asked for, by default cpu and cuda
                configs += [Config("torch", device, p) for p in ["float32", *(settings.dtypes or AMP_DTYPES)]]
    return configs


def _build_weights(spec: ModelSpec, seed: int, device: str) -> tuple[dict[str, np.ndarray], int]:
    """The model built from ``seed`` on ``device``: its parameters as host arrays, and their count."""
    manual_seed(seed)
    model = spec.build(device)
    return {k: v.numpy() for k, v in model.state_dict().items()}, parameter_count(model)


def _initial_weights(
    spec: ModelSpec, seed: int, configs: list[Config], refusals: Refusals
) -> tuple[dict[str, np.ndarray], int]:
    """The seeded initial parameters as host arrays, and their count: every configuration loads these.  Built
    on the first ampcore device that can; NothingMeasured if none can."""
    for config in configs:
        if config.framework == "ampcore":
            built = refusals.attempt(config.phase, _build_weights, spec, seed, config.device)
            if built is not None:
                return built
    raise NothingMeasured(refusals.as_list())


def _time_phase(
    group: dict[Config, Any], settings: BenchSettings, times: dict[Config, list[float]], tick: Callable[[str], None]
) -> None:
    """Step ``group``'s runs round-robin, ``settings.warmup`` rounds untimed, then ``settings.steps`` timed."""
    for round_ in range(settings.warmup + settings.steps):
        for config, run in group.items():
            start = time.perf_counter()
            run.step()
            elapsed = time.perf_counter() - start
            if round_ >= settings.warmup:
                times[config].append(elapsed)
            tick(config.label)


def run_benchmark(settings: BenchSettings, on_step: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure every configuration of ``settings``; ``on_step(label)`` is called after each unit of work
    (a memory measurement or a step), for a progress bar.  Returns the result as the documented JSON dict, with
    the devices that could not be measured in its ``refused`` list; NothingMeasured if none could."""
    tick = on_step or (lambda label: None)
    spec = settings.model
    refusals = Refusals()
    configs = configurations(settings, refusals)
    weights, n_params = _initial_weights(spec, settings.seed, configs, refusals)
    batches = make_batches(spec, settings.seed + 1, BATCH_COUNT, settings.batch_size)

    threads: dict[str, Any] = {"ampcore": thread_info(), "torch": None}
    if any(c.framework == "torch" for c in configs):  # the same thread count as ampcore's, as torch.set_num_threads
        threads["torch"] = torch_reference.set_threads(threads["ampcore"]["num_threads"])
    memory: dict[Config, Any] = {}  # None where the phase was refused, as in runs and histories
    for config in refusals.live(configs):
        gc.collect()
        memory[config] = refusals.attempt(config.phase, footprint, spec, config, weights, batches)
        tick(config.label)
    gc.collect()

    # None where the phase was refused; only live configurations' entries are read, and those are set.
    runs: dict[Config, Any] = {
        config: refusals.attempt(config.phase, make_run, spec, config, weights, batches)
        for config in refusals.live(configs)
    }
    times: dict[Config, list[float]] = {config: [] for config in configs}
    for phase in dict.fromkeys(c.phase for c in refusals.live(configs)):
        time.sleep(PHASE_PAUSE)  # let the previous phase's idle worker threads stop spinning
        group = {config: runs[config] for config in refusals.live(configs) if config.phase == phase}
        refusals.attempt(phase, _time_phase, group, settings, times, tick)
    histories: dict[Config, Any] = {
        config: refusals.attempt(config.phase, runs[config].history) for config in refusals.live(configs)
    }
    del runs
    measured = refusals.live(configs)
    if not measured:
        raise NothingMeasured(refusals.as_list())
    return _result(settings, measured, n_params, times, memory, histories, refusals.as_list(), threads)


# ----------------------------------------------------------------------------- the result
def _step_stats(times: list[float]) -> dict[str, float]:
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else (times[0],) * 3
    return {
        "median": statistics.median(times),
        "min": min(times),
        "max": max(times),
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
    }


def _config_result(
    config: Config, settings: BenchSettings, times: list[float], peak: int | None, saved: int, history: History
) -> dict[str, Any]:
    stats = _step_stats(times)
    return {
        "id": config.label,
        "framework": config.framework,
        "device": config.device,
        "precision": config.precision,
        "float8": config.float8,
        "compiled": config.compiled,
        "amp": config.amp,
        "loss_scaling": config.loss_scaling,
        "step_seconds": stats,
        "times_seconds": times,
        "samples_per_second": settings.batch_size / stats["median"],
        "peak_memory_bytes": peak,
        "saved_for_backward_bytes": saved,
        "losses": history.losses,
        "final_loss": history.losses[-1] if history.losses else None,
        "loss_scales": history.scales,
        "skipped_steps": history.skipped_steps,
        "host_syncs_per_step": (
            history.host_syncs / (settings.warmup + settings.steps) if config.framework == "ampcore" else None
        ),
    }


def _add_ratios(rows: dict[Config, dict[str, Any]]) -> None:
    """Speedup, memory and loss against each row's float32 baseline, and the ampcore/torch step-time ratio."""
    for config, row in rows.items():
        base = rows.get(config.baseline)
        median = row["step_seconds"]["median"]
        row["speedup_vs_float32"] = base["step_seconds"]["median"] / median if base else None
        row["peak_memory_vs_float32"] = (
            row["peak_memory_bytes"] / base["peak_memory_bytes"]
            if base and row["peak_memory_bytes"] and base["peak_memory_bytes"]
            else None
        )
        row["saved_bytes_vs_float32"] = (
            row["saved_for_backward_bytes"] / base["saved_for_backward_bytes"]
            if base and base["saved_for_backward_bytes"]
            else None
        )
        row["final_loss_diff_vs_float32"] = (
            row["final_loss"] - base["final_loss"]
            if base and row["final_loss"] is not None and base["final_loss"] is not None
            else None
        )
        reference = rows.get(config.without_float8) if config.float8 else None
        row["final_loss_vs_reference"] = (
            row["final_loss"] / reference["final_loss"] - 1.0
            if reference and row["final_loss"] is not None and reference["final_loss"]
            else None
        )
        row["step_time_vs_reference"] = median / reference["step_seconds"]["median"] if reference else None
        row["peak_memory_vs_reference"] = (
            row["peak_memory_bytes"] / reference["peak_memory_bytes"]
            if reference and row["peak_memory_bytes"] and reference["peak_memory_bytes"]
            else None
        )
        eager = rows.get(config.eager) if config.compiled else None
        row["speedup_vs_eager"] = eager["step_seconds"]["median"] / median if eager else None
        twin = Config("torch", config.device.split(":")[0], config.precision)
        row["step_time_vs_torch"] = (
            median / rows[twin]["step_seconds"]["median"] if config.framework == "ampcore" and twin in rows else None
        )


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
        caps = get_backend(d.type).capabilities(d.index)
        out.append(
            {
                "device": name,
                "backend": d.type,
                "distribution": distribution,
                "version": version,
                "capabilities": caps.as_dict(),
                "compiled": caps.extra.get("compiled"),
            }
        )
    return out


def _result(
    settings: BenchSettings,
    configs: list[Config],
    n_params: int,
    times: dict[Config, list[float]],
    memory: dict[Config, tuple[int | None, int]],
    histories: dict[Config, History],
    refused: list[dict[str, str]],
    threads: dict[str, Any],
) -> dict[str, Any]:
    rows = {c: _config_result(c, settings, times[c], *memory[c], histories[c]) for c in configs}
    _add_ratios(rows)
    spec = settings.model
    return {
        "schema": SCHEMA,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "processor": _processor(),
            "cpu_count": os.cpu_count(),
        },
        "versions": _versions(),
        "model": {
            "name": spec.name,
            "description": spec.description,
            "batch": settings.batch_size,
            "input_shape": list(spec.input_shape),
            "classes": spec.classes,
            "parameters": n_params,
        },
        "settings": {
            "steps": settings.steps,
            "warmup": settings.warmup,
            "seed": settings.seed,
            "optimizer": "AdamW",
            "lr": LR,
            "batches": BATCH_COUNT,
            "torch": settings.torch,
            "float8": list(settings.float8),
            "compile": settings.compile,
            "torch_missing": torch_reference.missing() if settings.torch else None,
            "timing": "round-robin within each (framework, device) phase; phases in turn",
        },
        "backends": _backends(configs),
        "threads": threads,
        "configs": list(rows.values()),
        "refused": refused,
    }
