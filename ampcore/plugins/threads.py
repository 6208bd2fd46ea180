"""How many host threads ampcore's backends use: one setting, and where it came from.

The setting, in order of precedence:

1. ``ampcore.set_num_threads(n)`` in this process;
2. ``AMPCORE_NUM_THREADS``;
3. the variables BLAS and OpenMP libraries read themselves (``OMP_NUM_THREADS``,
   ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``), so a user who set one gets
   what they asked for;
4. the CPUs this process may use (``len(os.sched_getaffinity(0))``), as torch does.

This module holds the setting only; the registry hands it to each backend
(``Backend.set_num_threads``) when the backend loads and whenever it changes,
and each backend applies it to its own libraries (the cpu backend: BLAS
through threadpoolctl, and numba).  The core imports no thread library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ENV", "INHERITED", "ThreadSetting", "available_cpus", "current", "describe", "request", "validate"]

ENV = "AMPCORE_NUM_THREADS"
INHERITED = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_requested: int | None = None


@dataclass(frozen=True)
class ThreadSetting:
    """``n`` host threads per backend library, and ``source``: what decided it, in words."""

    n: int
    source: str


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), or ``os.cpu_count()`` where there is no mask."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS and Windows have no sched_getaffinity
        return max(1, os.cpu_count() or 1)


def validate(n: object) -> int:
    """``n`` as a thread count; ValueError naming it unless it is a positive integer."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of threads must be a positive integer, got {n!r}")
    return n


def _from_environment(environ: Mapping[str, str]) -> ThreadSetting | None:
    for name in (ENV, *INHERITED):
        raw = environ.get(name, "").strip()
        if not raw:
            continue
        try:
            return ThreadSetting(validate(int(raw)), name)
        except ValueError:
            raise ValueError(
                f"{name}={environ[name]!r} is not a positive integer; set it to a number of threads such as 2, "
                f"or unset it for the CPUs this process may use ({available_cpus()})"
            ) from None
    return None


def current(environ: Mapping[str, str] | None = None) -> ThreadSetting:
    """The setting now (see the module's docstring for the order); ValueError for a malformed variable."""
    if _requested is not None and environ is None:
        return ThreadSetting(_requested, "ampcore.set_num_threads")
    found = _from_environment(os.environ if environ is None else environ)
    return found if found is not None else ThreadSetting(available_cpus(), "the CPUs this process may use")


def request(n: int | None) -> None:
    """Record ``ampcore.set_num_threads(n)`` (None: back to the environment's or the default)."""
    global _requested
    _requested = None if n is None else validate(n)


def describe(info: Mapping[str, Any]) -> str:
    """``registry.thread_info()``'s dict as one line: ``threads 2 (the CPUs this process may use): cpu blas 2,
    numba 2`` (``ampcore info`` and ``ampcore bench`` print it); an ``error`` entry is printed instead."""
    if info.get("error"):
        return f"threads: {info['error']}"
    libs = "; ".join(
        f"{name} " + ", ".join(f"{lib} {n}" for lib, n in counts.items()) for name, counts in info["backends"].items()
    )
    return f"threads {info['num_threads']} ({info['source']})" + (f": {libs}" if libs else "")
