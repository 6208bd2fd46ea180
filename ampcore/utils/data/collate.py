"""Merging samples into batches: torch's ``default_collate`` and ``default_convert``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ... import dtypes as dt
from ...creation import tensor
from ...ops import stack
from ...tensor import Tensor

__all__ = ["default_collate", "default_convert"]


def default_collate(batch: Sequence[Any]) -> Any:
    """Merge a list of samples into a batch, as torch's ``default_collate``.

    Tensors and NumPy arrays are stacked along a new first dimension, Python
    ints become an int64 tensor, floats float64 (as torch), bools bool, NumPy
    scalars keep their dtype; strings stay a list; dicts, namedtuples, lists
    and tuples are collated per entry (tuples become lists, as in torch).
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch))
    if isinstance(elem, np.ndarray):  # stacked on the host, then one tensor: the values stack([tensor(a), ...]) has
        if elem.dtype.kind not in "biuf":
            raise TypeError(f"default_collate: NumPy arrays of dtype {elem.dtype} cannot become tensors")
        return tensor(np.stack(batch))
    if isinstance(elem, np.generic) and elem.dtype.kind in "biuf":
        return tensor(np.asarray(batch))
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


def default_convert(data: Any) -> Any:
    """What DataLoader does to each sample when it does not batch (``batch_size=None``): NumPy arrays and scalars
    become tensors, containers are converted per entry, anything else is returned as it is."""
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf":
        return tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind in "biuf":
        return tensor(np.asarray(data))
    if isinstance(data, Mapping):
        converted = {key: default_convert(value) for key, value in data.items()}
        try:
            return type(data)(converted)  # type: ignore[call-arg]
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # torch turns tuples into lists here too
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])  # type: ignore[call-arg]
        except TypeError:
            return [default_convert(d) for d in data]
    return data
