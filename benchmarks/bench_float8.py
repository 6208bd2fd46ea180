"""float8 GEMM throughput beside bfloat16 on one device: ``scaled_mm`` (e4m3 x e4m3, per-tensor scales, bfloat16 out)
against a bfloat16 ``matmul`` of the same shape, and torch's ``_scaled_mm`` beside them where torch sees the GPU.

    python benchmarks/bench_float8.py --device cuda:0 --size 8192

Prints TFLOP/s (2*M*N*K per product), median of ``--steps`` timed products after two warm-up ones.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", type=int, default=1024, help="M = N = K")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    n, device = args.size, ampcore.device(args.device)
    backend = getattr(ampcore, device.type)
    sync = lambda: backend.synchronize(device)  # noqa: E731 - a one-line timer hook
    a = ampcore.randn(n, n, device=device)
    b = ampcore.randn(n, n, device=device)
    one = ampcore.tensor(1.0, device=device)
    qa, _ = f8.quantize_float8(a, one, ampcore.float8_e4m3fn, True)
    qb, _ = f8.quantize_float8(b, one, ampcore.float8_e4m3fn, True)
    a16, b16 = a.to(ampcore.bfloat16), b.to(ampcore.bfloat16)
    flops = 2.0 * n * n * n
    rows = [
        (
            "ampcore scaled_mm e4m3 -> bfloat16",
            _median_s(lambda: f8.scaled_mm(qa, qb, one, one, ampcore.bfloat16), sync, args.steps),
        ),
        ("ampcore matmul bfloat16", _median_s(lambda: a16 @ b16, sync, args.steps)),
    ]
    try:
        import torch

        if device.type == "cuda" and torch.cuda.is_available():
            ta = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
            tb = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
            ts = torch.tensor(1.0, device="cuda")
            rows.append(
                (
                    "torch _scaled_mm e4m3 -> bfloat16",
                    _median_s(
                        lambda: torch._scaled_mm(ta, tb, ts, ts, out_dtype=torch.bfloat16),
                        torch.cuda.synchronize,
                        args.steps,
                    ),
                )
            )
            ta16, tb16 = ta.to(torch.bfloat16), tb.to(torch.bfloat16)
            rows.append(("torch matmul bfloat16", _median_s(lambda: ta16 @ tb16, torch.cuda.synchronize, args.steps)))
    except ImportError:
        print("torch is not installed: its rows are left out (pip install torch)")
    print(f"{n}x{n}x{n} on {device}:")
    for name, seconds in rows:
        print(f"  {name:40s} {seconds * 1e3:9.3f} ms  {flops / seconds / 1e12:8.2f} TFLOP/s")


if __name__ == "__main__":
    main()
