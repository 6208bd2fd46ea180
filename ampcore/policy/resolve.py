"""The policy autocast uses on a device type: built-in table -> plugins -> user registrations.

``get("cpu")`` starts from the built-in table the ``cpu`` backend names in its
capabilities, lays each plugin's ``ampcore_policy`` result over it (later
plugins win), then the categories users registered with :func:`register`.
Results are cached and rebuilt when plugins, backends or registrations change.
"""

from __future__ import annotations

import threading
from typing import Any

from ..ops import declare
from ..plugins import registry
from ..plugins.capabilities import capabilities_of
from .builtin import builtin
from .policy import Category, Policy

__all__ = ["get", "register", "unregister", "check_device_type", "DeviceTypeArgumentError"]

_lock = threading.Lock()
_user: dict[str | None, dict[str, Category]] = {}  # device type (None: all) -> op -> category
_user_generation = 0
_cache: dict[str, tuple[tuple[int, int, int], Policy]] = {}


class DeviceTypeArgumentError(TypeError, ValueError):
    """``device_type`` is not a string (a Device object, say): torch raises ValueError, ampcore raised TypeError;
    this is both, so callers written for either keep working."""


def check_device_type(device_type: Any) -> str:
    """``device_type`` if it is a backend name; DeviceTypeArgumentError (a TypeError and a ValueError) for a
    non-string, ValueError for ``"cuda:1"``, each saying what to pass."""
    if not isinstance(device_type, str):
        hint = (
            f" (pass device.type, {device_type.type!r})" if isinstance(getattr(device_type, "type", None), str) else ""
        )
        raise DeviceTypeArgumentError(
            f"device_type must be a backend name such as 'cpu' or 'cuda', got {device_type!r}{hint}"
        )
    if ":" in device_type:
        raise ValueError(
            f"autocast and cast policies are per device type: pass {device_type.split(':')[0]!r}, not {device_type!r}"
        )
    return device_type


def generation() -> tuple[int, int, int]:
    """Changes whenever what :func:`get` returns may change (plugins, backends, registered categories or a
    newly declared op's): a cache of anything derived from policies and capabilities keys on it."""
    return (registry.generation, _user_generation, declare.GENERATION[0])


def get(device_type: str) -> Policy:
    """The effective cast policy for ``device_type`` (a backend name such as ``"cpu"``).

    Raises UnknownBackendError (listing the installed ones) for an unknown
    name and BackendUnavailableError if that backend cannot run here.
    """
    check_device_type(device_type)
    backend = registry.get_backend(device_type)
    key = generation()
    cached = _cache.get(device_type)
    if cached is not None and cached[0] == key:
        return cached[1]
    table = capabilities_of(backend, 0).policy
    policy = builtin(table)
    for plugin_name, mapping in registry.policy_layers(device_type):
        try:
            policy = policy.layered(mapping, f"plugin {plugin_name}")
        except (TypeError, ValueError) as exc:
            with registry._lock:
                registry._record_broken(plugin_name, "ampcore_policy", exc)
    for scope in (None, device_type):
        layer = _user.get(scope)
        if layer:
            policy = policy.layered(layer, "user (ampcore.policy.register)")
    policy = Policy(device_type, policy.entries)
    _cache[device_type] = (key, policy)
    return policy


def register(op: str, category: Category | str, *, device_type: str | None = None) -> None:
    """Give ``op`` (e.g. a custom op's name) a category in every policy ``get()`` builds.

    ``device_type=None`` applies to every device type.  ``"unlisted"``
    removes the op from the lists.  Policies already handed out are immutable
    and keep their old decision; regions entered afterwards see the new one.
    """
    global _user_generation
    if not isinstance(op, str) or not op:
        raise TypeError(f"op must be a non-empty str, got {op!r}")
    parsed = Category.parse(category)
    if device_type is not None:
        check_device_type(device_type)
    with _lock:
        _user.setdefault(device_type, {})[op] = parsed
        _user_generation += 1


def unregister(op: str, *, device_type: str | None = None) -> None:
    """Forget a :func:`register` call (no error if there was none)."""
    global _user_generation
    with _lock:
        _user.get(device_type, {}).pop(op, None)
        _user_generation += 1
