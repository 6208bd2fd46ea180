"""ZeroRedundancyOptimizer: ZeRO stage 1, optimizer state sharded across ranks (torch's class of that name).

Each parameter belongs to one rank (per group, largest first, to the rank
holding the fewest bytes so far: the same plan on every rank).  A rank keeps
optimizer state only for its own parameters and steps only them; then every
rank's updated parameters are all-gathered, one collective per (device,
dtype).  With AdamW at 2 ranks that is about half the state per rank.

Use it with :class:`~.ddp.DistributedDataParallel` (gradients averaged first),
as torch does.  ``param_groups`` and ``state`` are this rank's shard: a
GradScaler stepping it unscales and checks only the shard's gradients, so it
all-reduces ``found_inf`` with MAX over ``process_group`` before deciding to
skip, and every rank skips the same steps.
"""

from __future__ import annotations

from collections import abc
from typing import Any, Callable, Mapping

import numpy as np

from ..autograd import no_grad, zero_grads
from ..creation import tensor as make_tensor
from ..optim.optimizer import Optimizer, StateDictError
from ..ops import cat
from ..tensor import Tensor
from .communicator import Communicator
from .process_group import get_communicator

__all__ = ["ZeroRedundancyOptimizer", "optimizer_state_bytes"]


def optimizer_state_bytes(optimizer: Any) -> int:
    """Bytes of the tensors in ``optimizer.state`` (moments, momentum buffers) on this rank."""
    return sum(v.numel() * v.dtype.itemsize for st in optimizer.state.values() for v in st.values()
               if isinstance(v, Tensor))


def _as_groups(params: Any) -> list[dict[str, Any]]:
    if isinstance(params, (Tensor, dict)) or not isinstance(params, abc.Iterable):
        raise TypeError(f"params should be an iterable of tensors or of dicts, got {type(params).__name__}")
    groups = list(params)
    if not groups:
        raise ValueError("ZeroRedundancyOptimizer got an empty parameter list")
    if not isinstance(groups[0], dict):
        groups = [{"params": groups}]
    return [{**g, "params": list(g["params"])} for g in groups]


def _partition(groups: list[dict[str, Any]], size: int) -> dict[int, int]:
    """id(param) -> owning rank: per group, largest first, to the least loaded rank (ties: lowest rank)."""
    owner: dict[int, int] = {}
    for group in groups:
        load = [0] * size
        ranked = sorted(enumerate(group["params"]), key=lambda ip: (-ip[1].numel() * ip[1].dtype.itemsize, ip[0]))
        for _, p in ranked:
            r = min(range(size), key=lambda i: (load[i], i))
            owner[id(p)] = r
            load[r] += p.numel() * p.dtype.itemsize
    return owner


