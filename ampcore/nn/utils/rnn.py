"""torch.nn.utils.rnn: PackedSequence and the functions that pack and unpack variable-length batches.

A PackedSequence holds the time steps of a batch of sequences sorted by length, longest first, each step's
elements one after another (``data``: (sum of lengths, *)), with ``batch_sizes`` (how many sequences are still
running at each step, an int64 cpu tensor as in torch) and the permutations between the caller's order and the
sorted one.  Packing and unpacking are ``take`` and ``index_add`` by positions worked out on the host from the
lengths (which torch too keeps on the CPU), so both are differentiable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ... import dtypes as dt
from ...creation import tensor as make_tensor
from ...ops import elementwise as ew
from ...ops import index_add, stack, take
from ...tensor import Tensor
from .. import functional as F

__all__ = [
    "PackedSequence",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pack_sequence",
    "pad_sequence",
    "unpad_sequence",
    "unpack_sequence",
    "invert_permutation",
]


class PackedSequence(NamedTuple):
    """A packed batch of variable-length sequences (see the module docstring); make one with
    :func:`pack_padded_sequence` or :func:`pack_sequence`, never by hand."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """The same packing with ``data`` moved or converted (``batch_sizes`` stays on the cpu, as in torch)."""
        return self._replace(data=self.data.to(*args, **kwargs))

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def float(self) -> PackedSequence:
        return self.to(dtype=dt.float32)

    def double(self) -> PackedSequence:
        return self.to(dtype=dt.float64)

    def half(self) -> PackedSequence:
        return self.to(dtype=dt.float16)

    @property
    def is_cuda(self) -> bool:
        return self.data.device.type == "cuda"

    def lengths(self) -> np.ndarray:
        """Each sequence's length, in the sorted (packed) order."""
        sizes = self.batch_sizes.numpy()
        return (np.arange(int(sizes[0]) if sizes.size else 0)[None, :] < sizes[:, None]).sum(0)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation tensor (torch.nn.utils.rnn.invert_permutation)."""
    if permutation is None:
        return None
    order = permutation.numpy()
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return permutation._new_tensor(inverse, dt.int64)


def _lengths(lengths: Any) -> np.ndarray:
    values = np.asarray(lengths.numpy() if isinstance(lengths, Tensor) else lengths, dtype=np.int64).reshape(-1)
    if values.size and values.min() <= 0:
        raise ValueError(f"pack_padded_sequence(): every length must be positive, got {values.tolist()}")
    return values


def _cpu_long(values: np.ndarray) -> Tensor:
    return make_tensor(np.asarray(values, dtype=np.int64), dtype=dt.int64, device="cpu")


def pack_padded_sequence(
    input: Tensor,  # noqa: A002 - torch's argument name
    lengths: Any,
    batch_first: bool = False,
    enforce_sorted: bool = True,
) -> PackedSequence:
    """Pack a padded (L, N, *) batch (``batch_first``: (N, L, *)) of sequences of ``lengths`` (a list or an int64
    tensor).  ``enforce_sorted=True`` wants the lengths longest first (ValueError otherwise, as torch's); False
    sorts them and records the permutation."""
    lens = _lengths(lengths)
    x = input.transpose(0, 1) if batch_first else input
    steps, batch = x.shape[:2]
    if lens.size != batch:
        raise ValueError(f"pack_padded_sequence(): {lens.size} lengths for a batch of {batch} sequences")
    if lens.size and lens.max() > steps:
        raise ValueError(f"pack_padded_sequence(): a length {int(lens.max())} exceeds the {steps} padded steps")
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise ValueError(
                "pack_padded_sequence(): the lengths must be sorted longest first with enforce_sorted=True, got "
                f"{lens.tolist()}; sort the batch or pass enforce_sorted=False"
            )
        order = None
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
    columns = order if order is not None else np.arange(batch)
    sizes = (np.arange(int(lens.max()) if lens.size else 0)[:, None] < lens[None, :]).sum(1)
    positions: Any = np.concatenate([t * batch + columns[: int(n)] for t, n in enumerate(sizes)]) if sizes.size else []
    flat = x.reshape(steps * batch, *x.shape[2:])
    data = take(flat, x._new_tensor(np.asarray(positions, dtype=np.int64), dt.int64), 0)
    sorted_indices = None if order is None else x._new_tensor(order, dt.int64)
    return PackedSequence(data, _cpu_long(sizes), sorted_indices, invert_permutation(sorted_indices))


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """The padded batch of a PackedSequence, (L, N, *) (``batch_first``: (N, L, *)), in the caller's original
    order, and the lengths (an int64 cpu tensor); ``total_length`` pads to that many steps."""
    data, sizes = sequence.data, sequence.batch_sizes.numpy().astype(np.int64)
    batch = int(sizes[0]) if sizes.size else 0
    steps = sizes.size
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"pad_packed_sequence(): total_length {total_length} is less than the {steps} steps")
        steps = int(total_length)
    positions: Any = np.concatenate([t * batch + np.arange(int(n)) for t, n in enumerate(sizes)]) if sizes.size else []
    where = data._new_tensor(np.asarray(positions, dtype=np.int64), dt.int64)
    flat = index_add(data, where, 0, steps * batch)
    padded = flat.reshape(steps, batch, *data.shape[1:])
    if padding_value != 0:
        filled = np.zeros((steps * batch,), dtype=bool)
        filled[np.asarray(positions, dtype=np.int64)] = True
        mask = data._new_tensor(filled.reshape((steps, batch) + (1,) * (data.ndim - 1)), dt.bool_)
        padded = ew.where(mask, padded, padding_value)
    lengths = sequence.lengths()
    if sequence.unsorted_indices is not None:
        padded = take(padded, sequence.unsorted_indices, 1)
        lengths = lengths[sequence.unsorted_indices.numpy()]
    return (padded.transpose(0, 1) if batch_first else padded), _cpu_long(lengths)


def pad_sequence(
    sequences: Sequence[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack tensors of shape (L_i, *) into (L_max, N, *) (``batch_first``: (N, L_max, *)), padding each with
    ``padding_value`` on ``padding_side`` ('right' or 'left')."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence(): padding_side must be 'right' or 'left', got {padding_side!r}")
    if not sequences:
        raise ValueError("pad_sequence() needs at least one tensor")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        widths = [0, 0] * (s.ndim - 1) + ([0, extra] if padding_side == "right" else [extra, 0])
        padded.append(F.pad(s, widths, value=padding_value) if extra else s)
    return stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of (L_i, *) tensors (longest first unless ``enforce_sorted=False``)."""
    return pack_padded_sequence(pad_sequence(sequences), [s.shape[0] for s in sequences], False, enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths: Any, batch_first: bool = False) -> list[Tensor]:
    """The inverse of :func:`pad_sequence`: each sequence cut to its length."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, : int(n)] for i, n in enumerate(_lengths(lengths))]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The inverse of :func:`pack_sequence`: the list of (L_i, *) tensors, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
