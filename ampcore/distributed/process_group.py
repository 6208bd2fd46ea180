"""The default process group: ``init()`` from the MPI environment, then ``rank()``, ``world_size()``, ``barrier()``.

torch.distributed's names for the same group are here too:
``init_process_group``, ``get_rank``, ``get_world_size``,
``destroy_process_group``, ``is_available``, ``get_backend``.  Whatever
backend a script names (``"nccl"``, ``"gloo"``, ``"mpi"``), the group runs
on MPI; the ranks come from ``mpiexec``, and a rank or world size the script
(or torchrun's environment) states must agree with MPI's.

mpi4py is imported here, lazily, and nowhere in the core: ``import ampcore``
works without MPI, and ``import ampcore.distributed`` too, until ``init()``.
"""

from __future__ import annotations

import importlib.util
import os
from datetime import timedelta
from typing import Any

from .communicator import Communicator, MPICommunicator
from .watchdog import install_excepthook
from .work import Work

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
    # torch.distributed's names
    "init_process_group",
    "destroy_process_group",
    "get_rank",
    "get_world_size",
    "get_backend",
    "is_available",
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
            "ampcore.distributed is not initialized; call ampcore.distributed.init() first (torch's name: "
            "init_process_group()), and launch with mpiexec -n N"
        )
    return _group


def rank(group: Communicator | None = None) -> int:
    """This process's rank, 0 .. world_size() - 1."""
    return get_communicator(group).rank


def world_size(group: Communicator | None = None) -> int:
    """How many ranks the job has."""
    return get_communicator(group).size


def barrier(group: Communicator | None = None, async_op: bool = False, device_ids: Any = None) -> Work | None:
    """Return once every rank has reached it (``async_op``: return a finished :class:`Work`; ``device_ids`` is
    accepted for torch code and unused)."""
    get_communicator(group).barrier()
    return Work() if async_op else None


def destroy() -> None:
    """Forget the default group (MPI itself finalizes at exit); :func:`init` may be called again."""
    global _group
    _group = None


# --------------------------------------------------------------------------- torch.distributed's names
def is_available() -> bool:
    """True when the process group can be made here: mpi4py is installed (``pip install 'ampcore[mpi]'``)."""
    return importlib.util.find_spec("mpi4py") is not None


def _stated(value: int, variable: str) -> tuple[int, str] | None:
    """A rank or world size the script passed (>= 0), else torchrun's environment variable, with its source."""
    if value is not None and value >= 0:
        return int(value), f"the argument {value}"
    if variable in os.environ:
        return int(os.environ[variable]), f"{variable}={os.environ[variable]} in the environment"
    return None


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store: Any = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Any = None,
) -> None:
    """torch.distributed.init_process_group over MPI: join the job ``mpiexec`` started.

    ``backend`` ("nccl", "gloo", "mpi", ...), ``init_method`` ("env://",
    "tcp://...", "file://..."), ``store``, ``group_name``, ``pg_options`` and
    ``device_id`` are accepted for torch code: MPI does the rendezvous and
    carries every collective.  ``timeout`` bounds each collective (see
    :func:`init`).  A ``world_size`` or ``rank`` given here, or in torchrun's
    ``WORLD_SIZE`` / ``RANK``, must match MPI's (ValueError naming both and
    the launch command otherwise).  RuntimeError if the group exists already.
    """
    if _group is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    seconds = None if timeout is None else timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    group = init(timeout=seconds)
    for stated, actual, what in (
        (_stated(world_size, "WORLD_SIZE"), group.size, "world size"),
        (_stated(rank, "RANK"), group.rank, "rank"),
    ):
        if stated is not None and stated[0] != actual:
            destroy()
            raise ValueError(
                f"init_process_group: {stated[1]} gives {what} {stated[0]}, but this MPI job gives {actual}; "
                "ampcore's process group runs on MPI, so start the script with mpiexec -n <world size> python "
                "script.py (not torchrun), see docs/distributed.md"
            )


def destroy_process_group(group: Communicator | None = None) -> None:
    """torch's name for :func:`destroy`: forget the default group."""
    destroy()


def get_rank(group: Communicator | None = None) -> int:
    """torch's name for :func:`rank`."""
    return rank(group)


def get_world_size(group: Communicator | None = None) -> int:
    """torch's name for :func:`world_size`."""
    return world_size(group)


def get_backend(group: Communicator | None = None) -> str:
    """The group's transport: ``"mpi"`` (RuntimeError before the group is initialized)."""
    get_communicator(group)
    return "mpi"
