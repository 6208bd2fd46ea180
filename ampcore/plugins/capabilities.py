"""The capability cache: what each device can store and compute, asked of its backend once per process."""

from __future__ import annotations

from typing import Any

from ..dtypes import FLOAT8_DTYPES, DType

__all__ = ["capabilities_of", "forget_capabilities", "check_storable"]

_caps_cache: dict[tuple[str, int], Any] = {}


def capabilities_of(backend: Any, index: int) -> Any:
    """Capabilities of one device, cached (they do not change while the process runs)."""
    key = (backend.name, index)
    caps = _caps_cache.get(key)
    if caps is None:
        caps = _caps_cache[key] = backend.capabilities(index)
    return caps


def forget_capabilities(backend_name: str) -> None:
    """Drop cached capabilities of a backend (when it is unregistered)."""
    for key in [k for k in _caps_cache if k[0] == backend_name]:
        del _caps_cache[key]


def check_storable(backend: Any, index: int, dtype: DType) -> None:
    """TypeError naming the dtype, device and what it can store, if ``dtype`` cannot live there."""
    caps = capabilities_of(backend, index)
    if dtype not in caps.storable:
        if dtype in FLOAT8_DTYPES:
            why = getattr(caps, "float8_reason", "") or "its backend does not claim float8 (Capabilities.float8)"
            raise TypeError(f"device '{backend.name}:{index}' cannot store {dtype.name} tensors: {why}")
        can = ", ".join(sorted(d.name for d in caps.storable))
        raise TypeError(f"device '{backend.name}:{index}' cannot store {dtype.name} tensors; it can store {can}")
