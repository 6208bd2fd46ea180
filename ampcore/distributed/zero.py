"""ZeroRedundancyOptimizer: ZeRO stage 1, optimizer state sharded across ranks (torch's class of that name).

The parameters of each group are laid end to end (per device and dtype) as
one flat vector of N numbers, and rank r owns the contiguous slice
``[r * ceil(N/W), (r+1) * ceil(N/W))``, as DeepSpeed partitions its flat
buffer.  Slicing by elements rather than by whole parameters keeps every
rank's share at 1/W even when one weight matrix holds half the model (the
reference MLP's 1024x1024 layer is 56% of it).  Each rank holds its slice as a
*shard* tensor, keeps optimizer state for the shards only and steps them; then
every rank's shards are all-gathered into the parameters, one collective per
(group, device, dtype).

Use it with :class:`~.ddp.DistributedDataParallel` (gradients averaged first),
as torch does.  ``param_groups`` hold this rank's shards, whose ``.grad`` are
slices of the parameters' averaged gradients (refreshed whenever the
parameters' gradients change).  A GradScaler stepping it therefore unscales
and checks only this rank's slice, so it all-reduces ``found_inf`` with MAX
over ``process_group`` before deciding to skip, and every rank skips the
same steps.  Parameters without a gradient count as zero gradients when
another parameter of their group has one.
"""

from __future__ import annotations

import weakref
from collections import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..autograd import no_grad, zero_grads
from ..creation import tensor as make_tensor
from ..creation import zeros
from ..ops import cat
from ..optim.optimizer import Optimizer, StateDictError
from ..tensor import Tensor
from .communicator import Communicator
from .process_group import get_communicator

__all__ = ["ZeroRedundancyOptimizer", "optimizer_state_bytes"]


def optimizer_state_bytes(optimizer: Any) -> int:
    """Bytes of the tensors in ``optimizer.state`` (moments, momentum buffers) on this rank."""
    return sum(
        v.numel() * v.dtype.itemsize for st in optimizer.state.values() for v in st.values() if isinstance(v, Tensor)
    )


