"""The GEMMs of a benchmark MLP's linear layers, in bfloat16 and float16, ampcore against torch in the same run.

    python benchmarks/bench_linear_gemms.py --device cuda:0                 # mlp-large: batch 8192, 4096 wide
    python benchmarks/bench_linear_gemms.py --device cpu --model mlp --steps 3

Each Linear of ``--model`` (``ampcore.bench.models``) runs three GEMMs per training step, with the operand
layouts a Linear has: ``y = x @ w.T`` (forward), ``gx = g @ w`` and ``gw = g.T @ x`` (backward).  Each
distinct (shape, layout) is timed in each 16-bit dtype through ``ampcore.matmul`` on transposed views (as the
Linear's autograd passes them) and through ``torch.matmul`` on the same views where torch sees the device.
Prints TFLOP/s (2*M*N*K per product; median of ``--steps`` after two warm-ups), ampcore's over torch's, and
the step's GEMM total; ``--json PATH`` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import ampcore
from ampcore.bench.models import get_model


def _median_s(fn: Callable[[], object], sync: Callable[[], None], steps: int) -> float:
    for _ in range(2):
        fn()
    sync()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def linear_gemms(model: str) -> list[tuple[str, int, int, int, int]]:
    """The distinct (first layer's name, batch rows, fan_in, fan_out, layers of that shape) of ``model``'s
    Linear layers."""
    spec = get_model(model)
    seen: dict[tuple[int, int], list[str]] = {}
    for name, module in spec.build("cpu").named_modules():
        if isinstance(module, ampcore.nn.Linear):
            seen.setdefault((module.in_features, module.out_features), []).append(name)
    return [(names[0], spec.batch, fan_in, fan_out, len(names)) for (fan_in, fan_out), names in seen.items()]


def _torch_device(device: Any) -> Any:
    try:
        import torch
    except ImportError:
        return None, None
    if device.type == "cuda" and torch.cuda.is_available():
        return torch, torch.device("cuda", device.index or 0)
    if device.type == "cpu":
        return torch, torch.device("cpu")
    return torch, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default="mlp-large")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    device = ampcore.device(args.device)
    backend = getattr(ampcore, device.type)
    sync = lambda: backend.synchronize(device)  # noqa: E731 - a one-line timer hook
    torch, torch_device = _torch_device(device)
    if torch is None:
        print("torch is not installed: its rows are left out (pip install torch)")
    rows: list[dict[str, Any]] = []
    for dtype_name in ("bfloat16", "float16"):
        dtype = ampcore.dtypes.as_dtype(dtype_name)
        for layer, m, fan_in, fan_out, count in linear_gemms(args.model):
            x = ampcore.randn(m, fan_in, device=device).to(dtype)
            w = ampcore.randn(fan_out, fan_in, device=device).to(dtype)
            g = ampcore.randn(m, fan_out, device=device).to(dtype)
            gemms = {  # name: (ampcore product, (M, K, N), torch product on torch tensors (x, w, g))
                "forward x @ w.T": (lambda x=x, w=w: x @ w.t(), (m, fan_in, fan_out), lambda t: t[0] @ t[1].t()),
                "grad_input g @ w": (lambda g=g, w=w: g @ w, (m, fan_out, fan_in), lambda t: t[2] @ t[1]),
                "grad_weight g.T @ x": (lambda g=g, x=x: g.t() @ x, (fan_out, m, fan_in), lambda t: t[2].t() @ t[0]),
            }
            host = None
            if torch_device is not None:
                tdtype = getattr(torch, dtype_name)
                host = tuple(torch.from_numpy(v.float().numpy()).to(torch_device, tdtype) for v in (x, w, g))
                tsync = torch.cuda.synchronize if torch_device.type == "cuda" else (lambda: None)
            for name, (product, (gm, gk, gn), torch_product) in gemms.items():
                flops = 2.0 * gm * gn * gk
                row = {"dtype": dtype_name, "layer": layer, "layers": count, "gemm": name, "m": gm, "k": gk, "n": gn}
                row["flops"] = flops
                row["ampcore_seconds"] = _median_s(product, sync, args.steps)
                row["ampcore_tflops"] = flops / row["ampcore_seconds"] / 1e12
                if host is not None:
                    tt = host
                    row["torch_seconds"] = _median_s(lambda tt=tt, f=torch_product: f(tt), tsync, args.steps)
                    row["torch_tflops"] = flops / row["torch_seconds"] / 1e12
                    row["ampcore_vs_torch"] = row["ampcore_tflops"] / row["torch_tflops"]
                rows.append(row)
    totals = _totals(rows)
    print(f"{args.model} linear GEMMs on {device} (TFLOP/s, median of {args.steps}):")
    for r in rows:
        ratio = (
            f"  torch {r['torch_tflops']:8.2f}  ampcore/torch {r['ampcore_vs_torch']:5.2f}"
            if "torch_tflops" in r
            else ""
        )
        print(
            f"  {r['dtype']:8s} {r['layer']:>3s} x{r['layers']} {r['gemm']:20s} {r['m']:>5d}x{r['k']:>5d}x{r['n']:>5d}"
            f"  ampcore {r['ampcore_tflops']:8.2f}{ratio}"
        )
    for dtype_name, t in totals.items():
        ratio = (
            f", torch {t['torch_tflops']:.1f}: ampcore/torch {t['ampcore_vs_torch']:.2f}" if "torch_tflops" in t else ""
        )
        print(f"  a training step's linear GEMMs in {dtype_name}: ampcore {t['ampcore_tflops']:.1f} TFLOP/s{ratio}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(device), "model": args.model, "rows": rows, "totals": totals}, f, indent=1)


def _totals(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per dtype: every Linear's three GEMMs once (a training step's), as one TFLOP/s figure per framework."""
    out: dict[str, dict[str, float]] = {}
    for dtype_name in sorted({r["dtype"] for r in rows}):
        mine = [r for r in rows if r["dtype"] == dtype_name]
        flops = sum(r["flops"] * r["layers"] for r in mine)
        t = {"ampcore_tflops": flops / sum(r["ampcore_seconds"] * r["layers"] for r in mine) / 1e12}
        if all("torch_seconds" in r for r in mine):
            t["torch_tflops"] = flops / sum(r["torch_seconds"] * r["layers"] for r in mine) / 1e12
            t["ampcore_vs_torch"] = t["ampcore_tflops"] / t["torch_tflops"]
        out[dtype_name] = t
    return out


if __name__ == "__main__":
    main()
