"""Suggestions for a mistyped name: one helper behind every "did you mean" in ampcore's errors.

Ops, cast-policy categories, dtypes, backends and the CLI's choices are all looked up by name; each
lookup that fails appends ``did_you_mean(name, choices)`` to its error, so ``'matmull'`` suggests
``'matmul'`` wherever it is typed.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["close_matches", "did_you_mean"]

CUTOFF = 0.6  # difflib's default similarity: 'matmull' ~ 'matmul', 'cpo' ~ 'cpu', 'xyz' ~ nothing


def close_matches(name: object, choices: Iterable[str], n: int = 2) -> list[str]:
    """Up to ``n`` of ``choices`` closest to ``name`` (case-insensitive, best first); [] for a non-string."""
    if not isinstance(name, str) or not name:
        return []
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    found = difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=CUTOFF)
    return [by_lower[match] for match in found if by_lower[match] != name]


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """``" (did you mean 'matmul'?)"`` for the closest of ``choices`` to ``name``, or ``""`` when none is close.

    Written to follow the bad name in a message: ``f"unknown op {name!r}{did_you_mean(name, ops)}; ..."``.
    """
    matches = close_matches(name, choices)
    if not matches:
        return ""
    return f" (did you mean {' or '.join(repr(m) for m in matches)}?)"
