"""DataLoader, as torch.utils.data.dataloader: batches of a data set, in this process or in worker processes.

``DataLoader(dataset, batch_size=1, shuffle=None, sampler=None,
batch_sampler=None, num_workers=0, collate_fn=None, pin_memory=False,
drop_last=False, timeout=0, worker_init_fn=None,
multiprocessing_context=None, generator=None, *, prefetch_factor=None,
persistent_workers=False, pin_memory_device='', in_order=True)``: torch's
signature, defaults and checks.

The order comes from ``sampler`` (default: :class:`SequentialSampler`, or
:class:`RandomSampler` with ``shuffle=True``), grouped by ``batch_sampler``
(default: a :class:`BatchSampler` of ``batch_size``); each batch is fetched
with the data set's ``__getitems__`` when it has one, else one
``dataset[i]`` per index, and merged by ``collate_fn`` (default
:func:`default_collate`).  A TensorDataset with the default collate is
batched by one gather per tensor (the same values as stacking its rows).

``num_workers > 0`` starts that many worker processes (``multiprocessing``,
its default start method unless ``multiprocessing_context`` names one), each
seeded with ``base_seed + worker_id`` (Python's ``random``, NumPy's global
generator and ampcore's; the base seed is one draw from ``generator``, or the default generator, made at
every pass with or without workers, as torch's) and running ``worker_init_fn(worker_id)``; up to
``prefetch_factor`` batches per worker are in flight, and batches come back
in order (``in_order=False``: as they are ready).  ``persistent_workers=True``
keeps the workers between epochs.  ``timeout`` bounds the wait for one batch.
See :mod:`.worker` for what runs in a worker.

``pin_memory`` and ``pin_memory_device`` are accepted and change nothing:
every backend copies from ordinary host memory (docs/porting-from-torch.md).
"""

from __future__ import annotations

import itertools
import multiprocessing
import queue
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from ... import dtypes as dt
from ...creation import Generator, default_generator, tensor
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from .worker import ExceptionWrapper, Exhausted, get_worker_info, worker_loop

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

T_co = TypeVar("T_co", covariant=True)

# How often a waiting main process checks that its workers are still alive.
_LIVENESS_POLL_S = 1.0


class _Fetch:
    """Makes one batch of a map-style data set from its indices (picklable, so spawned workers can run it)."""

    def __init__(self, dataset: Any, collate: Callable[[Any], Any], auto_collation: bool) -> None:
        self.dataset = dataset
        self.collate = collate
        self.auto_collation = auto_collation
        self.tensors = dataset.tensors if isinstance(dataset, TensorDataset) and collate is default_collate else None
        self.getitems = getattr(dataset, "__getitems__", None)

    def __call__(self, indices: Any) -> Any:
        if not self.auto_collation:
            return self.collate(self.dataset[indices])
        if self.tensors is not None:  # one gather per tensor instead of a row per sample and a stack
            return [t[tensor(indices, dtype=dt.int64, device=t.device)] for t in self.tensors]
        samples = self.getitems(indices) if self.getitems is not None else [self.dataset[i] for i in indices]
        return self.collate(samples)


