"""clamp and its names: clamp (clip), clamp_min and clamp_max, each with its in-place form (``x.clamp_(0, 1)``).

``min(max(x, lo), hi)`` as two selections, so the gradient passes where ``lo <= x <= hi`` (the bounds included,
as torch's), NaN stays NaN, and ``lo > hi`` gives ``hi`` everywhere, as torch's.  A bound may be a number or a
tensor (broadcast, and differentiable where it is the result).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..declare import Domain, Example, Input, composite
from ..elementwise import compare, where

# Multiples of 1/4 offset by 1/8: never equal to the bounds below, so the gradient is checked where defined.
_NO_TIES = Domain(-2, 2, grid=0.25, offset=0.125)
_VARIANTS = ("function", "method", "inplace")


def _clamp(x: Any, lo: Any, hi: Any) -> Any:
    if lo is None and hi is None:
        raise ValueError("clamp() needs at least one of min and max")
    if lo is not None:
        x = where(compare("lt", x, lo), lo, x)
    if hi is not None:
        x = where(compare("gt", x, hi), hi, x)
    return x


@composite(
    "clamp",
    variants=_VARIANTS,
    signature="clamp(input, min=None, max=None) -> Tensor",
    example=Example((Input((4, 6), _NO_TIES),), {"min": -1.0, "max": 1.0}, rule="exact"),
    reference=lambda x, min, max: np.clip(x, min, max),  # noqa: A006 - torch's argument names
)
def clamp(input: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's names
    """``input`` limited to ``[min, max]`` (either may be None; numbers or tensors), as torch.clamp."""
    return _clamp(input, min, max)


@composite(
    "clip",
    variants=_VARIANTS,
    signature="clip(input, min=None, max=None) -> Tensor",
    example=Example((Input((4, 6), _NO_TIES),), {"min": -0.5, "max": 1.5}, rule="exact"),
    reference=lambda x, min, max: np.clip(x, min, max),  # noqa: A006 - torch's argument names
)
def clip(input: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's names
    """torch.clip: the same as clamp."""
    return _clamp(input, min, max)


@composite(
    "clamp_min",
    variants=_VARIANTS,
    signature="clamp_min(input, min) -> Tensor",
    example=Example((Input((4, 6), _NO_TIES),), {"min": 0.5}, rule="exact"),
    reference=lambda x, min: np.maximum(x, min),  # noqa: A006 - torch's argument name
)
def clamp_min(input: Any, min: Any) -> Any:  # noqa: A002 - torch's names
    """``input`` with everything below ``min`` raised to it (torch.clamp_min)."""
    return _clamp(input, min, None)


@composite(
    "clamp_max",
    variants=_VARIANTS,
    signature="clamp_max(input, max) -> Tensor",
    example=Example((Input((4, 6), _NO_TIES),), {"max": -0.5}, rule="exact"),
    reference=lambda x, max: np.minimum(x, max),  # noqa: A006 - torch's argument name
)
def clamp_max(input: Any, max: Any) -> Any:  # noqa: A002 - torch's names
    """``input`` with everything above ``max`` lowered to it (torch.clamp_max)."""
    return _clamp(input, None, max)