def shard_range(total: int, size: int, rank: int) -> tuple[int, int]:
    """Rank ``rank``'s slice ``[start, end)`` of ``total`` elements split in ``size`` near-equal contiguous parts."""
    chunk = -(-total // size)
    return min(rank * chunk, total), min((rank + 1) * chunk, total)


@dataclass
class _Flat:
    """The parameters of one group of one (device, dtype), flattened; this rank's slice of them as ``shard``."""

    group: int
    params: list[Tensor]
    total: int
    start: int
    end: int
    shard: Tensor | None  # None when this rank's slice is empty (fewer elements than ranks)
    grads_of: tuple[Any, ...] = ()  # weak references to the parameters' .grad objects the shard's grad came from

    def cut_from(self) -> bool:
        """Whether the shard's gradient was cut from the parameters' current ``.grad`` objects."""
        return len(self.grads_of) == len(self.params) and all(
            (ref is None and p.grad is None) or (ref is not None and ref() is p.grad)
            for ref, p in zip(self.grads_of, self.params)
        )

    def flat(self, tensors: list[Tensor]) -> Tensor:
        pieces = [t.detach().reshape(-1) for t in tensors]
        return pieces[0] if len(pieces) == 1 else cat(pieces)


def _as_groups(params: Any) -> list[dict[str, Any]]:
    if isinstance(params, (Tensor, dict)) or not isinstance(params, abc.Iterable):
        raise TypeError(f"params should be an iterable of tensors or of dicts, got {type(params).__name__}")
    groups = list(params)
    if not groups:
        raise ValueError("ZeroRedundancyOptimizer got an empty parameter list")
    if not isinstance(groups[0], dict):
        groups = [{"params": groups}]
    return [{**g, "params": list(g["params"])} for g in groups]


class ZeroRedundancyOptimizer:
    """``optimizer_class`` (``optim.AdamW``, ...) over this rank's slice of ``params``, then an all-gather.

    ``defaults`` go to ``optimizer_class``.  ValueError at construction, on
    every rank, when ranks disagree on the optimizer, its options or the
    parameters.  Checkpoint with :meth:`consolidate_state_dict` (on every
    rank) then :meth:`state_dict` on the receiving rank; a job of any world
    size can :meth:`load_state_dict` the result.
    """

    def __init__(
        self,
        params: Any,
        optimizer_class: Callable[..., Optimizer],
        *,
        process_group: Communicator | None = None,
        parameters_as_bucket_view: bool = False,
        overlap_with_ddp: bool = False,
        **defaults: Any,
    ) -> None:
        # torch's parameters_as_bucket_view is accepted (the shards are flat buffers already); overlap_with_ddp
        # needs DDP communication hooks, which ampcore's DDP does not have.
        if overlap_with_ddp:
            raise NotImplementedError(
                "ZeroRedundancyOptimizer(overlap_with_ddp=True) is not supported: DDP reduces after backward"
            )
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(
                f"optimizer_class must be an ampcore.optim.Optimizer subclass such as optim.AdamW, "
                f"got {optimizer_class!r}"
            )
        self.process_group = get_communicator(process_group)
        self._groups = _as_groups(params)
        self._params = [p for g in self._groups for p in g["params"]]
        self._check_same_everywhere(optimizer_class, defaults)
        self._flats = self._make_flats()
        local = [
            {
                **{k: v for k, v in g.items() if k != "params"},
                "params": [f.shard for f in self._flats if f.group == i and f.shard is not None],
            }
            for i, g in enumerate(self._groups)
        ]
        self.optim = optimizer_class(local, **defaults)
        self._consolidated: dict[str, Any] | None = None

    def _check_same_everywhere(self, optimizer_class: type, defaults: dict[str, Any]) -> None:
        settings: dict[str, Any] = {
            "optimizer": optimizer_class.__name__,
            "options": repr(sorted(defaults.items())),
            "groups": len(self._groups),
        }
        for i, g in enumerate(self._groups):
            settings[f"group {i} options"] = repr(sorted((k, v) for k, v in g.items() if k != "params"))
            settings[f"group {i} parameters"] = [(tuple(p.shape), p.dtype.name) for p in g["params"]]
        self.process_group.check_consistent("ZeroRedundancyOptimizer", settings)

    def _make_flats(self) -> list[_Flat]:
        comm, flats = self.process_group, []
        for i, group in enumerate(self._groups):
            kinds: dict[tuple[Any, Any], list[Tensor]] = {}
            for p in group["params"]:
                kinds.setdefault((p.device, p.dtype), []).append(p)
            for params in kinds.values():
                total = sum(p.numel() for p in params)
                start, end = shard_range(total, comm.size, comm.rank)
                flat = _Flat(i, params, total, start, end, None)
                if end > start:
                    with no_grad():
                        flat.shard = flat.flat(params)[start:end].clone()
                    flat.shard.requires_grad_(True)
                flats.append(flat)
        return flats

    # ------------------------------------------------------------------ the optimizer surface
    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """This rank's shards of each group, their ``.grad`` cut from the parameters' current gradients."""
        self._pull_grads()
        return self.optim.param_groups

    @property
    def state(self) -> Any:
        """Optimizer state of this rank's shards only."""
        return self.optim.state

    @property
    def defaults(self) -> dict[str, Any]:
        return self.optim.defaults

    def _pull_grads(self) -> None:
        """Give each shard its slice of the parameters' gradients, unless it already has these ones."""
        for f in self._flats:
            if f.shard is None or f.cut_from():
                continue
            f.grads_of = tuple(None if p.grad is None else weakref.ref(p.grad) for p in f.params)
            if all(p.grad is None for p in f.params):
                f.shard.grad = None
                continue
            grads = [
                p.grad if p.grad is not None else zeros(*p.shape, dtype=p.dtype, device=p.device) for p in f.params
            ]
            with no_grad():
                f.shard.grad = f.flat(grads)[f.start : f.end].clone()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter (and of this rank's shards)."""
        zero_grads(self._params, set_to_none)
        self._pull_grads()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Step this rank's shards, then all-gather every rank's into the parameters (a collective).

        The shards start from the parameters' current values, so a parameter
        changed elsewhere (``load_state_dict``) is stepped from its new value.
        """
        self._pull_grads()
        with no_grad():
            for f in self._flats:
                if f.shard is not None:
                    f.shard._data = f.flat(f.params)[f.start : f.end].clone()._data
        loss = self.optim.step(closure)
        self._all_gather_parameters()
        return loss

    def _all_gather_parameters(self) -> None:
        comm = self.process_group
        with no_grad():
            for f in self._flats:
                width = shard_range(f.total, comm.size, 0)[1]
                mine = f.shard.detach() if f.shard is not None else None
                used = 0 if mine is None else mine.numel()
                if mine is None or used < width:
                    pad = zeros(width - used, dtype=f.params[0].dtype, device=f.params[0].device)
                    mine = pad if mine is None else cat([mine, pad])
                flat = cat(comm.all_gather(mine))
                offset = 0
                for p in f.params:
                    n = p.numel()
                    p._data = flat[offset : offset + n].reshape(*p.shape).clone()._data
                    offset += n

    # ------------------------------------------------------------------ checkpoints
    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's slice of the state on rank ``to`` (a collective: call it on every rank)."""
        mine = {
            k: {key: (v.numpy() if isinstance(v, Tensor) else v) for key, v in self.optim.state[f.shard].items()}
            for k, f in enumerate(self._flats)
            if f.shard is not None and f.shard in self.optim.state
        }
        everyone = self.process_group.all_gather_object(mine)
        if self.process_group.rank != to:
            self._consolidated = None
            return
        state: dict[int, dict[str, Any]] = {}
        for k, f in enumerate(self._flats):
            pieces = [shard[k] for shard in everyone if k in shard]
            if not pieces:
                continue
            state[k] = {
                key: (self._joined(f, [p[key] for p in pieces]) if hasattr(value, "shape") else value)
                for key, value in pieces[0].items()
            }
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.optim.param_groups]
        self._consolidated = {
            "state": state,
            "param_groups": groups,
            "flat_sizes": [(f.group, f.total) for f in self._flats],
        }

    @staticmethod
    def _joined(f: _Flat, pieces: list[Any]) -> Tensor:
        import numpy as np

        joined = np.concatenate(pieces)
        if joined.shape != (f.total,):
            raise RuntimeError(
                f"ZeroRedundancyOptimizer: the gathered state has {joined.shape[0]} element(s) for "
                f"a flat group of {f.total}; a rank's state is missing"
            )
        return make_tensor(joined, device=f.params[0].device)

    def state_dict(self) -> dict[str, Any]:
        """The whole optimizer's state: per flat group of parameters, each state tensor over all N elements.

        Only on the rank :meth:`consolidate_state_dict` sent it to, after that
        call; RuntimeError elsewhere, naming the fix.
        """
        if self._consolidated is None:
            raise RuntimeError(
                f"ZeroRedundancyOptimizer.state_dict() on rank {self.process_group.rank}: call "
                "consolidate_state_dict(to=rank) on every rank first, then state_dict() on that rank"
            )
        return self._consolidated

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a consolidated :meth:`state_dict` on every rank (any world size): each keeps its own slice.

        StateDictError (nothing changed) when it does not fit these parameters.
        """
        if not isinstance(state_dict, Mapping) or not {"state", "param_groups", "flat_sizes"} <= set(state_dict):
            raise StateDictError(
                "a ZeroRedundancyOptimizer state dict needs 'state', 'param_groups' and "
                "'flat_sizes' entries; save it with consolidate_state_dict() then state_dict()"
            )
        sizes = [(f.group, f.total) for f in self._flats]
        if [tuple(s) for s in state_dict["flat_sizes"]] != sizes:
            raise StateDictError(
                f"the state dict was saved for flat parameter groups {state_dict['flat_sizes']} "
                f"(group, elements), this optimizer has {sizes}"
            )
        local_ids: dict[int, list[int]] = {}
        for k, f in enumerate(self._flats):
            if f.shard is not None:
                local_ids.setdefault(f.group, []).append(k)
        groups = [{**saved, "params": local_ids.get(i, [])} for i, saved in enumerate(state_dict["param_groups"])]
        state = {}
        for k, saved in state_dict["state"].items():
            f = self._flats[k]
            if f.shard is not None:
                state[k] = {key: (v[f.start : f.end] if isinstance(v, Tensor) else v) for key, v in saved.items()}
        self.optim.load_state_dict({"state": state, "param_groups": groups})

    def __repr__(self) -> str:
        mine = sum(f.end - f.start for f in self._flats)
        return (
            f"ZeroRedundancyOptimizer(rank {self.process_group.rank} of {self.process_group.size}, "
            f"{mine} of {sum(f.total for f in self._flats)} elements, {type(self.optim).__name__})"
        )
