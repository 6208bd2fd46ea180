"""torch.accelerator: the device a script should train on when it has one, in ampcore's terms.

The accelerator is the backend ampcore uses by default (``set_default_device``,
``AMPCORE_DEVICE``, else the highest-priority available backend) unless that
is ``cpu``: torch counts only non-CPU devices, and so does this.  So the
idiom ``device = torch.accelerator.current_accelerator().type if
torch.accelerator.is_available() else "cpu"`` picks opencl or cuda where
ampcore would, and ``cpu`` otherwise.  The other functions act on that
backend's device module (``ampcore.<name>``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import (
    TYPE_CHECKING,
    Any,
)

from .backend_modules import BackendModule, module_for
from .device import Device, device_of, parse_device
from .names import missing_names_getattr as _missing_names_getattr
from .plugins import get_default_device

__all__ = [
    "current_accelerator",
    "is_available",
    "device_count",
    "current_device_index",
    "current_device_idx",
    "set_device_index",
    "set_device_idx",
    "device_index",
    "synchronize",
    "empty_cache",
    "memory_allocated",
    "max_memory_allocated",
    "reset_peak_memory_stats",
]


def current_accelerator(check_available: bool = False) -> Device | None:
    """The accelerator's device type (``device('opencl')``), None when ampcore's default device is the CPU.

    ``check_available`` is accepted for torch code: the default device is always an available one.
    """
    default = get_default_device()
    return None if default.type == "cpu" else device_of(default.type)


def is_available() -> bool:
    """True when there is an accelerator (ampcore's default device is not the CPU)."""
    return current_accelerator() is not None


def _module() -> BackendModule:
    accelerator = current_accelerator()
    if accelerator is None:
        raise RuntimeError(
            "no accelerator: ampcore's default device is the CPU (check ampcore.accelerator.is_available() first, "
            "or choose a device with ampcore.set_default_device / AMPCORE_DEVICE)"
        )
    return module_for(accelerator.type)


def device_count() -> int:
    """How many devices the accelerator's backend has; 0 without an accelerator."""
    return _module().device_count() if is_available() else 0


def current_device_index() -> int:
    """The index ``"<accelerator>"`` without one means (see ``ampcore.<name>.set_device``)."""
    return _module().current_device()


def set_device_index(device: Any) -> None:
    """Make ``"<accelerator>"`` mean device ``device`` (an index, ``"name:N"`` or a Device)."""
    _module().set_device(device)


current_device_idx = current_device_index
set_device_idx = set_device_index


@contextlib.contextmanager
def device_index(device: int | None) -> Iterator[None]:
    """Within the block, the accelerator's current device is ``device`` (None: unchanged)."""
    if device is None:
        yield
        return
    previous = current_device_index()
    set_device_index(device)
    try:
        yield
    finally:
        set_device_index(previous)


def synchronize(device: Any = None) -> None:
    """Wait for the work queued on the accelerator's device (``device``: an index or name; None: current)."""
    _module().synchronize(None if device is None else _index(device))


def empty_cache() -> None:
    """Return the accelerator backend's cached free memory to the device."""
    _module().empty_cache()


def memory_allocated(device: Any = None) -> int:
    """Bytes the device's arrays hold now; 0 where the backend cannot tell."""
    return _module().memory_allocated(None if device is None else _index(device))


def max_memory_allocated(device: Any = None) -> int:
    """The most bytes held since the last reset; 0 where the backend cannot tell."""
    return _module().max_memory_allocated(None if device is None else _index(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    """Restart :func:`max_memory_allocated` from now."""
    _module().reset_peak_memory_stats(None if device is None else _index(device))


def _index(device: Any) -> int:
    return device if isinstance(device, int) else parse_device(device).index


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