class ZeroRedundancyOptimizer:
    """``optimizer_class`` (``optim.AdamW``, ...) over this rank's shard of ``params``, then an all-gather.

    ``defaults`` go to ``optimizer_class``.  ValueError at construction, on
    every rank, when ranks disagree on the optimizer, its options or the
    parameters.  Checkpoint with :meth:`consolidate_state_dict` (on every
    rank) then :meth:`state_dict` on the receiving rank; any world size can
    :meth:`load_state_dict` the result.
    """

    def __init__(self, params: Any, optimizer_class: Callable[..., Optimizer], *,
                 process_group: Communicator | None = None, **defaults: Any) -> None:
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(f"optimizer_class must be an ampcore.optim.Optimizer subclass such as optim.AdamW, "
                            f"got {optimizer_class!r}")
        self.process_group = get_communicator(process_group)
        self._groups = _as_groups(params)
        self._params = [p for g in self._groups for p in g["params"]]
        self._check_same_everywhere(optimizer_class, defaults)
        self._owner = _partition(self._groups, self.process_group.size)
        rank = self.process_group.rank
        local = [{**g, "params": [p for p in g["params"] if self._owner[id(p)] == rank]} for g in self._groups]
        self.optim = optimizer_class(local, **defaults)
        self._consolidated: dict[str, Any] | None = None

    def _check_same_everywhere(self, optimizer_class: type, defaults: dict[str, Any]) -> None:
        settings: dict[str, Any] = {"optimizer": optimizer_class.__name__,
                                    "options": repr(sorted(defaults.items())), "groups": len(self._groups)}
        for i, g in enumerate(self._groups):
            settings[f"group {i} options"] = repr(sorted((k, v) for k, v in g.items() if k != "params"))
            settings[f"group {i} parameters"] = [(tuple(p.shape), p.dtype.name) for p in g["params"]]
        self.process_group.check_consistent("ZeroRedundancyOptimizer", settings)

    # ------------------------------------------------------------------ the optimizer surface
    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """This rank's shard of each group (hyper-parameters shared by every rank)."""
        return self.optim.param_groups

    @property
    def state(self) -> Any:
        """Optimizer state of this rank's parameters only."""
        return self.optim.state

    @property
    def defaults(self) -> dict[str, Any]:
        return self.optim.defaults

    def owner(self, param: Tensor) -> int:
        """The rank that steps ``param`` and keeps its state."""
        return self._owner[id(param)]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter, every rank's shard included."""
        zero_grads(self._params, set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Step this rank's shard, then all-gather every rank's updated parameters (a collective)."""
        loss = self.optim.step(closure)
        self._all_gather_parameters()
        return loss

    def _all_gather_parameters(self) -> None:
        comm = self.process_group
        by_kind: dict[tuple[Any, Any], list[Tensor]] = {}
        for p in self._params:
            by_kind.setdefault((p.device, p.dtype), []).append(p)
        with no_grad():
            for params in by_kind.values():
                shards = [[p for p in params if self._owner[id(p)] == r] for r in range(comm.size)]
                width = max(sum(p.numel() for p in s) for s in shards)
                if width == 0:
                    continue
                gathered = comm.all_gather(_padded_flat(shards[comm.rank], width, params[0]))
                for r, shard in enumerate(shards):
                    offset = 0
                    for p in shard:
                        n = p.numel()
                        p._data = gathered[r][offset:offset + n].reshape(*p.shape).clone()._data
                        offset += n

    # ------------------------------------------------------------------ checkpoints
    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's shard of the state on rank ``to`` (a collective: call it on every rank)."""
        index = {id(p): i for i, p in enumerate(self._params)}
        local_ids = [index[id(p)] for g in self.optim.param_groups for p in g["params"]]
        local = self.optim.state_dict()
        host = {local_ids[i]: {k: (v.numpy() if isinstance(v, Tensor) else v) for k, v in st.items()}
                for i, st in local["state"].items()}
        everyone = self.process_group.all_gather_object(host)
        if self.process_group.rank != to:
            self._consolidated = None
            return
        state: dict[int, dict[str, Any]] = {}
        for shard in everyone:
            for pid, st in shard.items():
                state[pid] = {k: (self._restore(v, pid) if isinstance(v, np.ndarray) else v) for k, v in st.items()}
        groups, start = [], 0
        for g, mine in zip(self._groups, self.optim.param_groups):
            options = {k: v for k, v in mine.items() if k != "params"}
            groups.append({**options, "params": list(range(start, start + len(g["params"])))})
            start += len(g["params"])
        self._consolidated = {"state": dict(sorted(state.items())), "param_groups": groups}

    def _restore(self, value: np.ndarray, pid: int) -> Tensor:
        return make_tensor(value, device=self._params[pid].device)

    def state_dict(self) -> dict[str, Any]:
        """The whole optimizer's state in torch's format (parameters numbered over every group).

        Only on the rank :meth:`consolidate_state_dict` sent it to, after that
        call; RuntimeError elsewhere, naming the fix.
        """
        if self._consolidated is None:
            raise RuntimeError(f"ZeroRedundancyOptimizer.state_dict() on rank {self.process_group.rank}: call "
                               "consolidate_state_dict(to=rank) on every rank first, then state_dict() on that rank")
        return self._consolidated

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a consolidated :meth:`state_dict` on every rank: each keeps its own shard's state.

        StateDictError (nothing changed) when it does not fit these parameters.
        """
        if not isinstance(state_dict, Mapping) or "state" not in state_dict or "param_groups" not in state_dict:
            raise StateDictError("an optimizer state dict needs 'state' and 'param_groups' entries")
        saved = list(state_dict["param_groups"])
        counts = [len(g["params"]) for g in self._groups]
        if [len(g.get("params", [])) for g in saved] != counts:
            raise StateDictError(f"the state dict's parameter groups hold {[len(g.get('params', [])) for g in saved]} "
                                 f"parameter(s), this optimizer's hold {counts}")
        rank, local_groups, local_state = self.process_group.rank, [], {}
        for g, saved_group in zip(self._groups, saved):
            ids = [pid for pid, p in zip(saved_group["params"], g["params"]) if self._owner[id(p)] == rank]
            local_groups.append({**{k: v for k, v in saved_group.items() if k != "params"}, "params": ids})
            local_state.update({pid: state_dict["state"][pid] for pid in ids if pid in state_dict["state"]})
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})

    def __repr__(self) -> str:
        return (f"ZeroRedundancyOptimizer(rank {self.process_group.rank} of {self.process_group.size}, "
                f"{len(self.optim.param_groups[0]['params'])} parameter(s) in its first group, {self.optim!r})")


def _padded_flat(shard: list[Tensor], width: int, like: Tensor) -> Tensor:
    """``shard``'s parameters as one flat tensor of ``width`` elements (zero-padded: all-gather needs equal sizes)."""
    from ..creation import zeros

    pieces = [p.detach().reshape(-1) for p in shard]
    used = sum(p.numel() for p in shard)
    if used < width:
        pieces.append(zeros(width - used, dtype=like.dtype, device=like.device))
    return pieces[0] if len(pieces) == 1 else cat(pieces)
