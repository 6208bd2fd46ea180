"""Unscale + inf-check of float32 gradients on a backend vs a plain copy of the same bytes.

Workload: 20 float32 gradient tensors, 10M elements in all (a few big
matrices, many small ones; ``--elements`` scales them), standard-normal data.
The floor is a copy of those same 20 arrays into 20 others: reading and
writing the bytes once is the least any one-pass kernel must do.  On the cpu
backend that is ``np.copyto``; on another ``--device`` (opencl:0, cuda:0) it
is the backend's own ``cast`` kernel to the same dtype, a device copy.  Timed
against it: the backend's ``unscale_and_check`` (through
``ampcore.get_backend(name).kernels``) on 20 separately allocated arrays, and
on the cpu backend also on 20 views of one flat buffer (the layout a
flat-parameter optimizer gives).  The kernel works in place, so each call
alternates inv_scale 2.0 and 0.5: the data stays finite and returns to its
start every second call.  Every call ends by waiting for the device.

On a GPU the figure to read is the kernel's bandwidth as a fraction of the
copy's (the CUDA issue's target: at least 0.7x over 100M elements,
``--device cuda:0 --elements 100000000``).

The three run interleaved (A, B, C, A, B, C, ...) after warm-up, in one
process, and the medians are compared.  If torch is importable, its
``_amp_foreach_non_finite_check_and_unscale_`` on the same data is timed in a
child process for reference (not interleaved).

    python benchmarks/bench_unscale.py [--device cpu] [--steps 100] [--warmup 5] [--elements 10000000] [--json out.json]
                                       [--no-torch]

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
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_overhead import add_common_arguments, parse_checked, time_interleaved, write_json

import ampcore
from ampcore.bench.benchmark import check_not_simulated

ELEMENTS = 10_000_000
# Relative tensor sizes (sum 1000): a few big weight matrices, mid-sized ones, biases/norm scales.
WEIGHTS = (250, 160, 120, 100, 80, 70, 60, 50, 40, 30, 15, 10, 5, 4, 3, 1, 1, 0.5, 0.25, 0.25)
TARGET_RATIO = 1.5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, steps=100, warmup=5)
    parser.add_argument("--device", default="cpu", help="the device whose kernel is timed (default cpu)")
    parser.add_argument(
        "--elements",
        type=int,
        default=ELEMENTS,
        help=f"gradient elements in all, split over {len(WEIGHTS)} tensors (default {ELEMENTS})",
    )
    args = parse_checked(parser, argv)
    if args.elements < 1:
        parser.error(f"--elements must be at least 1, got {args.elements}")
    if not args.torch_worker:
        try:
            ampcore.get_backend(ampcore.device(args.device).type)
            check_not_simulated(args.device)  # a simulated GPU's timings are the CPU's: refused
        except (ValueError, RuntimeError) as exc:  # unknown, unavailable or broken: one line, exit status 2
            parser.error(f"--device {args.device}: {exc}")
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


class BenchDevice:
    """A backend device: its kernels, host-to-device copies, and a wait for queued work."""

    def __init__(self, name: str):
        self.device = ampcore.device(name)
        self.backend = ampcore.get_backend(self.device.type)
        self.kernels = self.backend.kernels

    def put(self, array: np.ndarray) -> Any:
        return self.backend.from_numpy(array, ampcore.dtypes.as_dtype(array.dtype), self.device.index)

    def get(self, array: Any) -> np.ndarray:
        return np.asarray(self.backend.to_numpy(array))

    def timed(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` followed by a wait for the device, so a clock around it sees the device's work."""

        def call() -> None:
            fn()
            self.backend.synchronize(self.device.index)

        return call


def unscale_step(dev: BenchDevice, grads: list[Any], found_inf: Any) -> Callable[[], Any]:
    """One kernel call per invocation, inv_scale alternating 2.0 and 0.5 (exact, so the data cycles)."""
    kernel = dev.kernels.unscale_and_check
    inv_scales = [dev.put(np.array([2.0], np.float32)), dev.put(np.array([0.5], np.float32))]
    calls = [0]

    def step() -> None:
        calls[0] += 1
        kernel(grads, inv_scales[calls[0] % 2], found_inf)

    return dev.timed(step)


def copy_step(dev: BenchDevice, src: list[Any]) -> Callable[[], Any]:
    """The floor: every byte of ``src`` read and written once (np.copyto on cpu, a same-dtype cast elsewhere)."""
    if dev.device.type == "cpu":
        dst = [np.empty_like(g) for g in src]
        return lambda: [np.copyto(d, s) for d, s in zip(dst, src)]
    cast, f32 = dev.kernels.cast, ampcore.float32
    return dev.timed(lambda: [cast(g, f32) for g in src])


