"""all-reduce, broadcast and all-gather of ampcore tensors on any backend, with torch.distributed's signatures.

Each works in place on its tensor (rebinding its array), as torch's do, so a
parameter or gradient keeps its identity.  They run through the group's
:class:`~.communicator.Communicator`, so a backend with a device path (NCCL)
never stages through the host.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from ..tensor import Tensor
from .communicator import Communicator
from .process_group import get_communicator
from .work import Work

__all__ = ["ReduceOp", "all_reduce", "broadcast", "all_gather", "all_gather_object", "broadcast_object_list"]


class ReduceOp(enum.StrEnum):
    """torch.distributed.ReduceOp: ``dist.all_reduce(t, op=dist.ReduceOp.SUM)``; equal to the strings ``"sum"``,
    ``"avg"``, ``"max"``, ``"min"`` that ampcore's collectives also take.  (torch's PRODUCT and bitwise ops are
    not offered: gradients and flags never need them.)"""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"


def _tensor(name: str, t: object) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} takes an ampcore Tensor, got {type(t).__name__}")
    return t


def all_reduce(
    tensor: Tensor, op: str = ReduceOp.SUM, group: Communicator | None = None, async_op: bool = False
) -> Any:
    """Replace ``tensor``'s values by ``op`` (a :class:`ReduceOp` or "sum", "avg", "max", "min") of them over every
    rank; returns it (``async_op=True``: a finished :class:`~.work.Work`, as torch's)."""
    t = _tensor("all_reduce", tensor)
    t._data = get_communicator(group).all_reduce(t.detach(), op)._data
    return Work(t) if async_op else t


def broadcast(tensor: Tensor, src: int | None = None, group: Communicator | None = None, async_op: bool = False) -> Any:
    """Replace ``tensor``'s values by rank ``src``'s (default 0); returns it (``async_op=True``: a Work)."""
    t = _tensor("broadcast", tensor)
    t._data = get_communicator(group).broadcast(t.detach(), 0 if src is None else src)._data
    return Work(t) if async_op else t


def all_gather(
    tensor_list: Sequence[Tensor] | None, tensor: Tensor, group: Communicator | None = None, async_op: bool = False
) -> Any:
    """Every rank's ``tensor``, in rank order: written into ``tensor_list`` (torch's form) and returned.

    ``tensor_list`` may be None, then new tensors are returned.  ValueError
    if it does not hold one tensor per rank shaped like ``tensor``.
    ``async_op=True`` returns a finished Work instead.
    """
    gathered = _all_gather(tensor_list, tensor, group)
    return Work(gathered) if async_op else gathered


def _all_gather(tensor_list: Sequence[Tensor] | None, tensor: Tensor, group: Communicator | None) -> list[Tensor]:
    t = _tensor("all_gather", tensor)
    comm = get_communicator(group)
    if tensor_list is not None:
        if len(tensor_list) != comm.size or any(
            not isinstance(o, Tensor) or o.shape != t.shape or o.dtype != t.dtype for o in tensor_list
        ):
            raise ValueError(
                f"all_gather: tensor_list must hold {comm.size} tensor(s) of shape {t.shape} and dtype "
                f"{t.dtype.name} (one per rank), got {len(tensor_list)}; or pass None"
            )
    gathered = comm.all_gather(t.detach())
    if tensor_list is None:
        return gathered
    for out, got in zip(tensor_list, gathered):
        out._data = got._data
    return list(tensor_list)


def all_gather_object(object_list: list[Any], obj: Any, group: Communicator | None = None) -> None:
    """torch's form: fill ``object_list`` (one slot per rank) with every rank's picklable ``obj``, in rank order."""
    gathered = get_communicator(group).all_gather_object(obj)
    if len(object_list) != len(gathered):
        raise ValueError(
            f"all_gather_object: object_list must have {len(gathered)} slot(s), one per rank, got {len(object_list)}"
        )
    object_list[:] = gathered


def broadcast_object_list(object_list: list[Any], src: int | None = None, group: Communicator | None = None) -> None:
    """torch's form: replace ``object_list``'s entries on every rank by rank ``src``'s (default 0)."""
    comm = get_communicator(group)
    source = 0 if src is None else src
    if not 0 <= source < comm.size:
        raise ValueError(f"broadcast_object_list: src {source} is not a rank of this {comm.size}-rank job")
    object_list[:] = comm.all_gather_object(list(object_list))[source]
