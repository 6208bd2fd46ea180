"""Starting N ranks: the ``mpiexec`` beside this Python (MPICH's wheel puts it in the venv), and its environment.

On a machine with fewer cores than ranks every rank's BLAS must run one
thread: NumPy's OpenBLAS otherwise starts a thread per core in every rank,
and the oversubscribed threads spin against each other.  Measured on the
2-core EPYC build host, 2 ranks x 100 (256x256 matmul + 120 KB all-reduce):
5.0 s with OpenBLAS's default threads, 0.32 s with one thread per rank.
MPICH's own polling settings (``MPIR_CVAR_CH4_PROGRESS_THROTTLE``,
``MPIR_CVAR_POLLS_BEFORE_YIELD``) changed the same run by less than its
noise, so they are left at their defaults.

The ranks share one thread budget, ``ampcore.get_num_threads()`` of the
launching process (``AMPCORE_NUM_THREADS``, else ``OMP_NUM_THREADS`` or a BLAS
variable, else the CPUs it may use): each rank gets ``budget // nproc``, at
least one, as its ``AMPCORE_NUM_THREADS``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..plugins import threads

__all__ = [
    "mpiexec_path",
    "mpiexec_command",
    "rank_environment",
    "rank_threads",
    "RankThreads",
    "BLAS_THREAD_VARIABLES",
]

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


@dataclass(frozen=True)
class RankThreads:
    """A thread budget (and where it came from) divided among ``nproc`` ranks: ``per_rank`` each."""

    budget: int
    source: str
    nproc: int
    per_rank: int

    def describe(self) -> str:
        """What ``ampcore train --nproc`` prints before it starts the ranks."""
        text = (
            f"--nproc {self.nproc}: {self.budget} threads ({self.source}) divided among {self.nproc} ranks, "
            f"{self.per_rank} each (AMPCORE_NUM_THREADS={self.per_rank} in every rank)"
        )
        if self.budget < self.nproc:
            text += f"; more ranks than threads, so the {self.nproc} ranks share {self.budget}"
        return text


def rank_threads(nproc: int, base: Mapping[str, str] | None = None) -> RankThreads:
    """This process's thread budget (``base``'s when given) divided among ``nproc`` ranks, at least 1 each."""
    setting = threads.current(base)
    return RankThreads(setting.n, setting.source, nproc, max(1, setting.n // nproc))


def rank_environment(nproc: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the thread budget divided between ``nproc`` ranks.

    Each rank's ``AMPCORE_NUM_THREADS`` is its share (:func:`rank_threads`); the BLAS variables get the same
    share unless the user set them (a library that starts its threads before ampcore loads reads those).
    """
    env = dict(os.environ if base is None else base)
    share = str(rank_threads(nproc, base).per_rank)
    env[threads.ENV] = share
    for name in BLAS_THREAD_VARIABLES:
        env.setdefault(name, share)
    return env


def mpiexec_command(nproc: int, argv: Sequence[str]) -> list[str]:
    """``mpiexec -n nproc argv...``; ValueError unless ``nproc`` is a positive integer."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"the number of processes must be a positive integer, got {nproc!r}")
    return [mpiexec_path(), "-n", str(nproc), *argv]
