"""DistributedSampler, as torch.utils.data.distributed: each rank reads its own share of the data set.

Every rank shuffles with the same seed (``seed + epoch``), pads (or, with
``drop_last``, trims) the order to a multiple of the world size, and takes
every ``num_replicas``-th index from its rank on: the shares are disjoint and
as equal as they can be.  Call :meth:`DistributedSampler.set_epoch` before
each epoch, or every epoch repeats the first one's order (as in torch).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized
from typing import TypeVar

import numpy as np

from ... import distributed as dist
from .sampler import Sampler

__all__ = ["DistributedSampler"]

T_co = TypeVar("T_co", covariant=True)


class DistributedSampler(Sampler[T_co]):
    """``DistributedSampler(dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False)``.

    ``num_replicas`` and ``rank`` default to the process group's
    (:func:`ampcore.distributed.get_world_size` / ``get_rank``), which must
    be initialized then.
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[T_co]:
        n = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass shuffle with ``seed + epoch``: call it at the start of every epoch."""
        self.epoch = epoch
