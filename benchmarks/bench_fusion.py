"""A captured AMP training step with its elementwise chains fused (the backend's ``fused_kernel``) against the
same step replayed kernel by kernel (``options={"fusion": False}``), and the eager step, on one device.

The step is ``ampcore bench --compile``'s (:func:`ampcore.bench.runs.train_step`: zero_grad, forward under
autocast, scaled backward, the scaler's step and update) on one of its models, from the same seeded weights
and batches.  The three runs are timed interleaved, round-robin, so drift in a shared machine's load falls on
all alike.  Printed per run: the kernels one step launches (a fused chain counts as one), the chains fused,
the median ms per step and its ratio to the unfused replay; and whether the fused run's losses are
bit-identical to the unfused one's (fusion changes where values live, never their bits).

    python benchmarks/bench_fusion.py [--device opencl:0] [--model transformer] [--dtype float16] [--steps 30]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from typing import Any

import numpy as np

import ampcore
from ampcore.bench.config import Config
from ampcore.bench.models import get_model, make_batches
from ampcore.bench.runs import AmpcoreRun, train_step


def _run(spec: Any, config: Config, weights: dict[str, np.ndarray], batches: list, fusion: bool | None) -> AmpcoreRun:
    run = AmpcoreRun(spec, config, weights, batches)
    if fusion is not None:  # the captured step, with or without fusion
        run._compiled = ampcore.compile(train_step, options={"fusion": fusion})
    return run


def _program(run: AmpcoreRun) -> Any:
    assert run._compiled is not None
    entries = list(run._compiled._compiled.entries.values())
    return entries[-1].program


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="opencl:0")
    parser.add_argument("--model", default="transformer")
    parser.add_argument("--dtype", default="float16", help="the autocast dtype (float32: no autocast)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=4, help="untimed steps per run first (recording included)")
    args = parser.parse_args()
    spec = get_model(args.model)
    ampcore.manual_seed(0)
    model = spec.build(args.device)
    weights = {k: v.numpy() for k, v in model.state_dict().items()}
    batches = make_batches(spec, 1, 4)
    eager, captured = (Config("ampcore", args.device, args.dtype, compiled=c) for c in (False, True))
    runs = {
        "eager": _run(spec, eager, weights, batches, None),
        "captured, unfused": _run(spec, captured, weights, batches, False),
        "captured, fused": _run(spec, captured, weights, batches, True),
    }
    for run in runs.values():
        for _ in range(args.warmup):
            run.step()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.steps):
        for name, run in runs.items():
            start = time.perf_counter()
            run.step()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["captured, unfused"])
    amp = f"{args.dtype} AMP" if args.dtype != "float32" else "float32"
    print(f"{args.model} {amp} step on {args.device} ({_cpu()}), median of {args.steps} steps")
    print(f"{'run':<20} {'kernels/step':>12} {'fused chains':>12} {'ms/step':>9} {'vs unfused':>10}")
    for name, run in runs.items():
        ms = statistics.median(times[name])
        if run._compiled is not None:
            program = _program(run)
            kernels, chains = str(len(program.steps)), str(len(program.fusions))
        else:
            kernels, chains = "-", "-"
        print(f"{name:<20} {kernels:>12} {chains:>12} {ms * 1e3:>9.2f} {base / ms:>9.2f}x")
    fused, unfused = (runs[n].history().losses for n in ("captured, fused", "captured, unfused"))
    same = np.array(fused, np.float64).tobytes() == np.array(unfused, np.float64).tobytes()
    print(f"fused losses bit-identical to unfused: {same}")


if __name__ == "__main__":
    main()
