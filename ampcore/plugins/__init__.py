"""Plugin system: hookspecs, entry-point loading and backend selection."""

from .hookspecs import hookimpl, hookspec
from .registry import (
    BrokenPlugin,
    PluginLoadError,
    UnknownBackendError,
    available_backends,
    best_device,
    broken_plugins,
    get_backend,
    get_default_device,
    get_num_threads,
    list_backends,
    register_backend,
    register_plugin,
    registry,
    resolve_device,
    set_default_device,
    set_num_threads,
    thread_info,
)

__all__ = [
    "hookimpl",
    "hookspec",
    "BrokenPlugin",
    "PluginLoadError",
    "UnknownBackendError",
    "available_backends",
    "best_device",
    "broken_plugins",
    "get_backend",
    "get_default_device",
    "get_num_threads",
    "list_backends",
    "register_backend",
    "register_plugin",
    "registry",
    "resolve_device",
    "set_default_device",
    "set_num_threads",
    "thread_info",
]
