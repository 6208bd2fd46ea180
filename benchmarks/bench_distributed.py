"""Data-parallel AMP on MPI: the reference MLP on 1 rank vs 2 ranks (DDP, and DDP with ZeRO-1).

Workload: the reference MLP of ``ampcore bench`` (784-1024-1024-10, ReLU),
AdamW, float16 autocast with a GradScaler (``--dtype bfloat16`` for none), on
the cpu backend.  The global batch is the same for every configuration
(``--batch``, 256): one rank trains on all of it, two ranks on half each
(strong scaling: the same work per step, split).  Three configurations:

- ``1 rank``: one process, no DDP (the single-process baseline), BLAS on
  every core;
- ``1 rank, 1 thread``: the same with one BLAS thread, as each of two ranks
  gets (OpenBLAS's threads cost more than they give on small GEMMs when the
  machine is busy);
- ``2 ranks DDP``: DistributedDataParallel (25 MB buckets), AdamW on every rank,
  the scaler agreeing on skips over the group;
- ``2 ranks ZeRO-1``: the same DDP, with ZeroRedundancyOptimizer(AdamW).

Each configuration is one ``mpiexec`` job; the jobs take turns for
``--rounds`` rounds (each configuration in turn, then again) so machine load hits
them alike, and the medians over rounds are compared.  Every rank runs
``--warmup`` untimed steps, then ``--steps`` timed ones.  Per job, rank 0
reports its median step time, the payload bytes it all-reduced and
all-gathered per step (each array's size, not the algorithm's wire
traffic; the 4-byte found_inf agreement included), and the fraction of
its step time spent inside collectives; every rank reports its optimizer
state bytes, and the largest is kept.  BLAS threads are split between the
ranks (``ampcore.distributed.launch.rank_environment``): 2 for one rank,
1 each for two, on a 2-core machine.

    python benchmarks/bench_distributed.py [--steps 15] [--warmup 3] [--rounds 3] [--batch 256]
                                           [--dtype float16|bfloat16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# name -> (ranks, ZeRO-1, BLAS threads per rank: None splits the cores between the ranks)
CONFIGS = {
    "1 rank": (1, False, None),
    "1 rank, 1 thread": (1, False, 1),
    "2 ranks DDP": (2, False, None),
    "2 ranks ZeRO-1": (2, True, None),
}
TARGET_STATE_RATIO = 0.55


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=15, help="timed steps per job (default 15)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="jobs per configuration, taking turns (default 3)")
    parser.add_argument("--batch", type=int, default=256, help="global batch, split between the ranks (default 256)")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"], help="autocast dtype")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--worker", metavar="CONFIG", help=argparse.SUPPRESS)  # internal: one rank of a job
    args = parser.parse_args(argv)
    for name in ("steps", "rounds", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must be non-negative, got {args.warmup}")
    if args.batch % 2:
        parser.error(f"--batch must be even (it is split between 2 ranks), got {args.batch}")
    return args


# ---------------------------------------------------------------------------------------------- one rank
def worker(args: argparse.Namespace) -> None:
    import ampcore
    import ampcore.distributed as dist
    from ampcore import optim
    from ampcore.bench.models import get_model, make_batches
    from ampcore.nn import functional as F

    world, zero, _ = CONFIGS[args.worker]
    group = dist.init() if world > 1 else None
    rank = 0 if group is None else group.rank
    spec = get_model("mlp")
    ampcore.manual_seed(0)
    model = spec.build("cpu")
    rows = slice(rank * args.batch // world, (rank + 1) * args.batch // world)
    batches = [
        (ampcore.tensor(x[rows]), ampcore.tensor(y[rows]))
        for x, y in make_batches(spec, seed=0, count=4, batch=args.batch)
    ]
    net = model if group is None else dist.DistributedDataParallel(model, process_group=group)
    opt: Any = (
        dist.ZeroRedundancyOptimizer(net.parameters(), optim.AdamW, lr=1e-3, process_group=group)
        if zero
        else optim.AdamW(net.parameters(), lr=1e-3)
    )
    scaler = ampcore.GradScaler.for_dtype(args.dtype, "cpu", process_group=None if zero else group)
    times = []
    for step in range(args.warmup + args.steps):
        if step == args.warmup and group is not None:
            group.stats.reset()
        x, y = batches[step % len(batches)]
        start = time.perf_counter()
        opt.zero_grad()
        with ampcore.autocast("cpu", dtype=args.dtype):
            loss = F.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        times.append(time.perf_counter() - start)
    timed = times[args.warmup :]
    state = dist.optimizer_state_bytes(opt)
    states = [state] if group is None else group.all_gather_object(state)
    if rank == 0:
        stats = group.stats if group is not None else None
        print(
            json.dumps(
                {
                    "ms_per_step": 1e3 * statistics.median(timed),
                    "allreduce_bytes_per_step": stats.bytes_by_op.get("all_reduce", 0) / args.steps if stats else 0.0,
                    "allgather_bytes_per_step": stats.bytes_by_op.get("all_gather", 0) / args.steps if stats else 0.0,
                    "collective_fraction": stats.seconds / sum(timed) if stats else 0.0,
                    "optimizer_state_bytes_per_rank": max(states),
                    "skipped_steps": scaler.skipped_steps,
                }
            )
        )


# ---------------------------------------------------------------------------------------------- the driver
def run_job(config: str, argv: list[str]) -> dict[str, Any]:
    from ampcore.distributed.launch import BLAS_THREAD_VARIABLES, mpiexec_command, rank_environment

    world, _, threads = CONFIGS[config]
    command = mpiexec_command(world, [sys.executable, os.path.abspath(__file__), *argv, "--worker", config])
    env = rank_environment(world)
    if threads is not None:
        # AMPCORE_NUM_THREADS first of all: rank_environment set it to the rank's share of the budget.
        env.update({name: str(threads) for name in ("AMPCORE_NUM_THREADS", *BLAS_THREAD_VARIABLES)})
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the {config!r} job failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return
    passed = list(argv if argv is not None else sys.argv[1:])
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CONFIGS}
    for _ in range(args.rounds):
        for config in CONFIGS:
            runs[config].append(run_job(config, passed))
    rows = {c: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for c, rs in runs.items()}
    base = min((rows[c] for c in CONFIGS if CONFIGS[c][0] == 1), key=lambda r: r["ms_per_step"])  # the best 1-rank
    ddp = rows["2 ranks DDP"]
    print(
        f"reference MLP 784-1024-1024-10, AdamW, {args.dtype} AMP, global batch {args.batch}; medians of "
        f"{args.rounds} interleaved jobs x {args.steps} steps; load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'configuration':<18} {'ms/step':>8} {'speed vs best 1-rank':>20} {'MB all-reduced':>14} "
        f"{'MB all-gathered':>15} {'in collectives':>14} {'opt state MiB/rank':>18} {'vs DDP':>7}"
    )
    for config, row in rows.items():
        row["speed_vs_best_1_rank"] = base["ms_per_step"] / row["ms_per_step"]
        row["state_vs_ddp"] = row["optimizer_state_bytes_per_rank"] / ddp["optimizer_state_bytes_per_rank"]
        print(
            f"{config:<18} {row['ms_per_step']:>8.1f} {row['speed_vs_best_1_rank']:>19.2f}x "
            f"{row['allreduce_bytes_per_step'] / 1e6:>14.2f} {row['allgather_bytes_per_step'] / 1e6:>15.2f} "
            f"{row['collective_fraction']:>13.0%} "
            f"{row['optimizer_state_bytes_per_rank'] / 2**20:>18.2f} {row['state_vs_ddp']:>6.2f}x"
        )
    ratio = rows["2 ranks ZeRO-1"]["state_vs_ddp"]
    print(
        f"ZeRO-1 optimizer state per rank: {ratio:.3f}x DDP's (target <= {TARGET_STATE_RATIO}x): "
        f"{'met' if ratio <= TARGET_STATE_RATIO else 'MISSED'}"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"config": vars(args), "rows": rows, "runs": runs}, f, indent=2)


if __name__ == "__main__":
    main()
