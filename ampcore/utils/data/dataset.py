"""Data sets, as torch.utils.data.dataset: Dataset, IterableDataset, TensorDataset, ConcatDataset, ChainDataset,
Subset and random_split."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, TypeVar

import numpy as np

from ...creation import Generator, default_generator
from ...tensor import Tensor

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "ConcatDataset",
    "ChainDataset",
    "Subset",
    "random_split",
]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map-style data set: ``__getitem__(index)`` and (for DataLoader's sampling) ``__len__``.

    A subclass may add ``__getitems__(indices)`` returning the list of samples at ``indices``: DataLoader then
    fetches a batch with one call, as torch's does.
    """

    def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} does not implement __getitem__")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A data set read as a stream (``__iter__``); DataLoader batches it in order (no sampler, no shuffle).

    With ``num_workers > 0`` every worker iterates its own copy: shard it in ``__iter__`` with
    :func:`~ampcore.utils.data.get_worker_info`, as in torch.
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} does not implement __iter__")

    def __add__(self, other: Dataset[T_co]) -> ChainDataset[T_co]:  # type: ignore[override]  # torch's behaviour
        return ChainDataset([self, other])


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


class ConcatDataset(Dataset[T_co]):
    """The map-style ``datasets`` one after another; ``cumulative_sizes`` holds where each ends."""

    def __init__(self, datasets: Iterable[Dataset[T_co]]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset; use ChainDataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]).tolist())  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> T_co:
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset[T_co]):
    """The iterable ``datasets`` one after another."""

    def __init__(self, datasets: Iterable[Dataset[T_co]]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator[T_co]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)  # type: ignore[arg-type,misc]  # a Dataset need not be Sized


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, index: int) -> T_co:
        return self.dataset[self.indices[index]]

    def __getitems__(self, indices: list[int]) -> list[T_co]:
        inner = getattr(self.dataset, "__getitems__", None)
        if inner is not None:
            return inner([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


def host_rng(generator: Generator | None) -> np.random.Generator:
    """A NumPy generator seeded from ``generator`` (the default one when None): one draw from it per call."""
    gen = generator if generator is not None else default_generator
    if not isinstance(gen, Generator):
        raise TypeError(f"generator must be an ampcore.Generator, got {type(generator).__name__}")
    return np.random.default_rng(gen.next_seed())


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
    order = host_rng(generator).permutation(n).tolist()
    out, start = [], 0
    for c in counts:
        out.append(Subset(dataset, order[start : start + c]))
        start += c
    return out
