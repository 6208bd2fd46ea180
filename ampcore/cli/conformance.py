"""``ampcore conformance``: run the shared conformance suite on one backend and print (or save) its report.

A thin front for ``pytest --pyargs ampcore.conformance --ampcore-backend NAME``
that checks the backend first (so an unknown or unavailable one is a one-line
error, not a run of skips) and runs with the suite's own pytest settings,
whatever configuration the current directory has.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import CommandError, checked_device

__all__ = ["add_parser", "run", "pytest_args"]

# pytest options for --report summary and none: a failure is one line in the short summary, not a traceback,
# and warnings are not listed (a broken backend fails hundreds of checks; full shows it all).
BRIEF = ["--tb=no", "-rfE", "--disable-warnings"]


def add_parser(subparsers: Any) -> None:
    """Add ``conformance`` to the ``ampcore`` subcommands."""
    parser = subparsers.add_parser(
        "conformance",
        help="check a backend against the shared conformance suite",
        description="Run the conformance suite on a backend: every kernel and op against a float64 reference, "
        "rounding and storage honesty, autocast routing, the AMP kernels and a short training run. "
        "Prints an op x dtype report; exit status 0 when the backend conforms. Arguments after "
        "'--' go to pytest (e.g. -- -x -k rounding).",
    )
    parser.add_argument("--backend", required=True, metavar="NAME[:N]", help="backend (device) to check, e.g. cpu")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH")
    parser.add_argument(
        "--known-gaps", metavar="PATH", help="TOML file of known gaps (default: the file the backend ships, if any)"
    )
    parser.add_argument(
        "--report",
        choices=("full", "summary", "none"),
        default="full",
        help="the op x dtype table and every failure's traceback (full), or a one-line verdict "
        "(summary) or no report (none) with one line per failing check",
    )
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def pytest_args(args: argparse.Namespace) -> list[str]:
    """The pytest command line that runs the suite as ``args`` ask."""
    here = Path(__file__).resolve().parent.parent / "conformance"
    argv = [
        "-c",
        str(here / "pytest.ini"),
        "--rootdir",
        str(here),
        "-q",
        "--pyargs",
        "ampcore.conformance",
        "--ampcore-backend",
        args.backend,
        "--ampcore-report",
        args.report,
    ]
    if args.json:
        argv += ["--ampcore-json", args.json]
    if args.known_gaps:
        argv += ["--ampcore-known-gaps", args.known_gaps]
    if args.report != "full":
        argv += BRIEF
    extra = list(args.pytest_args)
    return argv + (extra[1:] if extra[:1] == ["--"] else extra)


def run(args: argparse.Namespace) -> int:
    """Run the suite; pytest's exit status (0: conforms, 1: a check failed); CommandError for a bad backend."""
    checked_device(args.backend)
    if args.known_gaps and not Path(args.known_gaps).is_file():
        raise CommandError(f"known-gaps file {args.known_gaps!r} does not exist")
    try:
        import pytest
    except ImportError as exc:
        raise CommandError("the conformance suite runs on pytest, a dependency of ampcore: pip install pytest") from exc
    return int(pytest.main(pytest_args(args)))
