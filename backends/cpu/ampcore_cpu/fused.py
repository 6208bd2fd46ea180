"""Fused kernels of the CPU backend (the optional tier of the contract)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def fused_table() -> dict[str, Callable[..., Any]]:
    """Every fused kernel this backend implements natively."""
    from .float8 import float8_table
    from .fused_nn import NN_KERNELS
    from .fused_optim import OPTIM_KERNELS
    from .pool import POOL_KERNELS

    return {**NN_KERNELS, **OPTIM_KERNELS, **POOL_KERNELS, **float8_table()}
