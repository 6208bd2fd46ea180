"""Data-parallel mixed precision on MPI: process group, collectives, DistributedDataParallel, ZeRO-1.

Optional: ``pip install 'ampcore[mpi]'`` brings mpi4py and MPICH's ``mpiexec``.
mpi4py is imported only by :func:`init`, so ``import ampcore.distributed``
works without it.  Launch with ``mpiexec -n N python train.py``, or
``ampcore train --nproc N``.  See docs/distributed.md.
"""

from .collectives import all_gather, all_reduce, broadcast
from .communicator import REDUCE_OPS, CollectiveStats, Communicator, DevicePath, MPICommunicator
from .ddp import DistributedDataParallel
from .launch import mpiexec_command, mpiexec_path, rank_environment
from .process_group import (
    DEFAULT_TIMEOUT,
    MPINotInstalledError,
    barrier,
    destroy,
    get_communicator,
    init,
    is_initialized,
    rank,
    world_size,
)
from .zero import ZeroRedundancyOptimizer, optimizer_state_bytes

__all__ = [
    "init",
    "is_initialized",
    "rank",
    "world_size",
    "barrier",
    "destroy",
    "get_communicator",
    "DEFAULT_TIMEOUT",
    "MPINotInstalledError",
    "all_reduce",
    "broadcast",
    "all_gather",
    "Communicator",
    "MPICommunicator",
    "DevicePath",
    "REDUCE_OPS",
    "CollectiveStats",
    "DistributedDataParallel",
    "ZeroRedundancyOptimizer",
    "optimizer_state_bytes",
    "mpiexec_command",
    "mpiexec_path",
    "rank_environment",
]
