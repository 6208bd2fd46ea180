"""What the subcommands share: the user-error type, device checking, the parser class and the output console."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..backend import BackendUnavailableError
from ..device import Device
from ..names import did_you_mean
from ..plugins import PluginLoadError, UnknownBackendError, resolve_device

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["CommandError", "CommandParser", "HelpFormatter", "SuggestingParser", "checked_device", "console"]

PIPE_WIDTH = 10_000  # columns when output is not a terminal: far wider than any line or table the commands print


class CommandError(Exception):
    """A mistake in the command line or the environment, reported in one line without a traceback; the command
    exits with ``status`` (2 unless given)."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


def checked_device(name: str | None) -> Device:
    """``name`` resolved against the installed backends (None: the default device), or CommandError saying why."""
    try:
        return resolve_device(name)
    except (UnknownBackendError, BackendUnavailableError, PluginLoadError, ValueError, TypeError, RuntimeError) as exc:
        raise CommandError(str(exc)) from exc


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows an option's default once, where it says something: not for a flag (``--no-amp`` stores
    True, yet by default AMP is on), not for a None default, and not where the help already states the default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.nargs == 0 or action.default is None or "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class SuggestingParser(argparse.ArgumentParser):
    """An ArgumentParser whose "invalid choice" error suggests the closest choice (``--category lowr``: did you
    mean 'lower'?), with the same helper as every other name lookup in ampcore."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices:
            names = [str(choice) for choice in choices]
            listed = ", ".join(repr(name) for name in names)
            hint = did_you_mean(value, names)
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint}; choose from {listed}")


class CommandParser(SuggestingParser):
    """The parser of one subcommand: help through :class:`HelpFormatter`, and an unknown option reported with
    this subcommand's usage (argparse leaves it to the top-level parser, which prints ``ampcore``'s)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    # namespace and the result are Any: argparse's stubs overload them (None gives a Namespace, an object gives that
    # same object back), and one override has to accept every overload.
    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        """As argparse's, but an argument this subcommand does not know exits with status 2 and its usage."""
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def console(stderr: bool = False) -> Console:
    """A rich Console on stdout (or stderr): on a terminal it wraps at the terminal's width; into a file or a
    pipe nothing is wrapped or cut short, so each line and table row stays whole for grep and the like."""
    from rich.console import Console

    out = Console(highlight=False, stderr=stderr)
    if not out.is_terminal:
        out.width = PIPE_WIDTH
    return out
