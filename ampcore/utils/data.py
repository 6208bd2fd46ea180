"""Datasets and batches, as torch.utils.data: Dataset, TensorDataset, Subset, random_split, DataLoader.

``DataLoader(dataset, batch_size=1, shuffle=False, drop_last=False,
collate_fn=None, generator=None)`` yields batches collated by
:func:`default_collate`: tensors stacked along a new first dimension, NumPy
arrays likewise, Python ints to an int64 tensor, floats to float64 (as torch),
bools to bool; dicts, lists and tuples collated per entry.  ``shuffle=True``
draws a new permutation every epoch from ``generator`` (the default generator
when None), so ``ampcore.manual_seed`` makes the order reproducible.

Loading runs in the calling process: ``num_workers`` and ``pin_memory`` are
accepted for torch code and change nothing (ampcore's host arrays are
already what a pinned transfer would read).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from .. import dtypes as dt
from ..creation import Generator, default_generator, tensor
from ..ops import stack
from ..tensor import Tensor

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "Subset",
    "random_split",
    "DataLoader",
    "default_collate",
]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map-style data set: ``__getitem__(index)`` and (for DataLoader's sampling) ``__len__``."""

    def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} does not implement __getitem__")


class IterableDataset(Dataset[T_co]):
    """A data set read as a stream (``__iter__``); DataLoader batches it in order (no shuffle)."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} does not implement __iter__")


class TensorDataset(Dataset[tuple[Tensor, ...]]):
    """Samples are rows: ``dataset[i] == tuple(t[i] for t in tensors)``; all tensors share their first dimension."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor) or t.ndim == 0:
                raise TypeError(f"TensorDataset: argument {i} must be a tensor with a first dimension, got {t!r}")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) != 1:
            raise ValueError(f"Size mismatch between tensors: first dimensions {sizes} must be equal")
        self.tensors = tensors

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, index: int) -> T_co:
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def _permutation(n: int, generator: Generator | None) -> list[int]:
    """A permutation of range(n) from a seed drawn from ``generator`` (the default one when None)."""
    gen = generator if generator is not None else default_generator
    if not isinstance(gen, Generator):
        raise TypeError(f"generator must be an ampcore.Generator, got {type(generator).__name__}")
    return [int(i) for i in np.random.default_rng(gen.next_seed()).permutation(n)]


def random_split(
    dataset: Dataset[T_co], lengths: Sequence[int | float], generator: Generator | None = None
) -> list[Subset[T_co]]:
    """Split ``dataset`` into non-overlapping random subsets of ``lengths`` (counts, or fractions summing to 1,
    the remainder given round-robin as torch does)."""
    n = len(dataset)  # type: ignore[arg-type]
    if lengths and all(isinstance(x, float) for x in lengths) and math.isclose(sum(lengths), 1.0):
        counts = [math.floor(n * frac) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
    else:
        counts = [int(x) for x in lengths]
    if sum(counts) != n or any(c < 0 for c in counts):
        raise ValueError(f"Sum of input lengths {list(lengths)} does not equal the length of the input dataset ({n})")
    order = _permutation(n, generator)
    out, start = [], 0
    for c in counts:
        out.append(Subset(dataset, order[start : start + c]))
        start += c
    return out


def default_collate(batch: Sequence[Any]) -> Any:
    """Merge a list of samples into a batch, as torch's ``default_collate`` (tuples become lists, as there)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch))
    if isinstance(elem, np.ndarray):
        return stack([tensor(a) for a in batch])
    if isinstance(elem, bool):
        return tensor(list(batch), dtype=dt.bool_)
    if isinstance(elem, int):
        return tensor(list(batch), dtype=dt.int64)
    if isinstance(elem, float):
        return tensor(list(batch), dtype=dt.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated)  # type: ignore[call-arg]  # dict, OrderedDict and their kin
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        if len({len(e) for e in batch}) != 1:
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError(
        "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        f"found {type(elem).__name__}"
    )


class DataLoader(Generic[T_co]):
    """Batches of ``dataset``: ``for x, y in DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)``.

    ``batch_size=None`` yields single samples, uncollated.  ``drop_last``
    drops a last incomplete batch.  ``sampler`` (an iterable of indices) sets
    the order instead of ``shuffle``.  A TensorDataset with the default
    collate is batched by one gather per tensor (the same values as stacking
    its rows).
    """

    def __init__(
        self,
        dataset: Dataset[T_co],
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        generator: Generator | None = None,
        **_torch_only: Any,
    ) -> None:
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0
        ):
            raise ValueError(
                f"batch_size should be a positive integer value or None, but got batch_size={batch_size!r}"
            )
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers option should be non-negative; got num_workers={num_workers!r}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if isinstance(dataset, IterableDataset) and (shuffle or sampler is not None):
            raise ValueError(
                "DataLoader with an IterableDataset reads it in order: shuffle and sampler are not allowed"
            )
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.drop_last = drop_last
        self.generator = generator

    def _indices(self) -> Iterator[int]:
        if self.sampler is not None:
            return iter(self.sampler)
        n = len(self.dataset)  # type: ignore[arg-type]
        return iter(_permutation(n, self.generator)) if self.shuffle else iter(range(n))

    def _samples(self) -> Iterator[Any]:
        if isinstance(self.dataset, IterableDataset):
            return iter(self.dataset)
        return (self.dataset[i] for i in self._indices())

    def __iter__(self) -> Iterator[Any]:
        if self.batch_size is None:
            yield from self._samples()
            return
        if isinstance(self.dataset, TensorDataset) and self.collate_fn is None:
            yield from self._tensor_batches(self.dataset)
            return
        collate = self.collate_fn or default_collate
        batch: list[Any] = []
        for sample in self._samples():
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield collate(batch)
                batch = []
        if batch and not self.drop_last:
            yield collate(batch)

    def _tensor_batches(self, dataset: TensorDataset) -> Iterator[list[Tensor]]:
        order = list(self._indices())
        assert self.batch_size is not None
        stop = len(order) - (len(order) % self.batch_size if self.drop_last else 0)
        for start in range(0, stop, self.batch_size):
            chunk = order[start : start + self.batch_size]
            yield [t[tensor(chunk, dtype=dt.int64, device=t.device)] for t in dataset.tensors]

    def __len__(self) -> int:
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)  # type: ignore[arg-type]
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
