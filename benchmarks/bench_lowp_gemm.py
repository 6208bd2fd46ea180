"""The cpu backend's GEMM paths side by side, in GFLOP/s (2*M*N*K per product), in one run:

- ``sgemm f32``: NumPy's float32 GEMM (OpenBLAS), no conversion: what the widened paths are built on;
- ``widened bf16`` / ``widened f16``: the widened path's kernel (float32 copies, sgemm, one rounding);
- ``MKL bf16`` / ``MKL f16``: oneMKL's ``cblas_gemm_bf16bf16f32`` / ``f16f16f32`` with the rounding;
- ``widened e4m3`` / ``MKL e4m3``: float8 ``scaled_mm`` (per-tensor scales, bfloat16 out) by each path;
- ``torch f32`` / ``torch bf16`` / ``torch f16``: torch's CPU ``mm`` in each dtype, where torch is installed.

    python benchmarks/bench_lowp_gemm.py                    # ampcore's thread count
    python benchmarks/bench_lowp_gemm.py --threads 1 --sizes 1024,2048

Each column is the best of ``--repeats`` products after one untimed one; the columns take turns within each
repeat, so a busy host slows them alike.  It ends with what the process's probe chose for each dtype.
"""

from __future__ import annotations

import argparse
import functools
import platform
import time
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

import ampcore
from ampcore_cpu import float8, kernels, mkl

BF16, F16, E4M3 = np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(ml_dtypes.float8_e4m3fn)
# (m, k, n): square products, then the benchmark models' largest: the mlp's first layer (batch 256, 784 -> 1024)
# and its weight gradient, and the cnn's conv2 as an im2col product (64 x 288 @ 288 x 8192).
SHAPES = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048)]
SHAPES += [(256, 784, 1024), (1024, 256, 784), (64, 288, 8192)]
# torch's float16 CPU matmul ran at 0.2-2 GFLOP/s on an AMD EPYC Zen 5 (no AVX512-FP16): timed up to 512^3 only.
TORCH_F16_MAX = 512**3


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _columns(m: int, k: int, n: int, torch: Any) -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(0)
    a32, b32 = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    a16, b16 = a32.astype(BF16), b32.astype(BF16)
    ah, bh = a32.astype(F16), b32.astype(F16)
    a8, b8 = a32.astype(E4M3), b32.astype(E4M3)
    scale = np.asarray(0.5, np.float32)
    have_mkl = mkl.status().enabled
    cols: dict[str, Callable[[], object]] = {"sgemm f32": lambda: a32 @ b32}
    cols["widened bf16"] = lambda: kernels.widened_matmul(a16, b16)
    if have_mkl:
        cols["MKL bf16"] = lambda: kernels.mkl_matmul(a16, b16)
    cols["widened f16"] = lambda: kernels.widened_matmul(ah, bh)
    if have_mkl:
        cols["MKL f16"] = lambda: kernels.mkl_matmul(ah, bh)
    cols["widened e4m3"] = lambda: kernels._down(float8.scaled_product(a8, b8, scale, scale, False), BF16)
    if have_mkl and mkl.routine(E4M3) is not None:
        cols["MKL e4m3"] = lambda: kernels._down(float8.scaled_product(a8, b8, scale, scale, True), BF16)
    if torch is not None:
        ta, tb = torch.from_numpy(a32), torch.from_numpy(b32)
        for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16), ("f16", torch.float16)):
            if name != "f16" or m * k * n <= TORCH_F16_MAX:
                cols[f"torch {name}"] = functools.partial(torch.matmul, ta.to(dtype), tb.to(dtype))
    return cols


def _best_gflops(cols: dict[str, Callable[[], object]], flops: float, repeats: int) -> dict[str, float]:
    for fn in cols.values():
        fn()
    best = dict.fromkeys(cols, np.inf)
    for _ in range(repeats):
        for name, fn in cols.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: flops / s / 1e9 for name, s in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="host threads (default: ampcore's)")
    parser.add_argument("--sizes", default=None, help="square sizes, comma-separated (default: the shapes above)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    if args.threads is not None:
        ampcore.set_num_threads(args.threads)
    threads = ampcore.get_num_threads()
    torch: Any = None
    if not args.no_torch:
        try:
            import torch as torch_module

            torch = torch_module
            torch.set_num_threads(threads)
        except ImportError:
            print("torch is not installed: its columns are left out (pip install torch==2.13.0)")
    shapes = [(s, s, s) for s in map(int, args.sizes.split(","))] if args.sizes else SHAPES
    print(f"{_cpu_name()}, {threads} thread(s); {mkl.describe()}; GFLOP/s, best of {args.repeats}")
    header = None
    for m, k, n in shapes:
        rates = _best_gflops(_columns(m, k, n, torch), 2.0 * m * n * k, args.repeats)
        if header is None:
            header = list(rates)
            print(f"{'m x k x n':>16} " + " ".join(f"{h:>12}" for h in header))
        print(f"{f'{m}x{k}x{n}':>16} " + " ".join(f"{rates[h]:12.1f}" if h in rates else f"{'-':>12}" for h in header))
    for dtype in (BF16, F16):
        print(f"probe: {dtype.name} GEMM: {kernels.gemm_choice(dtype).describe()}")
    print(f"probe: float8 GEMM: {float8.gemm_choice().describe()}")


if __name__ == "__main__":
    main()
