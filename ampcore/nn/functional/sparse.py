"""Embedding lookup, and one_hot (a declared op, :mod:`ampcore.ops.declare`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as dt
from ...dispatch import composite
from ...hooks import CAPTURE
from ...ops import elementwise as ew
from ...ops import take
from ...ops.declare import Example, Input
from ...ops.declare import composite as declared
from ...syncs import defer_check
from ...tensor import Tensor
from ._utils import check_tensor

__all__ = ["embedding", "one_hot"]


@composite("embedding")
def embedding(
    input: Tensor,  # noqa: A002 - torch's argument name
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` (num_embeddings, dim) picked by integer ``input`` of any shape -> input.shape + (dim,).

    The row ``padding_idx`` (negative counts from the end) receives no gradient.
    Raises TypeError for non-integer indices, ValueError for a bad weight or
    padding_idx, IndexError for an index outside [0, num_embeddings) (negative
    indices do not count from the end, as in torch), and NotImplementedError
    for ``max_norm``, ``scale_grad_by_freq`` and ``sparse``.
    """
    check_tensor(input, "input", "embedding")
    check_tensor(weight, "weight", "embedding")
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding(): max_norm, scale_grad_by_freq and sparse are not supported yet")
    if input.dtype not in (dt.int64, dt.int32):
        raise TypeError(f"embedding() needs int64 or int32 indices, got dtype {input.dtype.name}")
    if weight.ndim != 2:
        raise ValueError(f"embedding() needs a 2-D weight (num_embeddings, embedding_dim), got shape {weight.shape}")
    if CAPTURE.active:  # a compiled call (ampcore.compile) reads nothing on the host: the check waits on the device
        input = _deferred_index_check(input, weight.shape[0])  # noqa: A001
    else:
        _check_index_range(input, weight.shape[0])
    out = take(weight, input, 0)
    if padding_idx is None:
        return out
    pad = _padding_index(padding_idx, weight.shape[0])
    # Same values, but the padding rows take theirs from a detached copy, so no gradient reaches weight[pad].
    is_pad = (input == pad).unsqueeze(-1)
    return ew.where(is_pad, out.detach(), out)


def _check_index_range(input: Tensor, num: int) -> None:  # noqa: A002
    # One host read of the indices: take() would wrap a negative index to a wrong row without a word.
    idx = input.numpy()
    bad = idx[(idx < 0) | (idx >= num)]
    if bad.size:
        raise IndexError(
            f"embedding(): index {int(bad.flat[0])} is out of range for {num} embeddings (valid: 0..{num - 1})"
        )


def _deferred_index_check(input: Tensor, num: int) -> Tensor:  # noqa: A002
    """The indices with a device-side range check queued (raised at the next host read, as cross_entropy's
    class check), clamped so that an index out of range reads a real row until then."""
    clamped = input.clamp(0, num - 1)

    def error() -> IndexError:
        idx = input.numpy()
        first = idx[(idx < 0) | (idx >= num)].flat[0]
        return IndexError(
            f"embedding(): index {int(first)} is out of range for {num} embeddings (valid: 0..{num - 1}); found "
            "by a check on the device, raised at the next host read or optimizer step"
        )

    defer_check((clamped != input).sum() > 0, error)
    return clamped


def _padding_index(padding_idx: Any, num: int) -> int:
    if not isinstance(padding_idx, int) or not -num <= padding_idx < num:
        raise ValueError(f"embedding(): padding_idx {padding_idx!r} must be an int in [-{num}, {num})")
    return padding_idx % num


@declared(
    "one_hot",
    variants=(),
    torch_function="nn.functional.one_hot",
    differentiable=False,
    signature="one_hot(tensor, num_classes=-1) -> Tensor",
    example=Example((Input((2, 3), kind="int64", high=4),), {"num_classes": 5}, rule="exact"),
    reference=lambda x, num_classes: np.eye(num_classes, dtype=np.int64)[x],
)
def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """An int64 tensor of ``tensor.shape + (num_classes,)``, 1 at each index and 0 elsewhere
    (torch.nn.functional.one_hot); ``num_classes=-1`` makes it one more than the largest index.  Reads the
    indices on the host once to check them (ValueError names the first out of range)."""
    check_tensor(tensor, "tensor", "one_hot")
    if tensor.dtype not in (dt.int64, dt.int32):
        raise TypeError(f"one_hot() needs an int64 tensor of class indices, got {tensor.dtype.name}")
    values = tensor.numpy()
    high = int(values.max()) + 1 if values.size else 0
    classes = high if num_classes == -1 else int(num_classes)
    if values.size and (values.min() < 0 or high > classes):
        bad = int(values.min()) if values.min() < 0 else high - 1
        raise ValueError(f"one_hot(): class index {bad} is outside [0, {classes}) (num_classes={num_classes})")
    labels = tensor._new_tensor(np.arange(classes, dtype=np.int64), dt.int64)
    return ew.cast(ew.compare("eq", ew.cast(tensor, dt.int64).unsqueeze(-1), labels), dt.int64)
