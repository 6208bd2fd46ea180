"""torch.utils.data's counterpart, with its submodules: data sets, samplers, DataLoader and collation.

``from ampcore.utils.data import DataLoader, RandomSampler`` and torch's
submodule paths (``ampcore.utils.data.dataloader.DataLoader``,
``ampcore.utils.data.distributed.DistributedSampler``) both work.
"""

from typing import TYPE_CHECKING

from ...names import missing_names_getattr as _missing_names_getattr
from . import collate, dataloader, dataset, distributed, sampler
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .distributed import DistributedSampler
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from .worker import WorkerInfo, get_worker_info

__all__ = [
    # submodules, as torch's
    "dataloader",
    "dataset",
    "sampler",
    "distributed",
    "collate",
    # data sets
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "ConcatDataset",
    "ChainDataset",
    "Subset",
    "random_split",
    # samplers
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
    "DistributedSampler",
    # loading
    "DataLoader",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "WorkerInfo",
]


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