# ---------------------------------------------------------------------------- torch
def time_torch(grads: list[np.ndarray], args: argparse.Namespace) -> dict[str, Any] | None:
    """torch's figures from a child process (its OpenMP threads would slow what runs after them here), on the
    CPU for the cpu backend and on CUDA for the cuda backend; None for other devices or without torch."""
    kind = ampcore.device(args.device).type
    if args.no_torch or kind not in ("cpu", "cuda") or importlib.util.find_spec("torch") is None:
        return None
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "grads.npz")
        np.savez(path, *grads)
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
                "--device",
                kind,
            ],
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"the torch worker failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def torch_worker(path: str, steps: int, warmup: int, device: str) -> None:
    import torch

    data = np.load(path)
    grads = [torch.from_numpy(data[f"arr_{i}"]).to(device) for i in range(len(data.files))]
    found_inf = torch.zeros(1, device=device)
    inv_scales = [torch.full((1,), 2.0, device=device), torch.full((1,), 0.5, device=device)]
    calls = [0]

    def step() -> None:
        calls[0] += 1
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scales[calls[0] % 2])
        if device == "cuda":
            torch.cuda.synchronize()

    times = time_interleaved({"torch": step}, steps, warmup)["torch"]
    label = f"torch {torch.__version__} _amp_foreach_non_finite_check_and_unscale_ ({torch.get_num_threads()} threads)"
    print(json.dumps({"times": times, "label": label, "found_inf": float(found_inf[0].cpu())}))


# ---------------------------------------------------------------------------- report
def report(times: dict[str, list[float]], labels: dict[str, str], sizes: list[int], device: str) -> dict[str, Any]:
    """Print the table and the PASS/FAIL line; return the figures."""
    from rich.console import Console
    from rich.table import Table

    med = {name: statistics.median(ts) for name, ts in times.items()}
    nbytes = 4 * sum(sizes)
    table = Table(title=f"unscale + inf-check: {len(sizes)} float32 tensors, {sum(sizes):,} elements, {device}")
    for col in ("implementation", "median ms", "min ms", "GB/s read+written", "vs floor"):
        table.add_column(col, justify="left" if col == "implementation" else "right")
    for name, ts in times.items():
        table.add_row(
            labels[name],
            f"{med[name] * 1e3:.2f}",
            f"{min(ts) * 1e3:.2f}",
            f"{2 * nbytes / med[name] / 1e9:.1f}",
            f"{med[name] / med['floor']:.3f}x",
        )
    Console(width=140).print(table)
    ratio = med["kernel"] / med["floor"]
    ratio_flat = med["kernel_flat"] / med["floor"] if "kernel_flat" in med else ratio
    passed = max(ratio, ratio_flat) <= TARGET_RATIO
    flat = f" (views of one flat buffer: {ratio_flat:.3f}x)" if "kernel_flat" in med else ""
    print(f"kernel/floor ratio: {ratio:.3f}x{flat}; target <= {TARGET_RATIO}x: {'PASS' if passed else 'FAIL'}")
    print(f"kernel bandwidth / copy bandwidth: {1 / ratio:.2f}x")
    return {
        "device": device,
        "elements": sum(sizes),
        "sizes": sizes,
        "steps": len(times["floor"]),
        "median_s": med,
        "min_s": {n: min(t) for n, t in times.items()},
        "ratio_kernel_floor": ratio,
        "ratio_kernel_flat_floor": ratio_flat,
        "bandwidth_vs_copy": 1 / ratio,
        "target_ratio": TARGET_RATIO,
        "pass": passed,
        "labels": labels,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.torch_worker:
        torch_worker(args.torch_worker, args.steps, args.warmup, args.device)
        return 0
    dev = BenchDevice(args.device)
    sizes = tensor_sizes(args.elements)
    host_grads = make_grads(sizes, args.seed)
    grads = [dev.put(g) for g in host_grads]
    found_inf = dev.put(np.zeros(1, np.float32))
    steps = {"floor": copy_step(dev, grads), "kernel": unscale_step(dev, grads, found_inf)}
    name = f"{dev.device.type}:{dev.device.index}"
    labels = {
        "floor": (
            f"numpy {np.__version__} copyto (floor)"
            if dev.device.type == "cpu"
            else f"ampcore {name} cast to float32, a device copy (floor)"
        ),
        "kernel": f"ampcore {name} unscale_and_check",
    }
    if dev.device.type == "cpu":
        steps["kernel_flat"] = unscale_step(dev, flat_views(grads), found_inf)
        labels["kernel_flat"] = "ampcore cpu unscale_and_check, views of one buffer"
    times = time_interleaved(steps, args.steps, args.warmup)
    if dev.get(found_inf)[0] != 0:
        raise RuntimeError("the kernel reported inf/NaN in finite gradients")
    torch_result = time_torch(host_grads, args)
    if torch_result is not None:
        times["torch"], labels["torch"] = torch_result["times"], torch_result["label"]
    result = report(times, labels, sizes, name)
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
