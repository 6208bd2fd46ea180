"""The default process group: ``init()`` from the MPI environment, then ``rank()``, ``world_size()``, ``barrier()``.

mpi4py is imported here, lazily, and nowhere in the core: ``import ampcore``
works without MPI, and ``import ampcore.distributed`` too, until ``init()``.
"""

from __future__ import annotations

import os
from typing import Any

from .communicator import Communicator, MPICommunicator
from .watchdog import install_excepthook

__all__ = [
    "init",
    "is_initialized",
    "rank",
    "world_size",
    "barrier",
    "get_communicator",
    "destroy",
    "DEFAULT_TIMEOUT",
    "MPINotInstalledError",
]

DEFAULT_TIMEOUT = 300.0
"""Seconds a rank waits in one collective before it aborts the job (``AMPCORE_DIST_TIMEOUT`` overrides)."""

_group: Communicator | None = None


class MPINotInstalledError(ImportError):
    """mpi4py or its MPI library is missing; the message says how to install them."""


def _import_mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as err:
        raise MPINotInstalledError(
            f"ampcore.distributed needs mpi4py and an MPI library ({err}); install them "
            "with: pip install 'ampcore[mpi]'"
        ) from err
    return MPI


def init(timeout: float | None = None, *, abort_on_exception: bool = True) -> Communicator:
    """Join the job ``mpiexec`` started (a job of one rank without it) and return its communicator.

    ``timeout``: seconds any collective may wait before this rank aborts every
    rank, naming itself (default ``AMPCORE_DIST_TIMEOUT`` or 300; ``0``
    disables).  ``abort_on_exception``: an uncaught exception on any rank
    aborts every rank with a message naming it.  Idempotent: a second call
    returns the same communicator.
    """
    global _group
    if _group is not None:
        return _group
    mpi = _import_mpi()
    if timeout is None:
        timeout = float(os.environ.get("AMPCORE_DIST_TIMEOUT", DEFAULT_TIMEOUT))
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise ValueError(f"timeout must be a number of seconds >= 0 (0 disables it), got {timeout!r}")
    comm = mpi.COMM_WORLD
    _group = MPICommunicator(comm, timeout=timeout or None)
    if abort_on_exception and comm.Get_size() > 1:
        install_excepthook(comm.Get_rank(), comm.Get_size(), comm.Abort)
    return _group


def is_initialized() -> bool:
    """Whether :func:`init` has run in this process."""
    return _group is not None


def get_communicator(group: Communicator | None = None) -> Communicator:
    """``group``, or the default one; RuntimeError naming the fix before :func:`init`."""
    if group is not None:
        if not isinstance(group, Communicator):
            raise TypeError(f"process_group must be an ampcore.distributed.Communicator, got {type(group).__name__}")
        return group
    if _group is None:
        raise RuntimeError(
            "ampcore.distributed is not initialized; call ampcore.distributed.init() first "
            "(and launch with mpiexec -n N)"
        )
    return _group


def rank(group: Communicator | None = None) -> int:
    """This process's rank, 0 .. world_size() - 1."""
    return get_communicator(group).rank


def world_size(group: Communicator | None = None) -> int:
    """How many ranks the job has."""
    return get_communicator(group).size


def barrier(group: Communicator | None = None) -> None:
    """Return once every rank has reached it."""
    get_communicator(group).barrier()


def destroy() -> None:
    """Forget the default group (MPI itself finalizes at exit); :func:`init` may be called again."""
    global _group
    _group = None
