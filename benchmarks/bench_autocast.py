"""What autocast costs and saves on the CPU backend: bfloat16 (emulated) vs float32 training steps.

Model: the reference MLP 784-1024-1024-10 (ReLU, cross-entropy, AdamW), batch
256, on ampcore's CPU backend.  The float32 step and the autocast step
(default bfloat16, ``--dtype float16`` for the other) start from the same
weights and batch, run interleaved (A, B, A, B, ...) after warm-up, and the
median step time of each is reported with their ratio.

Memory: the bytes held by arrays saved for backward after one forward and
loss, split into activations (what grows with the batch) and low-precision
copies of the weights that autocast saves for the backward matmuls (what
grows with the model; torch saves them too).  Parameters themselves are not
counted: they exist either way.

If torch is importable, the same two steps and the same byte counts in torch
(``torch.autocast("cpu", torch.bfloat16)``) are measured in a child process,
for reference.

    python benchmarks/bench_autocast.py [--steps 20] [--batch 256] [--dtype bfloat16] [--json out.json] [--no-torch]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_overhead import (
    BETAS,
    EPS,
    LR,
    SIZES,
    WEIGHT_DECAY,
    add_common_arguments,
    make_data,
    parse_checked,
    time_interleaved,
    torch_mlp,
    write_json,
)

import ampcore
from ampcore import nn, optim
from ampcore.amp.state import thread_state
from ampcore.autograd import saved_bytes
from ampcore.bench.models import get_model

TARGET_TIME_RATIO = 1.3
TARGET_ACTIVATION_RATIO = 0.6


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, steps=20, warmup=3)
    parser.add_argument(
        "--dtype", default="bfloat16", choices=("bfloat16", "float16"), help="autocast dtype (default bfloat16)"
    )
    return parse_checked(parser, argv)


# ---------------------------------------------------------------------------- ampcore
class AmpcoreRun:
    """One model + optimizer; ``step(amp)`` trains one step, ``saved_bytes(amp)`` measures one forward."""

    def __init__(self, weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, dtype: str):
        self.model = get_model("mlp").build("cpu")
        for p, w in zip(self.model.parameters(), weights):
            with ampcore.no_grad():
                p.copy_(ampcore.from_numpy(w))
        self.opt = optim.AdamW(self.model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
        self.loss_fn = nn.CrossEntropyLoss()
        self.x, self.y = ampcore.from_numpy(x), ampcore.from_numpy(y)
        self.dtype = dtype

    def forward(self, amp: bool) -> tuple[Any, list[Any]]:
        """The loss, and the weight casts autocast made (read before the region clears them)."""
        if not amp:
            return self.loss_fn(self.model(self.x), self.y), []
        with ampcore.autocast("cpu", dtype=self.dtype):
            loss = self.loss_fn(self.model(self.x), self.y)
            weight_casts = [entry[2] for entry in thread_state.cast_cache.values()]
        return loss, weight_casts

    def step(self, amp: bool) -> float:
        self.opt.zero_grad()
        loss, _ = self.forward(amp)
        loss.backward()
        self.opt.step()
        return loss.item()

    def saved_bytes(self, amp: bool) -> dict[str, int]:
        """Bytes the graph saved for backward, parameters excluded, split into activations and weight casts."""
        loss, weight_casts = self.forward(amp)
        params = list(self.model.parameters())
        total = saved_bytes(loss, exclude=params)
        activations = saved_bytes(loss, exclude=params + weight_casts)
        return {"activations": activations, "weight_copies": total - activations}


# ---------------------------------------------------------------------------- torch (reference)
def torch_worker(path: str, steps: int, warmup: int, dtype: str) -> None:
    import torch

    data = np.load(path)
    weights = [data[f"arr_{i}"] for i in range(2 * (len(SIZES) - 1))]
    model = torch_mlp(weights)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    x, y = torch.from_numpy(data["x"].copy()), torch.from_numpy(data["y"].copy())
    low = getattr(torch, dtype)

    def forward(amp: bool) -> Any:
        with torch.autocast("cpu", dtype=low, enabled=amp):
            return torch.nn.functional.cross_entropy(model(x), y)

    def step(amp: bool) -> None:
        opt.zero_grad()
        forward(amp).backward()
        opt.step()

    def saved(amp: bool) -> int:
        storages: dict[int, int] = {}
        param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}

        def pack(t: Any) -> Any:
            s = t.untyped_storage()
            if s.data_ptr() not in param_ptrs:
                storages[s.data_ptr()] = s.nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            forward(amp)
        return sum(storages.values())

    times = time_interleaved({"fp32": lambda: step(False), "amp": lambda: step(True)}, steps, warmup)
    print(
        json.dumps(
            {
                "times": times,
                "saved": {"fp32": saved(False), "amp": saved(True)},
                "label": f"torch {torch.__version__} ({torch.get_num_threads()} threads)",
            }
        )
    )


def time_torch(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, args: argparse.Namespace) -> Any:
    """torch's figures from a child process (its OpenMP threads would slow the ampcore steps here)."""
    if importlib.util.find_spec("torch") is None:
        return None
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "inputs.npz")
        np.savez(path, *weights, x=x, y=y)
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--torch-worker",
                path,
                "--steps",
                str(args.steps),
                "--warmup",
                str(args.warmup),
                "--dtype",
                args.dtype,
            ],
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"the torch worker failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


