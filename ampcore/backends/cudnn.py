"""torch.backends.cudnn's flags: accepted, and without effect (ampcore uses no cuDNN; see :mod:`ampcore.backends`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..names import missing_names_getattr as _missing_names_getattr

__all__ = ["enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32", "is_available", "version"]

enabled = True
"""Accepted; no effect."""
benchmark = False
"""Accepted; no effect: there is no convolution-algorithm search to turn on."""
benchmark_limit = 10
"""Accepted; no effect."""
deterministic = False
"""Accepted; no effect: there is no cuDNN algorithm choice to restrict."""
allow_tf32 = True
"""Accepted; no effect on convolutions (float32 GEMMs follow ``backends.cuda.matmul.allow_tf32``)."""


def is_available() -> bool:
    """False: ampcore does not use cuDNN."""
    return False


def version() -> None:
    """None: no cuDNN is loaded."""
    return None


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
