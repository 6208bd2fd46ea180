"""DistributedDataParallel: one model replica per rank, gradients averaged after ``backward()`` in buckets.

At wrap time every rank checks that it holds the same model (parameter names,
shapes, dtypes, device types) and the same options, then takes rank 0's
parameters and buffers.  The forward wraps the module's outputs in an identity
whose backward queues :meth:`DistributedDataParallel.reduce_gradients` to run
when the backward pass ends (torch's DDP does the same with
``queue_callback``).  Gradients are packed into buckets of at most
``bucket_cap_mb`` (torch's default 25 MB), in reverse parameter order (the
order backward produces them) and per (device, dtype); every rank builds the
same buckets from the same model, so the all-reduces line up.

A parameter that got no gradient on a rank counts as a zero gradient there
(every rank reduces every bucket, so an unused branch cannot deadlock the
job); after the reduce it has a gradient (of zeros where no rank used it).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..autograd import Function, is_grad_enabled, no_grad, queue_callback
from ..creation import zeros
from ..device import parse_device
from ..nn.module import Module
from ..ops import cat
from ..tensor import Tensor
from .communicator import Communicator
from .process_group import get_communicator

__all__ = ["DistributedDataParallel", "Bucket"]


@dataclass(frozen=True)
class Bucket:
    """Parameters whose gradients are all-reduced as one flat buffer (same device and dtype)."""

    names: tuple[str, ...]
    params: tuple[Tensor, ...]
    nbytes: int


class _ReduceAfterBackward(Function):
    """Identity on a module output; its backward asks for the gradient reduce at the end of the pass."""

    # ctx is Any: it carries the attribute forward sets (torch's convention), which FunctionCtx does not declare.
    @staticmethod
    def forward(ctx: Any, x: Tensor, ddp: DistributedDataParallel) -> Tensor:
        ctx.ddp = ddp
        return x.detach()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        ctx.ddp._queue_reduce()
        return grad, None


class DistributedDataParallel(Module):
    """Data parallelism: wrap a model on every rank; ``backward()`` leaves the average gradient on all of them.

    ``bucket_cap_mb``: most megabytes (2**20 bytes) of gradients per
    all-reduce.  ``broadcast_buffers``: also take rank 0's buffers at wrap
    time.  Use :meth:`no_sync` to accumulate gradients locally over several
    micro-batches.  ValueError at wrap time, on every rank, when ranks hold
    different models or options.
    """

    def __init__(
        self,
        module: Module,
        device_ids: Sequence[Any] | None = None,
        output_device: Any = None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        init_sync: bool = True,
        process_group: Communicator | None = None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
        delay_all_reduce_named_params: Any = None,
        param_to_hook_all_reduce: Any = None,
        mixed_precision: Any = None,
        device_mesh: Any = None,
        skip_all_reduce_unused_params: bool = False,
    ) -> None:
        """torch's signature.  ``init_sync=False`` skips taking rank 0's parameters at wrap time.

        ``device_ids`` (one device, as torch wants for a single-device module) must be where the module's
        parameters are; ``output_device``, ``dim``, ``find_unused_parameters`` (unused parameters are always
        handled), ``check_reduction``, ``gradient_as_bucket_view``, ``static_graph`` and the other torch-only
        options are accepted and change nothing.  ``mixed_precision`` and ``device_mesh`` are not supported:
        use ``autocast``, and one process per device.
        """
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel wraps an ampcore.nn.Module, got {type(module).__name__}")
        if mixed_precision is not None or device_mesh is not None:
            raise NotImplementedError(
                "DistributedDataParallel(mixed_precision=..., device_mesh=...) is not supported; use "
                "ampcore.autocast for mixed precision and one process per device"
            )
        _check_device_ids(module, device_ids)
        if bucket_cap_mb is None:
            bucket_cap_mb = 25.0  # torch's default
        if (
            isinstance(bucket_cap_mb, bool)
            or not isinstance(bucket_cap_mb, (int, float))
            or not (bucket_cap_mb > 0 and math.isfinite(bucket_cap_mb))
        ):
            raise ValueError(f"bucket_cap_mb must be a positive number of megabytes, got {bucket_cap_mb!r}")
        super().__init__()
        self.module = module
        self.process_group = get_communicator(process_group)
        self.bucket_cap_mb = float(bucket_cap_mb)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self.device_ids = None if device_ids is None else list(device_ids)
        self._check_same_everywhere(named, broadcast_buffers)
        if init_sync:
            self._sync_from_rank0(broadcast_buffers)
        self.buckets = _plan_buckets(named, int(self.bucket_cap_mb * 2**20))
        self._require_sync = True
        self._reduce_queued = False

    # ------------------------------------------------------------------ wrap time
    def _check_same_everywhere(self, named: Sequence[tuple[str, Tensor]], broadcast_buffers: bool) -> None:
        settings: dict[str, Any] = {"model": type(self.module).__name__, "number of parameters": len(named)}
        settings.update(
            {f"parameter {n!r}": f"shape {tuple(p.shape)}, {p.dtype.name} on {p.device.type}" for n, p in named}
        )
        settings.update(bucket_cap_mb=self.bucket_cap_mb, broadcast_buffers=broadcast_buffers)
        self.process_group.check_consistent("DistributedDataParallel", settings)

    def _sync_from_rank0(self, broadcast_buffers: bool) -> None:
        comm = self.process_group
        tensors = list(self.module.parameters()) + (list(self.module.buffers()) if broadcast_buffers else [])
        for t in tensors:
            t._data = comm.broadcast(t.detach(), 0)._data

    # ------------------------------------------------------------------ forward and backward
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        out = self.module(*args, **kwargs)
        if not (self._require_sync and is_grad_enabled() and self.process_group.size > 1):
            return out
        self._reduce_queued = False
        return _map_tensors(out, lambda t: _ReduceAfterBackward.apply(t, self) if t.requires_grad else t)

    def _queue_reduce(self) -> None:
        if not self._reduce_queued:  # several outputs reach one backward pass: reduce once
            self._reduce_queued = True
            queue_callback(self._after_backward)

    def _after_backward(self) -> None:
        self._reduce_queued = False
        self.reduce_gradients()

    def reduce_gradients(self) -> None:
        """Average every parameter's gradient over the ranks, bucket by bucket (a collective).

        Called by itself at the end of each ``backward()`` outside
        :meth:`no_sync`; call it yourself after gradients were made some other way.
        """
        comm = self.process_group
        with no_grad():
            for bucket in self.buckets:
                grads = [
                    p.grad if p.grad is not None else zeros(*p.shape, dtype=p.dtype, device=p.device)
                    for p in bucket.params
                ]
                flat = cat([g.reshape(-1) for g in grads]) if len(grads) > 1 else grads[0].reshape(-1)
                flat = comm.all_reduce(flat, "avg")
                offset = 0
                for p in bucket.params:
                    n = p.numel()
                    p.grad = flat[offset : offset + n].reshape(*p.shape).clone()
                    offset += n

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside the block, ``backward()`` accumulates gradients locally; the first backward after it
        averages everything accumulated (gradient accumulation without a reduce per micro-batch)."""
        previous = self._require_sync
        self._require_sync = False
        try:
            yield
        finally:
            self._require_sync = previous

    def extra_repr(self) -> str:
        return (
            f"world_size={self.process_group.size}, bucket_cap_mb={self.bucket_cap_mb:g}, buckets={len(self.buckets)}"
        )