class _Batches:
    """Groups an IterableDataset's samples into collated batches (in the main process or a worker)."""

    def __init__(self, batch_size: int | None, drop_last: bool, collate: Callable[[Any], Any]) -> None:
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.collate = collate

    def __call__(self, samples: Iterator[Any]) -> Iterator[Any]:
        if self.batch_size is None:
            for sample in samples:
                yield self.collate(sample)
            return
        while batch := list(itertools.islice(samples, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield self.collate(batch)


class DataLoader(Generic[T_co]):
    """Batches of ``dataset``: ``for x, y in DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)``."""

    _frozen = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")

    def __init__(
        self,
        dataset: Dataset[T_co],
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler[Any] | Any = None,
        batch_sampler: Sampler[Any] | Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        _check_options(num_workers, timeout, prefetch_factor, persistent_workers)
        if generator is not None and not isinstance(generator, Generator):
            raise TypeError(f"generator must be an ampcore.Generator, got {type(generator).__name__}")
        iterable = isinstance(dataset, IterableDataset)
        if iterable and (shuffle not in (None, False) or sampler is not None or batch_sampler is not None):
            raise ValueError(
                "DataLoader with IterableDataset: expected unspecified shuffle, sampler and batch_sampler options, "
                f"got shuffle={shuffle!r}, sampler={sampler!r}, batch_sampler={batch_sampler!r}"
            )
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if not iterable:
            if sampler is None:
                sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)  # type: ignore[arg-type]
            if batch_size is not None and batch_sampler is None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = (
            collate_fn
            if collate_fn is not None
            else (
                default_collate
                if batch_sampler is not None or (iterable and batch_size is not None)
                else default_convert
            )
        )
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers > 0 else prefetch_factor
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._pool: _WorkerPool | None = None
        self._initialized = True

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_initialized", False) and name in self._frozen:
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def _fetch(self) -> _Fetch:
        return _Fetch(self.dataset, self.collate_fn, self._auto_collation)

    def _batches(self) -> _Batches:
        return _Batches(self.batch_size, self.drop_last, self.collate_fn)

    def __iter__(self) -> Iterator[Any]:
        # One draw from the generator per pass, whether or not workers use it (they are seeded from it), as
        # torch draws its base seed: the sampler's order then does not depend on num_workers.
        base_seed = (self.generator or default_generator).next_seed()
        if self.num_workers == 0:
            if isinstance(self.dataset, IterableDataset):
                return self._batches()(iter(self.dataset))
            return map(self._fetch(), iter(self._index_sampler))
        if self._pool is None or not self.persistent_workers:
            self._pool = _WorkerPool(self, base_seed)
        return self._pool.epoch(self)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self._index_sampler)

    def __del__(self) -> None:
        pool = self.__dict__.get("_pool")
        if pool is not None:
            pool.shutdown()


def _check_options(num_workers: Any, timeout: Any, prefetch_factor: Any, persistent_workers: Any) -> None:
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(
            f"num_workers option should be non-negative; use num_workers=0 to disable multiprocessing, "
            f"got num_workers={num_workers!r}"
        )
    if timeout < 0:
        raise ValueError(f"timeout option should be non-negative, got timeout={timeout!r}")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError(
            "prefetch_factor option could only be specified in multiprocessing. let num_workers > 0 to enable "
            "multiprocessing, otherwise set prefetch_factor to None."
        )
    if prefetch_factor is not None and (isinstance(prefetch_factor, bool) or prefetch_factor < 0):
        raise ValueError(f"prefetch_factor option should be non-negative, got prefetch_factor={prefetch_factor!r}")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")


class _WorkerPool:
    """The worker processes of one DataLoader, their index queues and the shared result queue."""

    def __init__(self, loader: DataLoader[Any], base_seed: int) -> None:
        context = loader.multiprocessing_context
        if context is None or isinstance(context, str):
            context = multiprocessing.get_context(context)
        self.num_workers = loader.num_workers
        self.iterable = isinstance(loader.dataset, IterableDataset)
        self.result_queue = context.Queue()
        self.index_queues = []
        self.workers = []
        fetch = None if self.iterable else loader._fetch()
        batches = loader._batches() if self.iterable else None
        for worker_id in range(self.num_workers):
            index_queue = context.Queue()
            index_queue.cancel_join_thread()  # a stopped worker's unread tasks must not block the main's exit
            process = context.Process(
                target=worker_loop,
                args=(
                    loader.dataset,
                    fetch,
                    batches,
                    index_queue,
                    self.result_queue,
                    worker_id,
                    self.num_workers,
                    base_seed + worker_id,
                    loader.worker_init_fn,
                ),
                daemon=True,  # as torch's: a worker never outlives the main process
            )
            process.start()
            self.index_queues.append(index_queue)
            self.workers.append(process)
        self.epochs = 0
        self.alive = True

    def epoch(self, loader: DataLoader[Any]) -> Iterator[Any]:
        """One pass over the data set through the workers; shuts them down at its end unless persistent."""
        self.epochs += 1
        try:
            yield from self._run(loader, self.epochs)
        finally:
            if not loader.persistent_workers:
                self.shutdown()

    def _run(self, loader: DataLoader[Any], epoch: int) -> Iterator[Any]:
        assert loader.prefetch_factor is not None
        in_flight = max(1, loader.prefetch_factor) * self.num_workers
        tasks = self._tasks(loader)
        active = [True] * self.num_workers
        pending: dict[int, int] = {}  # task index -> worker
        ready: dict[int, Any] = {}
        sent = received = 0
        next_worker = 0

        def send() -> bool:
            nonlocal sent, next_worker
            if not any(active):
                return False
            while not active[next_worker]:
                next_worker = (next_worker + 1) % self.num_workers
            try:
                indices = next(tasks)
            except StopIteration:
                return False
            self.index_queues[next_worker].put((epoch, sent, indices))
            pending[sent] = next_worker
            sent += 1
            next_worker = (next_worker + 1) % self.num_workers
            return True

        while len(pending) < in_flight and send():
            pass
        while pending:
            if loader.in_order:
                while received not in ready:
                    self._receive(loader, epoch, ready)
                index = received
            else:
                while not ready:
                    self._receive(loader, epoch, ready)
                index = next(iter(ready))
            out = ready.pop(index)
            worker = pending.pop(index)
            received += 1
            if isinstance(out, Exhausted):
                active[worker] = False
            elif isinstance(out, ExceptionWrapper):
                out.reraise()
            send()
            if not isinstance(out, Exhausted):
                yield out

    def _tasks(self, loader: DataLoader[Any]) -> Iterator[Any]:
        if self.iterable:
            return itertools.repeat(None)  # "your next batch", to each active worker in turn
        return iter(loader._index_sampler)

    def _receive(self, loader: DataLoader[Any], epoch: int, ready: dict[int, Any]) -> None:
        start = time.monotonic()
        while True:
            wait = _LIVENESS_POLL_S
            if loader.timeout > 0:
                left = loader.timeout - (time.monotonic() - start)
                if left <= 0:
                    raise RuntimeError(f"DataLoader timed out after {loader.timeout} seconds")
                wait = min(wait, left)
            try:
                got_epoch, index, out = self.result_queue.get(timeout=wait)
            except queue.Empty:
                self._check_alive()
                continue
            if got_epoch == epoch:  # a result of an abandoned earlier pass (persistent workers) is dropped
                ready[index] = out
                return

    def _check_alive(self) -> None:
        dead = [p for p in self.workers if not p.is_alive()]
        if dead:
            names = ", ".join(f"pid {p.pid} (exit code {p.exitcode})" for p in dead)
            self.shutdown()
            raise RuntimeError(f"DataLoader worker(s) {names} exited unexpectedly")

    def shutdown(self) -> None:
        """Stop the workers (a sentinel each, then a bounded wait, then terminate)."""
        if not self.alive:
            return
        self.alive = False
        for index_queue, process in zip(self.index_queues, self.workers):
            if process.is_alive():
                index_queue.put(None)
        for process in self.workers:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
        for q in (*self.index_queues, self.result_queue):
            q.cancel_join_thread()
            q.close()
