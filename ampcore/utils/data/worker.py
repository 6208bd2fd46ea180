"""DataLoader's worker processes: what runs in each one, and :func:`get_worker_info`.

A worker takes tasks ``(epoch, task_index, indices)`` from its own index
queue, fetches and collates that batch (for an IterableDataset: the next
batch of its own iterator), and puts ``(epoch, task_index, batch)`` on the
shared result queue; ``None`` stops it.  An exception is sent back as an
:class:`ExceptionWrapper` and raised in the main process, naming the worker.

Tensors made in a worker are made on the ``cpu`` backend whatever the
default device is: a forked process cannot use the parent's device context
(torch's workers have the same rule for CUDA), and the batch is pickled
through a queue anyway.  Move it in the training loop (``x.to(device)``).
"""

from __future__ import annotations

import random
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...creation import manual_seed
from ...plugins import set_default_device

__all__ = ["WorkerInfo", "get_worker_info", "ExceptionWrapper", "Exhausted", "worker_loop"]


@dataclass(frozen=True)
class WorkerInfo:
    """Inside a worker: its ``id`` (0 .. ``num_workers`` - 1), its ``seed`` and its copy of the ``dataset``."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """This worker's :class:`WorkerInfo` inside a DataLoader worker process, None in the main process."""
    return _info


class ExceptionWrapper:
    """An exception raised in a worker, carried back to the main process with its traceback as text."""

    def __init__(self, where: str) -> None:
        exc_type, exc, _ = sys.exc_info()
        self.exc_type = exc_type or RuntimeError
        self.message = f"Caught {self.exc_type.__name__} {where}.\nOriginal {traceback.format_exc()}"

    def reraise(self) -> None:
        """Raise it again here: the same exception type where it can be built from a message, else RuntimeError."""
        try:
            error = self.exc_type(self.message)
        except Exception:  # noqa: BLE001 - an exception type whose constructor wants other arguments
            raise RuntimeError(self.message) from None
        raise error


class Exhausted:
    """A worker's IterableDataset copy has no more samples."""


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(seed % 2**32)


def worker_loop(
    dataset: Any,
    fetch: Callable[[Any], Any],
    batches: Callable[[Iterator[Any]], Iterator[Any]] | None,
    index_queue: Any,
    result_queue: Any,
    worker_id: int,
    num_workers: int,
    seed: int,
    init_fn: Callable[[int], None] | None,
) -> None:
    """The body of worker ``worker_id``: seed, run ``init_fn(worker_id)``, then serve tasks until ``None``.

    ``fetch(indices)`` makes a batch of a map-style data set; ``batches(iterator)`` (iterable data sets) turns
    the worker's iterator over its copy of the data set into batches.
    """
    global _info
    _info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
    set_default_device("cpu")
    _seed_everything(seed)
    init_error = None
    if init_fn is not None:
        try:
            init_fn(worker_id)
        except Exception:  # noqa: BLE001 - sent to the main process, which raises it
            init_error = ExceptionWrapper(f"in worker_init_fn of DataLoader worker process {worker_id}")
    stream, stream_epoch = None, None
    while True:
        try:
            task = index_queue.get()
        except KeyboardInterrupt:  # the main process is stopping; it ends this worker
            continue
        if task is None:
            break
        epoch, index, indices = task
        if init_error is not None:
            result_queue.put((epoch, index, init_error))
            continue
        try:
            if batches is None:
                out = fetch(indices)
            else:
                if stream_epoch != epoch:
                    stream, stream_epoch = batches(iter(dataset)), epoch
                assert stream is not None
                out = next(stream, Exhausted())
        except Exception:  # noqa: BLE001 - sent to the main process, which raises it
            out = ExceptionWrapper(f"in DataLoader worker process {worker_id}")
        result_queue.put((epoch, index, out))
        del out
