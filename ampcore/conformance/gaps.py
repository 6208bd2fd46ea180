"""Known gaps: checks a backend is known to fail, each with the reason, read from a TOML file.

A backend ships the file and returns its path from
:meth:`ampcore.Backend.conformance_known_gaps` (or the user passes
``--known-gaps``).  Each ``[[gap]]`` names a ``check`` (the report's section,
e.g. ``"kernels"``), optionally an ``op`` and a ``dtype`` (absent: any), and
a ``reason``; ``backend`` optionally restricts it to one backend::

    [[gap]]
    check = "kernels"
    op = "erf"
    dtype = "bfloat16"
    reason = "erf uses a 5-term polynomial: 3 ulp in bfloat16; tracked in #12"

Matching checks are expected to fail (reported "xfail"); one that passes is
reported "stale" and fails the run, so the file cannot quietly outlive the bug.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

__all__ = ["KnownGap", "KnownGapsError", "load_known_gaps"]

_KEYS = {"check", "op", "dtype", "reason", "backend"}


class KnownGapsError(ValueError):
    """A known-gaps file that cannot be read or has a malformed entry."""


@dataclass(frozen=True)
class KnownGap:
    """One expected failure: which checks it covers and why."""

    check: str
    reason: str
    op: str | None = None
    dtype: str | None = None
    backend: str | None = None
    source: str = ""

    def matches(self, backend: str, check: str, op: str, dtype: str) -> bool:
        return (
            self.check == check
            and self.op in (None, op)
            and self.dtype in (None, dtype)
            and self.backend in (None, backend)
        )

    def describe(self) -> str:
        parts = [self.check, self.op or "*", self.dtype or "*"]
        return "/".join(parts) + (f" on {self.backend}" if self.backend else "")


def load_known_gaps(path: str | PathLike[str]) -> list[KnownGap]:
    """The gaps in the TOML file at ``path``; KnownGapsError names the file and the bad entry."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise KnownGapsError(f"cannot read known-gaps file {str(path)!r}: {exc}") from exc
    unknown_tables = set(data) - {"gap"}
    if unknown_tables:
        raise KnownGapsError(
            f"known-gaps file {str(path)!r} has unknown tables {sorted(unknown_tables)}; "
            "write each gap as a [[gap]] table"
        )
    gaps = []
    for n, entry in enumerate(data.get("gap", []), start=1):
        where = f"gap {n} of {str(path)!r}"
        unknown = set(entry) - _KEYS
        if unknown:
            raise KnownGapsError(f"{where} has unknown keys {sorted(unknown)}; allowed keys are {sorted(_KEYS)}")
        for key in ("check", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise KnownGapsError(f"{where} needs a non-empty string {key!r}, got {entry.get(key)!r}")
        for key in ("op", "dtype", "backend"):
            if key in entry and not isinstance(entry[key], str):
                raise KnownGapsError(f"{where}: {key!r} must be a string, got {entry[key]!r}")
        gaps.append(
            KnownGap(
                entry["check"], entry["reason"], entry.get("op"), entry.get("dtype"), entry.get("backend"), str(path)
            )
        )
    return gaps
