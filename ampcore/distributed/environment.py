"""torchrun's environment variables, filled in from the MPI launcher's, so a torchrun-style script runs under mpiexec.

A script written for torchrun reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``
(and ``LOCAL_WORLD_SIZE``) from the environment, often before it calls
``init_process_group``.  ``mpiexec`` sets its own names instead: MPICH's
Hydra ``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``, ``MPI_LOCALNRANKS``;
Open MPI ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_SIZE``,
``OMPI_COMM_WORLD_LOCAL_RANK``, ``OMPI_COMM_WORLD_LOCAL_SIZE``.
``import ampcore.distributed`` (which ``import ampcore`` does) copies them
to torchrun's names where those are not set.  ``MASTER_ADDR`` and
``MASTER_PORT`` are not needed: MPI finds its ranks itself.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

__all__ = ["LAUNCHERS", "TORCHRUN_NAMES", "fill_torchrun_variables"]

TORCHRUN_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
LAUNCHERS = {
    "MPICH (Hydra)": ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    "Open MPI": (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
}


def fill_torchrun_variables(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set torchrun's rank variables from the MPI launcher's where they are unset; returns what it set.

    Nothing changes outside an MPI launch, or where torchrun (or the user) set them already.
    """
    env = os.environ if environ is None else environ
    for names in LAUNCHERS.values():
        if names[0] in env and names[1] in env:
            local_rank = env.get(names[2], env[names[0]])
            local_size = env.get(names[3], env[names[1]])
            values = dict(zip(TORCHRUN_NAMES, (env[names[0]], env[names[1]], local_rank, local_size)))
            added = {k: v for k, v in values.items() if k not in env}
            env.update(added)
            return added
    return {}
