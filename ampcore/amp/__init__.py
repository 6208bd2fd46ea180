"""Automatic mixed precision: autocast regions, their routing of ops, traces, and custom-op support.

The cast policy (which op runs in which dtype) lives in :mod:`ampcore.policy`;
this package applies it per thread while a region is open.  ``GradScaler``
(loss scaling for float16) is here too, as ``torch.amp.GradScaler`` is.
"""

from typing import TYPE_CHECKING

from .. import dispatch as _dispatch
from ..names import missing_names_getattr as _missing_names_getattr
from ..policy.dtype_policy import set_autocast as _set_policy_autocast
from .autocast_mode import (
    UnknownDeviceTypeError,
    autocast,
    clear_autocast_cache,
    explain,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
)
from .custom import custom_bwd, custom_fwd, op
from .decision import Decision, decide
from .grad_scaler import GradScaler, OptState
from .overflow import OverflowRecord, detect_overflow
from .overflow import check as _overflow_check
from .routing import AutocastError, autocast_hook
from .trace import Trace, TraceRecord

_dispatch.set_autocast_hook(autocast_hook)
_dispatch.set_overflow_hook(_overflow_check)
_set_policy_autocast(autocast)

__all__ = [
    "autocast",
    "is_autocast_enabled",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_cache_enabled",
    "clear_autocast_cache",
    "explain",
    "custom_fwd",
    "custom_bwd",
    "op",
    "Decision",
    "decide",
    "AutocastError",
    "Trace",
    "TraceRecord",
    "GradScaler",
    "OptState",
    "detect_overflow",
    "OverflowRecord",
    "UnknownDeviceTypeError",
]


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
