"""tril and triu: the lower or upper triangle of the last two dimensions, zeros elsewhere, with their in-place
forms (``mask.triu_(1)``); a ``where`` against a constant mask, differentiable."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as dt
from ..declare import Example, Input, composite
from ..elementwise import where

_VARIANTS = ("function", "method", "inplace")


def _triangle(name: str, x: Any, diagonal: int, lower: bool) -> Any:
    if x.ndim < 2:
        raise ValueError(f"{name}() needs a tensor with at least 2 dimensions, got shape {x.shape}")
    if not isinstance(diagonal, int) or isinstance(diagonal, bool):
        raise TypeError(f"{name}(): diagonal must be an int, got {diagonal!r}")
    rows, cols = x.shape[-2:]
    keep = np.tri(rows, cols, diagonal, dtype=bool) if lower else ~np.tri(rows, cols, diagonal - 1, dtype=bool)
    zero: Any = False if x.dtype is dt.bool_ else (0.0 if x.dtype.is_floating_point else 0)
    return where(x._new_tensor(keep, dt.bool_), x, zero)


@composite(
    "tril",
    variants=_VARIANTS,
    signature="tril(input, diagonal=0) -> Tensor",
    example=Example((Input((2, 4, 5)),), {"diagonal": 1}, rule="exact"),
    reference=lambda x, diagonal: np.tril(x, diagonal),
)
def tril(input: Any, diagonal: int = 0) -> Any:  # noqa: A002 - torch's argument name
    """torch.tril: the lower triangle of the last two dims (``j - i <= diagonal``), zeros above; differentiable."""
    return _triangle("tril", input, diagonal, lower=True)


@composite(
    "triu",
    variants=_VARIANTS,
    signature="triu(input, diagonal=0) -> Tensor",
    example=Example((Input((2, 4, 5)),), {"diagonal": -1}, rule="exact"),
    reference=lambda x, diagonal: np.triu(x, diagonal),
)
def triu(input: Any, diagonal: int = 0) -> Any:  # noqa: A002 - torch's argument name
    """torch.triu: the upper triangle of the last two dims (``j - i >= diagonal``), zeros below; differentiable."""
    return _triangle("triu", input, diagonal, lower=False)
