"""The ``ampcore`` command: ``ampcore info``, ``policy``, ``train``, ``bench`` and ``conformance``.

Each subcommand lives in its own module with ``add_parser(subparsers)`` and
``run(args) -> int``.  A :class:`CommandError` (bad device, unsupported
option) is printed as one line on stderr with its exit status (2 unless it
says otherwise), no traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from .common import CommandError, CommandParser, SuggestingParser

__all__ = ["main", "CommandError"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    from . import bench, conformance, info, policy, train

    parser = SuggestingParser(prog="ampcore", description="Mixed-precision training on any backend.")
    parser.add_argument("--version", action="version", version=f"ampcore {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for module in (info, policy, train, bench, conformance):
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ampcore`` command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # to rerun the same command on MPI ranks
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args) or 0)
    except CommandError as exc:
        print(f"ampcore {args.command}: error: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print(f"ampcore {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into a command that stopped reading (| head): not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
