"""Data-parallel mixed precision on MPI: process group, collectives, DistributedDataParallel, ZeRO-1.

Optional: ``pip install 'ampcore[mpi]'`` brings mpi4py and MPICH's ``mpiexec``.
mpi4py is imported only by :func:`init`, so ``import ampcore.distributed``
works without it.  Launch with ``mpiexec -n N python train.py``, or
``ampcore train --nproc N``.  See docs/distributed.md.

torch.distributed's names map onto the same layer (``init_process_group``,
``get_rank``, ``ReduceOp``, ``optim.ZeroRedundancyOptimizer``,
``ampcore.nn.parallel.DistributedDataParallel``), and importing this package
fills torchrun's ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` from mpiexec's
environment (:mod:`.environment`), so a torchrun-style script runs under
``mpiexec`` after the rename.
"""

from typing import TYPE_CHECKING

from ..names import missing_names_getattr as _missing_names_getattr
from . import optim, parallel
from .collectives import ReduceOp, all_gather, all_gather_object, all_reduce, broadcast, broadcast_object_list
from .communicator import REDUCE_OPS, CollectiveStats, Communicator, DevicePath, MPICommunicator
from .ddp import DistributedDataParallel
from .environment import fill_torchrun_variables
from .launch import mpiexec_command, mpiexec_path, rank_environment
from .process_group import (
    DEFAULT_TIMEOUT,
    MPINotInstalledError,
    barrier,
    destroy,
    destroy_process_group,
    get_backend,
    get_communicator,
    get_rank,
    get_world_size,
    init,
    init_process_group,
    is_available,
    is_initialized,
    rank,
    world_size,
)
from .work import Work
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
    # torch.distributed's names
    "init_process_group",
    "destroy_process_group",
    "get_rank",
    "get_world_size",
    "get_backend",
    "is_available",
    "ReduceOp",
    "Work",
    "all_gather_object",
    "broadcast_object_list",
    "optim",
    "parallel",
    "fill_torchrun_variables",
]


fill_torchrun_variables()

if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
