"""torch.backends.mps: whether an ``mps`` backend plugin is installed and usable (none ships with ampcore)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..names import missing_names_getattr as _missing_names_getattr
from ..plugins.registry import PluginLoadError, UnknownBackendError, registry

__all__ = ["is_available", "is_built"]


def is_built() -> bool:
    """True when a backend plugin named ``"mps"`` is installed."""
    registry.ensure_loaded()
    return "mps" in registry.records


def is_available() -> bool:
    """True when an installed ``"mps"`` backend has a usable device; never raises."""
    try:
        registry.get_backend("mps")
    except (UnknownBackendError, PluginLoadError, RuntimeError):
        return False
    return True


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
