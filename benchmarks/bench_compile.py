"""Captured steps (``ampcore.compile``) against eager ampcore and torch eager, on the GPT port's training step.

The model, data and optimizer are examples/torch_ports/gpt.py's (a character-level GPT, 2 blocks, width 64,
block 32, batch 16; AdamW with decay groups), run as torch code and, renamed, as ampcore code, from the same
initial weights.  One step: forward and loss (under autocast to bfloat16 for the AMP rows), zero_grad,
backward, optimizer step.  Rows:

- torch eager, float32 and bfloat16 autocast;
- ampcore eager;
- ampcore with the model compiled (``model = ampcore.compile(model)``: nanoGPT's way, the optimizer eager);
- ampcore with the whole step compiled (one captured program: forward, backward, the AdamW step).

Every configuration runs on one thread (``set_num_threads(1)`` for both libraries: no worker threads spin
between steps, so the configurations can be timed interleaved, round-robin, and drift in a shared machine's
load falls on all alike); each step reseeds the generator, so every configuration draws the same dropout
masks.  Printed: the median step time of each, its ratio to torch eager in the same
precision, and whether each ampcore row's losses are bit-identical to ampcore eager's.

    python benchmarks/bench_compile.py [--steps 40] [--warmup 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
PORTS = HERE.parent / "examples" / "torch_ports"


def _harness() -> Any:
    spec = importlib.util.spec_from_file_location("torch_ports_harness", PORTS / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def make_step(framework: str, precision: str, how: str, weights: dict[str, np.ndarray] | None) -> tuple[Any, Any]:
    """(step function returning the detached loss, the torch/ampcore module) for one configuration."""
    port = _harness().load("gpt", framework)
    lib = port.torch if framework == "torch" else port.ampcore
    lib.manual_seed(0)
    train, _, chars = port.load_text(32)
    model = port.CharGPT(len(chars), 32)
    if weights is not None:
        model.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in weights.items()})
    opt = port.configure_optimizer(model, 3e-3, 0.1, "cpu")
    x, y = train[0:16]
    amp = precision != "float32"
    dtype = getattr(lib, precision)
    net = lib.compile(model) if how == "model" else model

    def step() -> Any:
        with lib.autocast(device_type="cpu", dtype=dtype, enabled=amp):
            _, loss = net(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return (lib.compile(step) if how == "step" else step), model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="timed steps per configuration")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per configuration first")
    args = parser.parse_args(argv)
    import ampcore

    ampcore.set_num_threads(1)
    have_torch = importlib.util.find_spec("torch") is not None
    if have_torch:
        import torch

        torch.set_num_threads(1)
    _, reference = make_step("ampcore", "float32", "eager", None)
    weights = {k: v.numpy() for k, v in reference.state_dict().items()}
    rows: dict[tuple[str, str, str], Callable[[], Any]] = {}
    for precision in ("float32", "bfloat16"):
        if have_torch:
            rows[("torch", precision, "eager")] = make_step("torch", precision, "eager", weights)[0]
        for how in ("eager", "model", "step"):
            rows[("ampcore", precision, how)] = make_step("ampcore", precision, how, weights)[0]
    times: dict[Any, list[float]] = {key: [] for key in rows}
    losses: dict[Any, list[bytes]] = {key: [] for key in rows}
    seeders = {"ampcore": ampcore.manual_seed, "torch": torch.manual_seed if have_torch else None}
    for round_ in range(args.warmup + args.steps):
        for key, step in rows.items():
            seeders[key[0]](1000 + round_)  # every configuration's dropout draws the same masks at each step
            start = time.perf_counter()
            loss = step()
            elapsed = time.perf_counter() - start
            losses[key].append(np.asarray(loss.float().numpy()).tobytes())
            if round_ >= args.warmup:
                times[key].append(elapsed)
    cpu = ampcore.get_backend("cpu").capabilities(0).device_name
    print(f"GPT port step (batch 16, block 32), one thread, {cpu}; median of {args.steps} after {args.warmup}")
    print(f"{'':8} {'precision':9} {'how':14} {'ms/step':>8} {'vs torch':>9}  losses vs ampcore eager")
    names = {"eager": "eager", "model": "compiled model", "step": "compiled step"}
    for key in rows:
        framework, precision, how = key
        median = statistics.median(times[key]) * 1e3
        torch_key = ("torch", precision, "eager")
        ratio = median / (statistics.median(times[torch_key]) * 1e3) if torch_key in times else None
        same = ""
        if framework == "ampcore" and how != "eager":
            same = "bit-identical" if losses[key] == losses[("ampcore", precision, "eager")] else "DIFFER"
        print(
            f"{framework:8} {precision:9} {names[how]:14} {median:8.2f} "
            f"{'-' if ratio is None else f'{ratio:.2f}x':>9}  {same}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
