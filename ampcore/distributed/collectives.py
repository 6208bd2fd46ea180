"""all-reduce, broadcast and all-gather of ampcore tensors on any backend, with torch.distributed's signatures.

Each works in place on its tensor (rebinding its array), as torch's do, so a
parameter or gradient keeps its identity.  They run through the group's
:class:`~.communicator.Communicator`, so a backend with a device path (NCCL)
never stages through the host.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..tensor import Tensor
from .communicator import Communicator
from .process_group import get_communicator

__all__ = ["all_reduce", "broadcast", "all_gather"]


def _tensor(name: str, t: object) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} takes an ampcore Tensor, got {type(t).__name__}")
    return t


def all_reduce(tensor: Tensor, op: str = "sum", group: Communicator | None = None) -> Tensor:
    """Replace ``tensor``'s values by ``op`` ("sum", "avg", "max", "min") of them over every rank; returns it."""
    t = _tensor("all_reduce", tensor)
    t._data = get_communicator(group).all_reduce(t.detach(), op)._data
    return t


def broadcast(tensor: Tensor, src: int = 0, group: Communicator | None = None) -> Tensor:
    """Replace ``tensor``'s values by rank ``src``'s; returns it."""
    t = _tensor("broadcast", tensor)
    t._data = get_communicator(group).broadcast(t.detach(), src)._data
    return t


def all_gather(tensor_list: Sequence[Tensor] | None, tensor: Tensor, group: Communicator | None = None) -> list[Tensor]:
    """Every rank's ``tensor``, in rank order: written into ``tensor_list`` (torch's form) and returned.

    ``tensor_list`` may be None, then new tensors are returned.  ValueError
    if it does not hold one tensor per rank shaped like ``tensor``.
    """
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
