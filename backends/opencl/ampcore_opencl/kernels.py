"""The opencl backend's kernel table: every primitive and the fused kernels, from the kernel-family modules."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

FAMILIES = ("elementwise", "movement", "reductions", "softmax", "gemm", "amp", "optim", "float8")


def kernel_table() -> dict[str, Callable[..., Any]]:
    """Every kernel of every family module, keyed by its contract name."""
    table: dict[str, Callable[..., Any]] = {}
    for family in FAMILIES:
        table.update(importlib.import_module(f"{__package__}.{family}").kernels())
    return table
