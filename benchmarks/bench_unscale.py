"""Unscale + inf-check of float32 gradients on the CPU backend vs a plain NumPy copy of the same bytes.

Workload: 20 float32 gradient tensors, 10M elements in all (a few big
matrices, many small ones; ``--elements`` scales them), standard-normal data.
The floor is ``np.copyto`` of those same 20 arrays into 20 others: reading
and writing the bytes once is the least any one-pass kernel must do.  Timed
against it: the CPU backend's ``unscale_and_check`` (through
``ampcore.get_backend("cpu").kernels``) on 20 separately allocated arrays,
and on 20 views of one flat buffer (the layout a flat-parameter optimizer
gives).  The kernel works in place, so each call alternates inv_scale 2.0 and
0.5: the data stays finite and returns to its start every second call.

The three run interleaved (A, B, C, A, B, C, ...) after warm-up, in one
process, and the medians are compared.  If torch is importable, its
``_amp_foreach_non_finite_check_and_unscale_`` on the same data is timed in a
child process for reference (not interleaved).

    python benchmarks/bench_unscale.py [--steps 100] [--warmup 5] [--elements 10000000] [--json out.json] [--no-torch]

(``--batch``, common to the benchmark scripts, is not used here.)
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
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ampcore  # noqa: E402
from bench_overhead import add_common_arguments, parse_checked, time_interleaved, write_json  # noqa: E402

ELEMENTS = 10_000_000
# Relative tensor sizes (sum 1000): a few big weight matrices, mid-sized ones, biases/norm scales.
WEIGHTS = (250, 160, 120, 100, 80, 70, 60, 50, 40, 30, 15, 10, 5, 4, 3, 1, 1, 0.5, 0.25, 0.25)
TARGET_RATIO = 1.5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, steps=100, warmup=5)
    parser.add_argument("--elements", type=int, default=ELEMENTS,
                        help=f"gradient elements in all, split over {len(WEIGHTS)} tensors (default {ELEMENTS})")
    args = parse_checked(parser, argv)
    if args.elements < 1:
        parser.error(f"--elements must be at least 1, got {args.elements}")
    return args


def tensor_sizes(total: int) -> list[int]:
    """``total`` split over the tensors in the ``WEIGHTS`` proportions, summing exactly to ``total``."""
    sizes = [int(total * w / sum(WEIGHTS)) for w in WEIGHTS]
    sizes[0] += total - sum(sizes)
    return sizes


def make_grads(sizes: list[int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n, dtype=np.float32) for n in sizes]


def flat_views(grads: list[np.ndarray]) -> list[np.ndarray]:
    """Copies of ``grads`` as consecutive views of one flat buffer."""
    flat = np.concatenate(grads)
    bounds = np.cumsum([0] + [g.size for g in grads])
    return [flat[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]


def unscale_step(grads: list[np.ndarray], found_inf: np.ndarray) -> Callable[[], Any]:
    """One kernel call per invocation, inv_scale alternating 2.0 and 0.5 (exact, so the data cycles)."""
    kernel = ampcore.get_backend("cpu").kernels.unscale_and_check
    inv_scales = [np.array([2.0], np.float32), np.array([0.5], np.float32)]
    calls = [0]

    def step() -> None:
        calls[0] += 1
        kernel(grads, inv_scales[calls[0] % 2], found_inf)

    return step


def copy_step(src: list[np.ndarray]) -> Callable[[], Any]:
    dst = [np.empty_like(g) for g in src]
    return lambda: [np.copyto(d, s) for d, s in zip(dst, src)]


# ---------------------------------------------------------------------------- torch
def time_torch(grads: list[np.ndarray], args: argparse.Namespace) -> dict[str, Any] | None:
    """torch's figures from a child process (its OpenMP threads would slow what runs after them here)."""
    if args.no_torch or importlib.util.find_spec("torch") is None:
        return None
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "grads.npz")
        np.savez(path, *grads)
        proc = subprocess.run([sys.executable, __file__, "--torch-worker", path, "--steps", str(args.steps),
                               "--warmup", str(args.warmup)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the torch worker failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def torch_worker(path: str, steps: int, warmup: int) -> None:
    import torch

    data = np.load(path)
    grads = [torch.from_numpy(data[f"arr_{i}"]) for i in range(len(data.files))]
    found_inf = torch.zeros(1)
    inv_scales = [torch.full((1,), 2.0), torch.full((1,), 0.5)]
    calls = [0]

    def step() -> None:
        calls[0] += 1
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scales[calls[0] % 2])

    times = time_interleaved({"torch": step}, steps, warmup)["torch"]
    label = f"torch {torch.__version__} _amp_foreach_non_finite_check_and_unscale_ ({torch.get_num_threads()} threads)"
    print(json.dumps({"times": times, "label": label, "found_inf": float(found_inf[0])}))


# ---------------------------------------------------------------------------- report
def report(times: dict[str, list[float]], labels: dict[str, str], sizes: list[int]) -> dict[str, Any]:
    """Print the table and the PASS/FAIL line; return the figures."""
    from rich.console import Console
    from rich.table import Table

    med = {name: statistics.median(ts) for name, ts in times.items()}
    nbytes = 4 * sum(sizes)
    table = Table(title=f"unscale + inf-check: {len(sizes)} float32 tensors, {sum(sizes):,} elements, CPU")
    for col in ("implementation", "median ms", "min ms", "GB/s read+written", "vs floor"):
        table.add_column(col, justify="left" if col == "implementation" else "right")
    for name, ts in times.items():
        table.add_row(labels[name], f"{med[name] * 1e3:.2f}", f"{min(ts) * 1e3:.2f}",
                      f"{2 * nbytes / med[name] / 1e9:.1f}", f"{med[name] / med['floor']:.3f}x")
    Console(width=140).print(table)
    ratio, ratio_flat = med["kernel"] / med["floor"], med["kernel_flat"] / med["floor"]
    passed = max(ratio, ratio_flat) <= TARGET_RATIO
    print(f"kernel/floor ratio: {ratio:.3f}x (views of one flat buffer: {ratio_flat:.3f}x; "
          f"target <= {TARGET_RATIO}x: {'PASS' if passed else 'FAIL'})")
    return {"elements": sum(sizes), "sizes": sizes, "steps": len(times["floor"]), "median_s": med,
            "min_s": {n: min(t) for n, t in times.items()}, "ratio_kernel_floor": ratio,
            "ratio_kernel_flat_floor": ratio_flat, "target_ratio": TARGET_RATIO, "pass": passed, "labels": labels}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.torch_worker:
        torch_worker(args.torch_worker, args.steps, args.warmup)
        return 0
    sizes = tensor_sizes(args.elements)
    grads = make_grads(sizes, args.seed)
    found_inf = np.zeros(1, np.float32)
    steps = {"floor": copy_step(grads), "kernel": unscale_step(grads, found_inf),
             "kernel_flat": unscale_step(flat_views(grads), found_inf)}
    labels = {"floor": f"numpy {np.__version__} copyto (floor)", "kernel": "ampcore cpu unscale_and_check",
              "kernel_flat": "ampcore cpu unscale_and_check, views of one buffer"}
    times = time_interleaved(steps, args.steps, args.warmup)
    if found_inf[0] != 0:
        raise RuntimeError("the kernel reported inf/NaN in finite gradients")
    torch_result = time_torch(grads, args)
    if torch_result is not None:
        times["torch"], labels["torch"] = torch_result["times"], torch_result["label"]
    result = report(times, labels, sizes)
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
