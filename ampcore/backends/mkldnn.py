"""torch.backends.mkldnn: ampcore does not use oneDNN; the flag is accepted and changes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..names import missing_names_getattr as _missing_names_getattr

__all__ = ["enabled", "is_available"]

enabled = True
"""Accepted; no effect."""


def is_available() -> bool:
    """False: ampcore does not use oneDNN (the cpu backend's GEMMs are NumPy's BLAS or oneMKL's)."""
    return False


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
