"""The reference MLP training step on the opencl backend: float16 AMP vs float32, step time and device memory.

Workload: batch 256, 784-1024-1024-10 MLP with ReLU, cross-entropy, AdamW.
The float32 step is forward, backward, ``opt.step()``; the AMP step runs the
forward under ``autocast("opencl", float16)`` with a ``GradScaler`` (one host
sync per step: the skip decision).  Both run interleaved after warm-up in one
process, each step ending with ``synchronize`` so the clock sees the device
work, and the medians are compared.

Device memory is ``Backend.peak_memory`` of building each configuration and
running its first step, with only that configuration alive: the growth of
the memory pool, which keeps freed blocks, so it counts every buffer alive
at once (parameters, gradients, optimizer state, activations saved for
backward, the float16 weight copies), rounded up to the pool's size bins.

    python benchmarks/bench_opencl_mlp.py [--device opencl:0] [--steps 20] [--warmup 3] [--batch 256] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_overhead import add_common_arguments, parse_checked, time_interleaved, write_json

import ampcore
from ampcore import optim
from ampcore.bench.models import MLP_SIZES, get_model
from ampcore.nn import functional as F

SIZES = MLP_SIZES  # the reference MLP: ampcore.bench.models, shared by every benchmark


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, steps=20, warmup=3)
    parser.add_argument("--device", default="opencl:0", help="an opencl device (default opencl:0)")
    return parse_checked(parser, argv)


def make_step(device: str, batch: int, seed: int, amp: bool) -> tuple[Callable[[], float], list[float]]:
    """A closure running one training step; it appends each step's loss to the returned list."""
    ampcore.manual_seed(seed)
    model = get_model("mlp").build(device)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    x = ampcore.tensor(rng.standard_normal((batch, SIZES[0]), dtype=np.float32), device=device)
    y = ampcore.tensor(rng.integers(0, SIZES[-1], batch), device=device)
    scaler = ampcore.GradScaler("opencl") if amp else None
    backend = ampcore.get_backend("opencl")
    index = ampcore.device(device).index
    losses: list[float] = []

    def step() -> float:
        opt.zero_grad()
        with ampcore.autocast("opencl", dtype="float16", enabled=amp):
            loss = F.cross_entropy(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        backend.synchronize(index)
        losses.append(loss)  # read after timing (a host sync)
        return 0.0

    return step, losses


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configs = {"float32": False, "amp float16": True}
    # Memory first, one configuration alive at a time: the other's weights and optimizer state would count too.
    backend, index = ampcore.get_backend("opencl"), ampcore.device(args.device).index
    memory = {
        name: backend.peak_memory(lambda amp=amp: make_step(args.device, args.batch, args.seed, amp)[0](), index)
        for name, amp in configs.items()
    }
    steps, losses = {}, {}
    for name, amp in configs.items():
        steps[name], losses[name] = make_step(args.device, args.batch, args.seed, amp)
    times = time_interleaved(steps, args.steps, args.warmup)
    capability = ampcore.get_backend("opencl").capabilities(ampcore.device(args.device).index)
    print(f"device {args.device}: {capability.device_name} ({capability.extra.get('float16')})")
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {args.batch}, AdamW; {args.steps} timed steps after {args.warmup}")
    print(f"{'config':<14}{'median ms/step':>16}{'spread ms':>12}{'pool MiB':>11}{'final loss':>12}")
    result: dict[str, Any] = {
        "device": args.device,
        "device_name": capability.device_name,
        "batch": args.batch,
        "steps": args.steps,
        "configs": {},
    }
    for name in configs:
        median = statistics.median(times[name])
        spread = max(times[name]) - min(times[name])
        final = float(losses[name][-1].item())
        print(f"{name:<14}{median * 1e3:>16.1f}{spread * 1e3:>12.1f}{memory[name] / 2**20:>11.1f}{final:>12.4f}")
        result["configs"][name] = {
            "median_s": median,
            "spread_s": spread,
            "pool_bytes": memory[name],
            "final_loss": final,
        }
    fp32, amp = result["configs"]["float32"], result["configs"]["amp float16"]
    speedup, memory_ratio = fp32["median_s"] / amp["median_s"], amp["pool_bytes"] / fp32["pool_bytes"]
    print(f"AMP speedup over float32: {speedup:.2f}x; AMP memory / float32 memory: {memory_ratio:.2f}")
    result.update(amp_speedup=speedup, amp_memory_ratio=memory_ratio)
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
