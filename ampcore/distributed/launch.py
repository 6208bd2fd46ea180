"""Starting N ranks: the ``mpiexec`` beside this Python (MPICH's wheel puts it in the venv), and its environment.

On a machine with fewer cores than ranks every rank's BLAS must run one
thread: NumPy's OpenBLAS otherwise starts a thread per core in every rank,
and the oversubscribed threads spin against each other.  Measured on the
2-core EPYC build host, 2 ranks x 100 (256x256 matmul + 120 KB all-reduce):
5.0 s with OpenBLAS's default threads, 0.32 s with one thread per rank.
MPICH's own polling settings (``MPIR_CVAR_CH4_PROGRESS_THROTTLE``,
``MPIR_CVAR_POLLS_BEFORE_YIELD``) changed the same run by less than its
noise, so they are left at their defaults.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["mpiexec_path", "mpiexec_command", "rank_environment", "BLAS_THREAD_VARIABLES"]

BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def mpiexec_path() -> str:
    """The ``mpiexec`` next to this Python (the venv's, from the ``mpich`` wheel), else the one on PATH.

    FileNotFoundError naming the fix when there is none.
    """
    beside = Path(sys.executable).with_name("mpiexec")
    if beside.exists():
        return str(beside)
    found = shutil.which("mpiexec")
    if found is None:
        raise FileNotFoundError(
            "no mpiexec found beside this Python or on PATH; install it with: pip install 'ampcore[mpi]'"
        )
    return found


def rank_environment(nproc: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with BLAS threads split between ``nproc`` ranks.

    Variables the user already set are kept.
    """
    env = dict(os.environ if base is None else base)
    threads = str(max(1, (os.cpu_count() or 1) // nproc))
    for name in BLAS_THREAD_VARIABLES:
        env.setdefault(name, threads)
    return env


def mpiexec_command(nproc: int, argv: Sequence[str]) -> list[str]:
    """``mpiexec -n nproc argv...``; ValueError unless ``nproc`` is a positive integer."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"the number of processes must be a positive integer, got {nproc!r}")
    return [mpiexec_path(), "-n", str(nproc), *argv]
