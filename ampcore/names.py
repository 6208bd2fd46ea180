"""Suggestions for a mistyped name: one helper behind every "did you mean" in ampcore's errors.

Ops, cast-policy categories, dtypes, backends and the CLI's choices are all looked up by name; each
lookup that fails appends ``did_you_mean(name, choices)`` to its error, so ``'matmull'`` suggests
``'matmul'`` wherever it is typed.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import NoReturn

__all__ = ["close_matches", "did_you_mean", "PORTING_GUIDE", "missing_torch_name", "missing_names_getattr"]

PORTING_GUIDE = "docs/porting-from-torch.md"
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


def missing_torch_name(module: str, name: str, choices: Iterable[str] = ()) -> AttributeError:
    """The error for a name torch has and ampcore lacks: ``ampcore.kron`` names ``torch.kron`` and the guide.

    ``module`` is the ampcore module asked (``"ampcore.nn"``); ``choices`` its names, for a suggestion.  A
    dunder name gets Python's plain message (copy, pickle and inspect probe for those).
    """
    if name.startswith("__") and name.endswith("__"):
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    torch_name = "torch" + module[len("ampcore") :] + "." + name if module.startswith("ampcore") else name
    return AttributeError(
        f"module {module!r} has no attribute {name!r}{did_you_mean(name, choices)}: ampcore does not have "
        f"{torch_name} yet; {PORTING_GUIDE} lists what torch code may need and what to use instead"
    )


def missing_names_getattr(module: str, names: Iterable[str]) -> Callable[[str], NoReturn]:
    """A module-level ``__getattr__`` for ``module`` whose every miss is :func:`missing_torch_name`'s error.

    Modules that mirror torch's install it under ``if not TYPE_CHECKING:``, so mypy still reports a wrong name.
    """
    choices = tuple(names)

    def __getattr__(name: str) -> NoReturn:  # noqa: N807 - the module hook's own name
        raise missing_torch_name(module, name, choices)

    return __getattr__
