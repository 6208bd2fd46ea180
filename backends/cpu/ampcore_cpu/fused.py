"""Fused kernels of the CPU backend (optional tier of the contract)."""

from __future__ import annotations

from typing import Any, Callable


def fused_table() -> dict[str, Callable[..., Any]]:
    return {}
