"""Per-op cost: microseconds of Python one small op call takes, beside torch's eager CPU op.

Cases (issue 26): ``a + b``, ``a.sum()``, ``a * 2.0``, ``a @ w`` (64x64),
``(a @ w).relu().sum().backward()`` and ``with autocast("cpu"): a @ w``, on
16x64 float32 tensors on the cpu backend.  Each case is timed as the best of
``--repeats`` rounds of ``--number`` calls (the minimum is the figure least
disturbed by other processes); torch runs in the same process with one thread
when it is importable, its rounds interleaved with ampcore's so that both
columns see the same host.

    python benchmarks/bench_dispatch.py [--number 2000] [--repeats 7] [--json out.json] [--no-torch]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import timeit
from collections.abc import Callable
from typing import Any

import numpy as np

import ampcore

CASES = ("a + b", "a.sum()", "a * 2.0", "a @ w", "(a @ w).relu().sum().backward()", 'with autocast("cpu"): a @ w')
TARGETS = {
    "a + b": 4.0,
    "a.sum()": 4.0,
    "a * 2.0": 2.0,
    "a @ w": 2.0,
    "(a @ w).relu().sum().backward()": 1.5,
    'with autocast("cpu"): a @ w': 1.0,
}
# torch 2.13 eager CPU, one thread, 2-core Intel Xeon VM, quiet (issue 26): the yardstick where torch is absent.
ISSUE_TORCH_US = {
    "a + b": 1.5,
    "a.sum()": 1.8,
    "a * 2.0": 3.1,
    "a @ w": 4.0,
    "(a @ w).relu().sum().backward()": 38.0,
    'with autocast("cpu"): a @ w': 30.0,
}


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else what platform reports."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ampcore_cases(seed: int) -> dict[str, Callable[[], Any]]:
    """One zero-argument callable per case, on the cpu backend."""
    rng = np.random.default_rng(seed)
    a = ampcore.tensor(rng.standard_normal((16, 64), dtype=np.float32), device="cpu")
    b = ampcore.tensor(rng.standard_normal((16, 64), dtype=np.float32), device="cpu")
    w = ampcore.tensor(rng.standard_normal((64, 64), dtype=np.float32), device="cpu", requires_grad=True)

    def autocast_matmul() -> Any:
        with ampcore.autocast("cpu"):
            return a @ w

    def chain() -> None:
        (a @ w).relu().sum().backward()

    return dict(zip(CASES, (lambda: a + b, a.sum, lambda: a * 2.0, lambda: a @ w, chain, autocast_matmul)))


def torch_cases(seed: int) -> dict[str, Callable[[], Any]] | None:
    """The same cases in torch eager on the CPU with one thread, or None when torch is not importable."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch  # optional: only for the comparison column

    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    a = torch.from_numpy(rng.standard_normal((16, 64), dtype=np.float32))
    b = torch.from_numpy(rng.standard_normal((16, 64), dtype=np.float32))
    w = torch.from_numpy(rng.standard_normal((64, 64), dtype=np.float32)).requires_grad_()

    def autocast_matmul() -> Any:
        with torch.autocast("cpu"):
            return a @ w

    def chain() -> None:
        (a @ w).relu().sum().backward()

    return dict(zip(CASES, (lambda: a + b, a.sum, lambda: a * 2.0, lambda: a @ w, chain, autocast_matmul)))


def time_side_by_side(
    ours: dict[str, Callable[[], Any]], theirs: dict[str, Callable[[], Any]] | None, number: int, repeats: int
) -> tuple[dict[str, float], dict[str, float] | None]:
    """Best of ``repeats`` rounds per case, in microseconds per call, ampcore's and torch's rounds taken in
    turn: a host whose speed drifts during the run (a shared VM's does) slows both columns alike, so each
    ratio compares the two under the same conditions."""
    best_ours = {name: float("inf") for name in ours}
    best_theirs = {name: float("inf") for name in theirs} if theirs else None
    for fn in (*ours.values(), *(theirs or {}).values()):
        fn()  # warm-up (first-call caches, weight-cast cache)
    for _ in range(repeats):
        for name, fn in ours.items():
            best_ours[name] = min(best_ours[name], timeit.Timer(fn).timeit(number) / number * 1e6)
            if theirs and best_theirs is not None:
                other = theirs[name]
                best_theirs[name] = min(best_theirs[name], timeit.Timer(other).timeit(number) / number * 1e6)
    return best_ours, best_theirs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per round (default 2000)")
    parser.add_argument("--repeats", type=int, default=7, help="rounds; the best is reported (default 7)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--no-torch", action="store_true", help="skip torch even if it is installed")
    args = parser.parse_args(argv)

    theirs_fns = None if args.no_torch else torch_cases(args.seed)
    ours, theirs = time_side_by_side(ampcore_cases(args.seed), theirs_fns, args.number, args.repeats)
    ref, ref_name = (theirs, "torch µs") if theirs else (ISSUE_TORCH_US, "torch µs (issue 26)")

    blas = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS") or "library default"
    print(
        f"# per-op cost, cpu backend, 16x64 float32; {cpu_model()}, {os.cpu_count()} CPUs, one Python thread "
        f"(BLAS threads: {blas}); numpy {np.__version__}, best of {args.repeats}x{args.number}"
    )
    if theirs is None:
        why = "torch skipped (--no-torch)" if args.no_torch else "torch is not importable here"
        print(
            f"# {why}: its column is issue 26's figures (torch 2.13 eager CPU, 1 thread); "
            "pip install torch --index-url https://download.pytorch.org/whl/cpu to measure it in this process"
        )
    print(f"| case | ampcore µs | {ref_name} | ratio | target ratio |")
    print("| --- | --- | --- | --- | --- |")
    for name in CASES:
        ratio = ours[name] / ref[name]
        print(f"| `{name}` | {ours[name]:.1f} | {ref[name]:.1f} | {ratio:.1f}x | <= {TARGETS[name]}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"cpu": cpu_model(), "ampcore_us": ours, "torch_us": ref, "torch_measured": theirs is not None},
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
