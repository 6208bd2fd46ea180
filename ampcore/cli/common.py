"""What the subcommands share: the user-error type and device checking."""

from __future__ import annotations

from ..backend import BackendUnavailableError
from ..device import Device
from ..plugins import PluginLoadError, UnknownBackendError, resolve_device

__all__ = ["CommandError", "checked_device"]


class CommandError(Exception):
    """A mistake in the command line or the environment, reported in one line without a traceback."""


def checked_device(name: str | None) -> Device:
    """``name`` resolved against the installed backends (None: the default device), or CommandError saying why."""
    try:
        return resolve_device(name)
    except (UnknownBackendError, BackendUnavailableError, PluginLoadError, ValueError, TypeError, RuntimeError) as exc:
        raise CommandError(str(exc)) from exc
