"""What a collective called with ``async_op=True`` returns: torch's ``Work`` handle, already complete.

ampcore's collectives finish before they return (MPI, host-staged), so
``wait()`` has nothing to wait for; the handle lets torch code that overlaps
communication run unchanged.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

__all__ = ["Work"]


class Work:
    """A finished collective: ``wait()`` returns True at once; ``result()`` is the tensors it wrote."""

    def __init__(self, result: Any = None) -> None:
        self._result = [] if result is None else (list(result) if isinstance(result, list) else [result])

    def wait(self, timeout: timedelta | None = None) -> bool:
        """Return True: the collective has finished."""
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def result(self) -> list[Any]:
        return self._result

    def __repr__(self) -> str:
        return "<ampcore.distributed.Work completed>"