def _check_device_ids(module: Module, device_ids: Sequence[Any] | None) -> None:
    """torch's rule for a single-device module: ``device_ids`` is None or names the one device it is on."""
    if device_ids is None:
        return
    if len(device_ids) != 1:
        raise ValueError(
            f"device_ids must name the one device the module is on (one process per device), got {list(device_ids)!r}"
        )
    wanted = device_ids[0]
    index = wanted if isinstance(wanted, int) else parse_device(wanted).index
    where = {str(p.device) for p in module.parameters() if p.device.index != index}
    if where:
        raise ValueError(
            f"device_ids={list(device_ids)!r}, but the module's parameters are on {', '.join(sorted(where))}; "
            "move the module there first (module.to(device)) or pass device_ids=None"
        )


def _map_tensors(value: Any, fn: Any) -> Any:
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        items = [_map_tensors(v, fn) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    return value


def _plan_buckets(named: Sequence[tuple[str, Tensor]], cap_bytes: int) -> list[Bucket]:
    """Reverse parameter order, split per (device, dtype) and at ``cap_bytes``: the same plan on every rank."""
    open_buckets: dict[tuple[Any, Any], list[tuple[str, Tensor]]] = {}
    sizes: dict[tuple[Any, Any], int] = {}
    done: list[Bucket] = []

    def close(key: tuple[Any, Any]) -> None:
        items = open_buckets.pop(key)
        done.append(Bucket(tuple(n for n, _ in items), tuple(p for _, p in items), sizes.pop(key)))

    for name, p in reversed(named):
        key = (p.device, p.dtype)
        nbytes = p.numel() * p.dtype.itemsize
        if key in open_buckets and sizes[key] + nbytes > cap_bytes:
            close(key)
        open_buckets.setdefault(key, []).append((name, p))
        sizes[key] = sizes.get(key, 0) + nbytes
    for key in list(open_buckets):
        close(key)
    return done
