"""float8 GEMM throughput beside bfloat16 on one device, with torch's in the same run: ``scaled_mm`` (e4m3 x e4m3,
bfloat16 out) with per-tensor and per-row scales, a bfloat16 ``matmul`` of the same shape, and torch's
``_scaled_mm`` and bfloat16 matmul beside them where torch sees the device.

    python benchmarks/bench_float8.py --device cuda:0 --size 8192 --json float8.json

``b`` is (K, N) column-major (the transpose of an (N, K) array), as torch's ``_scaled_mm`` requires and as a
Float8Linear passes its weight.  Prints TFLOP/s (2*M*N*K per product; median of ``--steps`` timed products
after two warm-up ones), ampcore's over torch's for the same scaling, and which path ampcore's float8 GEMM
took on this device (``ampcore info``'s float8 line: cuBLASLt natively, or widened to float16).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import ampcore
from ampcore.ops import float8 as f8


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


def _torch_rows(n: int, steps: int) -> dict[str, float]:
    """torch's seconds per product on the GPU, or {} where torch or its GPU is missing."""
    try:
        import torch
    except ImportError:
        print("torch is not installed: its rows are left out (pip install torch)")
        return {}
    if not torch.cuda.is_available():
        return {}
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
    one = torch.tensor(1.0, device="cuda")
    row_a, col_b = torch.ones(n, 1, device="cuda"), torch.ones(1, n, device="cuda")
    a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
    sync = torch.cuda.synchronize
    out = {
        "scaled_mm tensorwise": _median_s(
            lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16), sync, steps
        ),
        "matmul bfloat16": _median_s(lambda: a16 @ b16, sync, steps),
    }
    try:  # row-wise scales: cuBLASLt's outer vectors on sm_90 (CUDA 12.9+), CUTLASS elsewhere
        out["scaled_mm rowwise"] = _median_s(
            lambda: torch._scaled_mm(a, b, row_a, col_b, out_dtype=torch.bfloat16), sync, steps
        )
    except RuntimeError as exc:
        print(f"torch _scaled_mm with row-wise scales refused: {exc}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", type=int, default=1024, help="M = N = K")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--json", default=None, help="write the rows and ratios here")
    args = parser.parse_args()
    n, device = args.size, ampcore.device(args.device)
    backend = getattr(ampcore, device.type)
    sync = lambda: backend.synchronize(device)  # noqa: E731 - a one-line timer hook
    a = ampcore.randn(n, n, device=device)
    w = ampcore.randn(n, n, device=device)  # (N, K): b = its transpose, K-major
    one = ampcore.tensor(1.0, device=device)
    qa, _ = f8.quantize_float8(a, one, ampcore.float8_e4m3fn, True)
    qw, _ = f8.quantize_float8(w, one, ampcore.float8_e4m3fn, True)
    qb = qw.t()
    row_a, col_b = ampcore.ones(n, 1, device=device), ampcore.ones(1, n, device=device)
    a16, b16 = a.to(ampcore.bfloat16), w.to(ampcore.bfloat16).t()
    flops = 2.0 * n * n * n
    ours = {
        "scaled_mm tensorwise": _median_s(lambda: f8.scaled_mm(qa, qb, one, one, ampcore.bfloat16), sync, args.steps),
        "scaled_mm rowwise": _median_s(lambda: f8.scaled_mm(qa, qb, row_a, col_b, ampcore.bfloat16), sync, args.steps),
        "matmul bfloat16": _median_s(lambda: a16 @ b16, sync, args.steps),
    }
    theirs = _torch_rows(n, args.steps) if device.type == "cuda" else {}
    caps = ampcore.get_backend(device.type).capabilities(device.index or 0)
    path = f"float8 {caps.float8}" + (f" ({caps.float8_reason})" if caps.float8_reason else "")
    print(f"{n}x{n}x{n} on {device}, e4m3 -> bfloat16; {path}:")
    rows: dict[str, Any] = {}
    for name, seconds in ours.items():
        row = {"ampcore_ms": seconds * 1e3, "ampcore_tflops": flops / seconds / 1e12}
        line = f"  {name:22s} ampcore {seconds * 1e3:8.3f} ms {row['ampcore_tflops']:8.2f} TFLOP/s"
        if name in theirs:
            row["torch_ms"] = theirs[name] * 1e3
            row["torch_tflops"] = flops / theirs[name] / 1e12
            row["ampcore_vs_torch"] = row["ampcore_tflops"] / row["torch_tflops"]
            line += f"   torch {row['torch_tflops']:8.2f} TFLOP/s   ampcore/torch {row['ampcore_vs_torch']:.3f}"
        rows[name] = row
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(device), "size": n, "float8": path, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
