"""Framework overhead: one training step of an MLP in ampcore vs the same step in plain NumPy.

Model: 784-1024-1024-10 MLP with ReLU, cross-entropy loss and AdamW, float32,
on ampcore's CPU backend.  The baseline is the same step written directly in
NumPy: hand-derived forward and backward into preallocated buffers and AdamW
with in-place ``out=`` ops, so the ratio measures what ampcore adds (dispatch,
autograd, allocation) over what BLAS and NumPy must do anyway.  If torch is
importable, its CPU float32 step is timed too.

All implementations start from the same weights and see the same seeded
random batch.  The ampcore and NumPy steps are interleaved (A, B, A, B, ...)
after warm-up, so drift in machine load hits both alike, and the median is
reported.  torch runs afterwards in a child process (its OpenMP threads spin
after each op and would slow the BLAS threads of the steps that follow them).

    python benchmarks/bench_overhead.py [--steps 30] [--batch 256] [--warmup 5] [--json out.json] [--no-torch]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import ampcore
from ampcore import nn, optim
from ampcore.bench import torch_reference
from ampcore.bench.models import MLP_SIZES, get_model

SIZES = MLP_SIZES  # the reference MLP: ampcore.bench.models, shared by every benchmark
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 1e-2
TARGET_RATIO = 1.25


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, steps=30, warmup=5)
    return parse_checked(parser, argv)


def add_common_arguments(parser: argparse.ArgumentParser, steps: int, warmup: int) -> None:
    """The options every benchmark script takes (the defaults differ per script)."""
    parser.add_argument("--steps", type=int, default=steps, help=f"timed steps per configuration (default {steps})")
    parser.add_argument("--batch", type=int, default=256, help="batch size (default 256)")
    parser.add_argument("--warmup", type=int, default=warmup, help=f"untimed steps first (default {warmup})")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and data (default 0)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--no-torch", action="store_true", help="skip torch even if it is installed")
    parser.add_argument("--torch-worker", metavar="NPZ", help=argparse.SUPPRESS)  # internal: the torch child


def parse_checked(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, with a usage error (exit 2) for a count out of range."""
    args = parser.parse_args(argv)
    for name in ("steps", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must be non-negative, got {args.warmup}")
    return args


def make_data(batch: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, SIZES[0]), dtype=np.float32)
    y = rng.integers(0, SIZES[-1], size=batch, dtype=np.int64)
    return x, y


# ---------------------------------------------------------------------------- ampcore
def build_ampcore(x: np.ndarray, y: np.ndarray, seed: int) -> tuple[Callable[[], None], list[np.ndarray]]:
    """The ampcore step and the initial weights (as NumPy copies) for the other implementations."""
    ampcore.manual_seed(seed)
    model = get_model("mlp").build("cpu")
    opt = optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    loss_fn = nn.CrossEntropyLoss()
    xt, yt = ampcore.from_numpy(x, device="cpu"), ampcore.from_numpy(y, device="cpu")
    weights = [p.numpy() for p in model.parameters()]

    def step() -> None:
        opt.zero_grad()
        loss = loss_fn(model(xt), yt)
        loss.backward()
        opt.step()

    return step, weights


