"""Device names: ``"cpu"``, ``"opencl:0"``, ``"cuda:1"``.

A device is a backend name plus an index.  The backend name is the entry-point
name the backend was registered under; it is also the device type autocast is
keyed by.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

__all__ = ["Device", "DeviceLike", "parse_device", "device_of"]

_DEVICE_RE = re.compile(r"^(?P<type>[A-Za-z_][A-Za-z0-9_\-]*)(?::(?P<index>\d+))?$")


@dataclass(frozen=True)
class Device:
    """A backend (``type``) and which of its devices (``index``)."""

    type: str
    index: int = 0
    explicit_index: bool = field(default=False, compare=False, hash=False)

    def __str__(self) -> str:
        return f"{self.type}:{self.index}" if (self.explicit_index or self.index) else self.type

    def __repr__(self) -> str:
        return f"device({str(self)!r})"


DeviceLike = str | Device


def parse_device(value: DeviceLike) -> Device:
    """Parse ``"name"`` or ``"name:N"`` into a Device (no check that the backend exists).

    Raises TypeError for a non-string and ValueError for a malformed string.
    """
    if isinstance(value, Device):
        return value
    if not isinstance(value, str):
        raise TypeError(f"device must be a string like 'cpu' or 'cuda:0', got {value!r}")
    match = _DEVICE_RE.match(value.strip())
    if match is None:
        raise ValueError(f"malformed device {value!r}; expected 'name' or 'name:index', e.g. 'cpu' or 'opencl:0'")
    index = match.group("index")
    return device_of(match.group("type"), int(index) if index is not None else 0, index is not None)


@functools.lru_cache(maxsize=256)
def device_of(type: str, index: int = 0, explicit_index: bool = False) -> Device:  # noqa: A002 - Device's field
    """The one shared Device for these fields: tensors made on ``"cpu"`` then hold the same object, and the op
    path's device check (``a.device is b.device``) succeeds without the dataclass's ``__eq__``."""
    return Device(type, index, explicit_index)
