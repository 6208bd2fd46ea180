"""Distances: cdist (every pair of rows of two batches of row vectors) and dist (the p-norm of a difference).

Both are the ``p``-norm of differences, computed from the differences themselves (not torch's
``|x|^2 + |y|^2 - 2 x.y`` shortcut for large Euclidean inputs, which cancels), in float32 for 16-bit inputs and
rounded once, with a zero gradient where a distance is 0, as torch's.  torch's autocast lists run both in
float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes as dt
from ..declare import Domain, Example, Input, composite
from ..elementwise import binary, cast
from ..shape import reshape
from .reduce import vector_norm


def _opmath(x: Any) -> Any:
    return cast(x, dt.float32) if x.dtype in dt.LOW_PRECISION_DTYPES else x


def _magnitude(x: np.ndarray) -> np.ndarray:
    """|x| by the sign of the real part: complex-step safe (np.abs would drop the perturbation)."""
    return np.where(np.real(x) < 0, -x, x)


def _cdist_reference(x1: np.ndarray, x2: np.ndarray, p: float) -> np.ndarray:
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    return np.sqrt(np.sum(diff * diff, axis=-1)) if p == 2 else np.sum(_magnitude(diff) ** p, axis=-1) ** (1 / p)


@composite(
    "cdist",
    variants=("function",),
    signature="cdist(x1, x2, p=2.0, compute_mode='use_mm_for_euclid_dist_if_necessary') -> Tensor",
    example=Example((Input((2, 3, 4), Domain(-2, 2)), Input((2, 5, 4), Domain(-2, 2))), {"p": 2.0}, n=4, n_grad=(5, 3)),
    reference=_cdist_reference,
)
def cdist(x1: Any, x2: Any, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Any:
    """The ``p``-norm distance between each row of ``x1`` (..., P, M) and each row of ``x2`` (..., R, M): (..., P,
    R) (torch.cdist; batch dimensions broadcast).  ``compute_mode`` is accepted: every mode computes from the
    differences here."""
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist() needs (..., P, M) and (..., R, M) tensors, got shapes {x1.shape} and {x2.shape}")
    if p < 0:
        raise ValueError(f"cdist(): p must be non-negative, got {p}")
    a, b = _opmath(x1), _opmath(x2)
    diff = binary("sub", reshape(a, a.shape[:-1] + (1, a.shape[-1])), reshape(b, b.shape[:-2] + (1,) + b.shape[-2:]))
    return cast(vector_norm(diff, float(p), (diff.ndim - 1,), False), x1.dtype)


@composite(
    "dist",
    signature="dist(input, other, p=2) -> Tensor",
    example=Example((Input((3, 4), Domain(-2, 2)), Input((3, 4), Domain(-2, 2))), {"p": 3.0}, n=12),
    reference=lambda a, b, p: np.sum(_magnitude(a - b) ** p) ** (1 / p),
)
def dist(input: Any, other: Any, p: float = 2) -> Any:  # noqa: A002 - torch's argument name
    """The ``p``-norm of ``input - other`` over all elements (torch.dist; the operands broadcast)."""
    a, b = _opmath(input), _opmath(other)
    diff = binary("sub", a, b)
    return cast(vector_norm(diff, float(p), tuple(range(diff.ndim)), False), input.dtype)
