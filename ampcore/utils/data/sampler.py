"""Samplers, as torch.utils.data.sampler: which indices a DataLoader reads, and in which order.

Random samplers draw on the host with NumPy from a seed taken from an
``ampcore.Generator`` (the default one when ``generator`` is None), once per
pass: ``ampcore.manual_seed`` makes the order reproducible and every pass
differs.  The indices are Python ints, as torch's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

import numpy as np

from ...creation import Generator
from ...tensor import Tensor
from .dataset import host_rng

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
]

T_co = TypeVar("T_co", covariant=True)

# With replacement, indices are drawn this many at a time: a sampler of 1e10 samples (an "infinite" loader) never
# holds them all, and one NumPy call serves many batches.
_DRAW_CHUNK = 1024


class Sampler(Generic[T_co]):
    """Base class: ``__iter__`` yields indices (or lists of them, for a batch sampler); ``__len__`` if known."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass  # torch accepts and ignores it too

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} does not implement __iter__")


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value!r}")
    return int(value)


def _check_bool(name: str, value: Any, error: type[Exception] = ValueError) -> bool:
    if not isinstance(value, bool):
        raise error(f"{name} should be a boolean value, but got {name}={value!r}")
    return value


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Indices of ``data_source`` in random order.

    Without replacement each pass is a permutation (``num_samples`` larger than
    the data set chains whole permutations, then part of one); with
    ``replacement=True`` each index is drawn uniformly and independently,
    ``num_samples`` times (default ``len(data_source)``).
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Generator | None = None,
    ) -> None:
        self.data_source = data_source
        self.replacement = _check_bool("replacement", replacement, TypeError)  # torch raises TypeError here
        self._num_samples = num_samples
        self.generator = generator
        _positive_int("num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        """How many indices one pass yields."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        rng = host_rng(self.generator)
        if self.replacement:
            left = self.num_samples
            while left > 0:
                take = min(left, _DRAW_CHUNK)
                yield from rng.integers(0, n, size=take).tolist()
                left -= take
            return
        whole, rest = divmod(self.num_samples, n)
        for _ in range(whole):
            yield from rng.permutation(n).tolist()
        if rest:
            yield from rng.permutation(n)[:rest].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given ``indices`` in random order, without replacement."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in host_rng(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices ``0 .. len(weights) - 1`` drawn with probabilities proportional to ``weights``."""

    def __init__(
        self,
        weights: Sequence[float] | Tensor,
        num_samples: int,
        replacement: bool = True,
        generator: Generator | None = None,
    ) -> None:
        self.num_samples = _positive_int("num_samples", num_samples)
        self.replacement = _check_bool("replacement", replacement)
        values = weights.numpy() if isinstance(weights, Tensor) else np.asarray(weights)
        if values.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(values.shape)}")
        values = values.astype(np.float64)
        if not np.all(np.isfinite(values)) or np.any(values < 0) or not values.sum() > 0:
            raise ValueError("weights must be finite, non-negative and not all zero")
        if not replacement and num_samples > np.count_nonzero(values):
            raise RuntimeError(
                f"cannot draw {num_samples} samples without replacement from {np.count_nonzero(values)} "
                "non-zero weights"
            )
        self.weights = values
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        p = self.weights / self.weights.sum()
        draws = host_rng(self.generator).choice(len(p), size=self.num_samples, replace=self.replacement, p=p)
        return iter(draws.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Lists of ``batch_size`` indices from ``sampler``; the last one shorter unless ``drop_last``."""

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool) -> None:
        self.sampler = sampler
        self.batch_size = _positive_int("batch_size", batch_size)
        self.drop_last = _check_bool("drop_last", drop_last)

    def __iter__(self) -> Iterator[list[int]]:
        indices = iter(self.sampler)
        while batch := list(itertools.islice(indices, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