# ---------------------------------------------------------------------------- NumPy
class NumpyMLP:
    """The same training step by hand: preallocated buffers, BLAS matmuls, in-place AdamW."""

    def __init__(self, weights: list[np.ndarray], batch: int):
        self.params = [w.copy() for w in weights]  # W1, b1, W2, b2, W3, b3; W is (out, in) as in torch
        self.m = [np.zeros_like(p) for p in self.params]
        self.v = [np.zeros_like(p) for p in self.params]
        self.grads = [np.empty_like(p) for p in self.params]
        self.tmp = [np.empty_like(p) for p in self.params]
        self.acts = [np.empty((batch, n), np.float32) for n in SIZES[1:]]
        self.dacts = [np.empty((batch, n), np.float32) for n in SIZES[1:]]
        self.t = 0

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        loss = self._forward_backward(x, y)
        self._adamw()
        return loss

    def _forward_backward(self, x: np.ndarray, y: np.ndarray) -> float:
        p, acts, dacts, grads = self.params, self.acts, self.dacts, self.grads
        n_layers = len(SIZES) - 1
        inp = x
        for i in range(n_layers):
            np.matmul(inp, p[2 * i].T, out=acts[i])
            acts[i] += p[2 * i + 1]
            if i < n_layers - 1:
                np.maximum(acts[i], 0.0, out=acts[i])
            inp = acts[i]
        loss = _softmax_cross_entropy(acts[-1], y, dacts[-1])
        for i in reversed(range(n_layers)):
            d = dacts[i]
            if i < n_layers - 1:
                np.multiply(d, acts[i] > 0, out=d)  # ReLU gate
            prev = acts[i - 1] if i > 0 else x
            np.matmul(d.T, prev, out=grads[2 * i])
            np.sum(d, axis=0, out=grads[2 * i + 1])
            if i > 0:
                np.matmul(d, p[2 * i], out=dacts[i - 1])
        return loss

    def _adamw(self) -> None:
        self.t += 1
        beta1, beta2 = BETAS
        step_size = LR / (1 - beta1**self.t)
        bc2_sqrt = math.sqrt(1 - beta2**self.t)
        for p, g, m, v, t in zip(self.params, self.grads, self.m, self.v, self.tmp):
            p *= 1 - LR * WEIGHT_DECAY
            np.subtract(g, m, out=t)
            t *= 1 - beta1
            m += t
            v *= beta2
            np.multiply(g, g, out=t)
            t *= 1 - beta2
            v += t
            np.sqrt(v, out=t)
            t /= bc2_sqrt
            t += EPS
            np.divide(m, t, out=t)
            t *= step_size
            p -= t


def _softmax_cross_entropy(logits: np.ndarray, y: np.ndarray, dlogits: np.ndarray) -> float:
    """Mean cross-entropy; writes d(loss)/d(logits) into ``dlogits``."""
    rows = np.arange(len(y))
    np.subtract(logits, logits.max(axis=1, keepdims=True), out=dlogits)
    picked = dlogits[rows, y].copy()
    np.exp(dlogits, out=dlogits)
    total = dlogits.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(total[:, 0]) - picked))
    dlogits /= total
    dlogits[rows, y] -= 1.0
    dlogits /= len(y)
    return loss


# ---------------------------------------------------------------------------- torch
def torch_mlp(weights: list[np.ndarray]) -> Any:
    """The reference MLP in torch, holding ``weights`` (raises ImportError without torch)."""
    import torch

    model = torch_reference.mlp(SIZES)
    with torch.no_grad():
        for p, w in zip(model.parameters(), weights):
            p.copy_(torch.from_numpy(w))
    return model


def torch_step(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[Callable[[], None], str]:
    """torch's step on the same weights and data (raises ImportError without torch)."""
    import torch

    model = torch_mlp(weights)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    loss_fn = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())

    def step() -> None:
        opt.zero_grad()
        loss = loss_fn(model(xt), yt)
        loss.backward()
        opt.step()

    return step, f"torch {torch.__version__} ({torch.get_num_threads()} threads)"