# ---------------------------------------------------------------------------- report
def report(
    args: argparse.Namespace,
    times: dict[str, list[float]],
    saved: dict[str, dict[str, int]],
    losses: dict[str, float],
    torch_result: Any,
) -> dict[str, Any]:
    from rich.console import Console
    from rich.table import Table

    med = {k: statistics.median(v) for k, v in times.items()}
    mib = lambda n: f"{n / 2**20:.2f}"  # noqa: E731 - local formatting
    table = Table(title=f"MLP {'-'.join(map(str, SIZES))}, batch {args.batch}, CPU: float32 vs autocast {args.dtype}")
    for col in (
        "configuration",
        "median ms/step",
        "vs fp32",
        "activations MiB",
        "weight copies MiB",
        "loss after step 1",
    ):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for name, label in (("fp32", "ampcore float32"), ("amp", f"ampcore autocast {args.dtype}")):
        table.add_row(
            label,
            f"{med[name] * 1e3:.2f}",
            f"{med[name] / med['fp32']:.3f}x",
            mib(saved[name]["activations"]),
            mib(saved[name]["weight_copies"]),
            f"{losses[name]:.5f}",
        )
    result: dict[str, Any] = {
        "batch": args.batch,
        "sizes": SIZES,
        "dtype": args.dtype,
        "steps": args.steps,
        "median_s": med,
        "time_ratio": med["amp"] / med["fp32"],
        "saved_bytes": saved,
        "activation_ratio": saved["amp"]["activations"] / saved["fp32"]["activations"],
        "total_saved_ratio": sum(saved["amp"].values()) / sum(saved["fp32"].values()),
        "first_loss": losses,
    }
    if torch_result is not None:
        tmed = {k: statistics.median(v) for k, v in torch_result["times"].items()}
        for name, label in (("fp32", "float32"), ("amp", f"autocast {args.dtype}")):
            table.add_row(
                f"{torch_result['label']} {label}",
                f"{tmed[name] * 1e3:.2f}",
                f"{tmed[name] / tmed['fp32']:.3f}x",
                mib(torch_result["saved"][name]),
                "(incl.)",
                "",
            )
        result["torch"] = {
            "label": torch_result["label"],
            "median_s": tmed,
            "time_ratio": tmed["amp"] / tmed["fp32"],
            "saved_bytes": torch_result["saved"],
            "total_saved_ratio": torch_result["saved"]["amp"] / torch_result["saved"]["fp32"],
        }
    Console(width=140).print(table)
    ok = lambda good: "ok" if good else "ABOVE TARGET"  # noqa: E731
    print(
        f"autocast/fp32 step time: {result['time_ratio']:.3f}x "
        f"(target <= {TARGET_TIME_RATIO}x: {ok(result['time_ratio'] <= TARGET_TIME_RATIO)})"
    )
    print(
        f"autocast/fp32 activation bytes saved for backward: {result['activation_ratio']:.3f}x "
        f"(target <= {TARGET_ACTIVATION_RATIO}x: {ok(result['activation_ratio'] <= TARGET_ACTIVATION_RATIO)})"
    )
    print(
        f"autocast/fp32 all bytes saved for backward (with weight copies): {result['total_saved_ratio']:.3f}x"
        + (f"; torch: {result['torch']['total_saved_ratio']:.3f}x" if "torch" in result else "")
    )
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.torch_worker:
        torch_worker(args.torch_worker, args.steps, args.warmup, args.dtype)
        return 0
    ampcore.manual_seed(args.seed)
    x, y = make_data(args.batch, args.seed)
    weights = [p.numpy() for p in AmpcoreRun([], x, y, args.dtype).model.parameters()]
    runs = {"fp32": AmpcoreRun(weights, x, y, args.dtype), "amp": AmpcoreRun(weights, x, y, args.dtype)}
    saved = {name: run.saved_bytes(name == "amp") for name, run in runs.items()}
    losses = {name: run.step(name == "amp") for name, run in runs.items()}
    steps: dict[str, Callable[[], Any]] = {
        name: (lambda r=run, a=(name == "amp"): r.step(a)) for name, run in runs.items()
    }
    times = time_interleaved(steps, args.steps, args.warmup)
    torch_result = None if args.no_torch else time_torch(weights, x, y, args)
    result = report(args, times, saved, losses, torch_result)
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
