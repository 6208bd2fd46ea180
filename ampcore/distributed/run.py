"""``python -m ampcore.distributed.run`` (torchrun's module, renamed): start a script on N ranks, through mpiexec.

    python -m ampcore.distributed.run --nproc-per-node 2 train.py --epochs 3

runs ``mpiexec -n 2 python train.py --epochs 3`` with the thread budget divided
among the ranks (:func:`.launch.rank_environment`); each rank finds torchrun's
``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` filled in from mpiexec's
(:mod:`.environment`).  torchrun's options for several nodes and rendezvous
(``--nnodes`` above 1, ``--rdzv-*``, ``--master-addr``, ``--master-port``,
``--max-restarts``) are accepted for one node and otherwise refused, naming
mpiexec's hostfile as the way; ``--standalone`` is accepted.  The exit status
is mpiexec's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence

from .launch import mpiexec_command, rank_environment

__all__ = ["main", "parse"]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """torchrun's command line (the options ampcore honours, and the ones it accepts for one node)."""
    parser = argparse.ArgumentParser(prog="python -m ampcore.distributed.run", description=__doc__.split("\n")[0])
    parser.add_argument("--nproc-per-node", "--nproc_per_node", dest="nproc", default="1")
    parser.add_argument("--nnodes", default="1")
    parser.add_argument("--standalone", action="store_true")
    parser.add_argument("--node-rank", "--node_rank", default="0")
    for ignored in ("--master-addr", "--master-port", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id"):
        parser.add_argument(ignored, ignored.replace("-", "_").replace("__", "--", 1), default=None)
    parser.add_argument("--max-restarts", "--max_restarts", type=int, default=0)
    parser.add_argument("-m", "--module", action="store_true", help="run the script as a module (python -m)")
    parser.add_argument("--no-python", "--no_python", action="store_true", help="run the script as a program")
    parser.add_argument("script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(list(argv))
    if args.nnodes not in ("1", "1:1") or args.node_rank != "0":
        parser.error(
            f"--nnodes {args.nnodes}: ampcore runs one node per launch here; for several nodes use mpiexec with "
            "a hostfile (mpiexec -n N -f hosts python train.py)"
        )
    if args.max_restarts:
        parser.error("--max-restarts: ampcore does not restart failed ranks; a failing rank ends the job")
    try:
        args.nproc = int(args.nproc)
    except ValueError:
        parser.error(f"--nproc-per-node must be a number of processes, got {args.nproc!r}")
    if args.nproc < 1:
        parser.error(f"--nproc-per-node must be at least 1, got {args.nproc}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the script on ``--nproc-per-node`` ranks under mpiexec; return mpiexec's exit status."""
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.no_python:
        program = [args.script]
    elif args.module:
        program = [sys.executable, "-m", args.script]
    else:
        program = [sys.executable, args.script]
    command = mpiexec_command(args.nproc, [*program, *args.script_args])
    return subprocess.run(command, env=rank_environment(args.nproc), check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