def time_torch(
    weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, args: argparse.Namespace, workdir: str
) -> tuple[list[float], str] | None:
    """torch's step times, measured in a child process (None if torch is not importable there).

    A child, because torch's OpenMP threads keep spinning after each op and
    would slow whatever runs next in this process (BLAS threads of the
    ampcore and NumPy steps); the torch figure is therefore not interleaved.
    """
    if importlib.util.find_spec("torch") is None:
        return None
    path = os.path.join(workdir, "bench_inputs.npz")
    np.savez(path, *weights, x=x, y=y)
    proc = subprocess.run(
        [sys.executable, __file__, "--torch-worker", path, "--steps", str(args.steps), "--warmup", str(args.warmup)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the torch worker failed:\n{proc.stderr}")
    result = json.loads(proc.stdout)
    return result["times"], result["label"]


def torch_worker(path: str, steps: int, warmup: int) -> None:
    data = np.load(path)
    weights = [data[f"arr_{i}"] for i in range(2 * (len(SIZES) - 1))]
    step, label = torch_step(weights, data["x"], data["y"])
    times = time_interleaved({"torch": step}, steps, warmup)["torch"]
    print(json.dumps({"times": times, "label": label}))


# ---------------------------------------------------------------------------- timing
def write_json(path: str | None, result: dict[str, Any]) -> None:
    """Write ``result`` to ``path`` (the ``--json`` option) when one was given."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


def time_interleaved(steps: dict[str, Callable[[], Any]], n: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per call of each step, the implementations taking turns."""
    for _ in range(warmup):
        for fn in steps.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(n):
        for name, fn in steps.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def check_same_first_loss(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """|loss_ampcore - loss_numpy| on the initial weights: both compute the same function."""
    model = NumpyMLP(weights, len(x))
    numpy_loss = model._forward_backward(x, y)
    layers = [nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:])]
    for layer, (w, b) in zip(layers, zip(weights[::2], weights[1::2])):
        layer.load_state_dict({"weight": ampcore.from_numpy(w), "bias": ampcore.from_numpy(b)})
    h = ampcore.from_numpy(x)
    for i, layer in enumerate(layers):
        h = layer(h)
        h = h.relu() if i < len(layers) - 1 else h
    with ampcore.no_grad():
        loss = nn.functional.cross_entropy(h, ampcore.from_numpy(y)).item()
    return abs(loss - numpy_loss)


def report(times: dict[str, list[float]], labels: dict[str, str], batch: int) -> dict[str, Any]:
    """Print the table and the ratio lines; return the figures."""
    from rich.console import Console
    from rich.table import Table

    med = {name: statistics.median(ts) for name, ts in times.items()}
    table = Table(title=f"MLP {'-'.join(map(str, SIZES))} training step, batch {batch}, float32, CPU")
    for col in ("implementation", "median ms/step", "min ms/step", "vs numpy"):
        table.add_column(col, justify="left" if col == "implementation" else "right")
    for name, ts in times.items():
        table.add_row(
            labels[name], f"{med[name] * 1e3:.2f}", f"{min(ts) * 1e3:.2f}", f"{med[name] / med['numpy']:.3f}x"
        )
    console = Console(width=100)
    console.print(table)
    ratio = med["ampcore"] / med["numpy"]
    verdict = "ok" if ratio <= TARGET_RATIO else "ABOVE TARGET"
    print(f"ampcore/numpy ratio: {ratio:.3f}x (target <= {TARGET_RATIO}x: {verdict})")
    result: dict[str, Any] = {
        "batch": batch,
        "sizes": SIZES,
        "steps": len(times["ampcore"]),
        "median_s": med,
        "min_s": {n: min(t) for n, t in times.items()},
        "ratio_ampcore_numpy": ratio,
        "labels": labels,
    }
    if "torch" in med:
        result["ratio_ampcore_torch"] = med["ampcore"] / med["torch"]
        print(f"ampcore/torch ratio: {result['ratio_ampcore_torch']:.3f}x")
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.torch_worker:
        torch_worker(args.torch_worker, args.steps, args.warmup)
        return 0
    x, y = make_data(args.batch, args.seed)
    ampcore_step, weights = build_ampcore(x, y, args.seed)
    numpy_model = NumpyMLP(weights, args.batch)
    steps: dict[str, Callable[[], Any]] = {"ampcore": ampcore_step, "numpy": lambda: numpy_model.step(x, y)}
    labels = {"ampcore": f"ampcore {ampcore.__version__} (cpu backend)", "numpy": f"numpy {np.__version__} by hand"}
    diff = check_same_first_loss(weights, x, y)
    print(f"initial loss |ampcore - numpy| = {diff:.2e}")
    times = time_interleaved(steps, args.steps, args.warmup)
    if not args.no_torch:
        with tempfile.TemporaryDirectory() as workdir:
            timed = time_torch(weights, x, y, args, workdir)
        if timed is not None:
            times["torch"], labels["torch"] = timed
    result = report(times, labels, args.batch)
    result["initial_loss_abs_diff"] = diff
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
