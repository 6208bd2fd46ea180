"""The cuda backend's kernel table: every kernel of the family modules, keyed by its contract name.

Importing a family imports no CuPy; each kernel imports it when first called.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

FAMILIES = ("elementwise", "reductions", "movement", "gemm", "amp", "softmax", "gelu", "optim", "float8")


def kernel_table() -> dict[str, Callable[..., Any]]:
    """Every kernel of every family module, keyed by its contract name."""
    table: dict[str, Callable[..., Any]] = {}
    for family in FAMILIES:
        table.update(importlib.import_module(f"{__package__}.{family}").kernels())
    return table
