"""Bounded waits: a rank stuck in a collective, or one that raised, takes the whole job down, named.

MPI collectives block until every rank joins.  If one rank raises (or exits,
or never calls the collective) the others would wait forever; fairscale#180
is such a deadlock.  Two guards turn that into a prompt, named failure:

- :func:`install_excepthook`: an uncaught exception on a rank prints its
  traceback under ``ampcore.distributed: rank R of N raised ...`` and calls
  ``MPI_Abort``, which makes ``mpiexec`` kill every rank (mpi4py's
  ``python -m mpi4py`` does the same).
- :class:`Watchdog`: a daemon thread that aborts the job when this rank has
  waited in one collective longer than the timeout (a rank that hangs or
  exits quietly), naming this rank, the collective and how long it waited.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Watchdog", "install_excepthook", "report_and_abort", "ABORT_EXIT_CODE", "ABORT_GRACE_SECONDS"]

ABORT_EXIT_CODE = 17
"""The status ``MPI_Abort`` is called with, so a launcher can tell an ampcore abort from other failures."""


class Watchdog:
    """Aborts the job (``abort(ABORT_EXIT_CODE)``) if one collective on this rank outlasts ``timeout`` seconds."""

    def __init__(self, rank: int, size: int, timeout: float, abort: Callable[[int], Any]) -> None:
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.rank, self.size, self.timeout = rank, size, float(timeout)
        self._abort = abort
        self._waiting: tuple[str, float] | None = None
        self._count = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def guard(self, name: str) -> Iterator[None]:
        """Mark this rank as waiting in collective ``name`` for the duration of the block."""
        self._start_thread()
        with self._lock:
            self._count += 1
            self._waiting = (f"{name} (collective #{self._count})", time.monotonic())
        try:
            yield
        finally:
            with self._lock:
                self._waiting = None

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="ampcore-distributed-watchdog", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        poll = min(1.0, self.timeout / 10)
        while True:
            time.sleep(poll)
            with self._lock:
                waiting = self._waiting
            if waiting is not None and time.monotonic() - waiting[1] > self.timeout:
                name, since = waiting
                report_and_abort(
                    f"ampcore.distributed: rank {self.rank} of {self.size} waited {time.monotonic() - since:.1f} s "
                    f"(timeout {self.timeout:g} s) in {name}: another rank failed, exited or never called it; "
                    "aborting every rank\n",
                    self._abort,
                )
                return


ABORT_GRACE_SECONDS = 1.0
"""How long a rank waits between writing why it aborts and ``MPI_Abort``.

``MPI_Abort`` makes mpiexec's proxy kill every rank and stop forwarding their
output at once; text still in the pipe is lost.  Seen on a loaded 2-core host:
a job aborted with status 17 and an empty stderr.  The wait lets the proxy
forward the message first.
"""


def report_and_abort(message: str, abort: Callable[[int], Any]) -> None:
    """Write ``message`` straight to file descriptor 2, give the launcher time to forward it, then abort."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    data = message.encode(errors="replace")
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(2, data) :]
    time.sleep(ABORT_GRACE_SECONDS)
    abort(ABORT_EXIT_CODE)


def install_excepthook(rank: int, size: int, abort: Callable[[int], Any]) -> None:
    """Make an uncaught exception on this rank abort every rank, with a message naming the rank."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if issubclass(kind, KeyboardInterrupt):
            previous(kind, value, tb)
            return
        text = "".join(traceback.format_exception(kind, value, tb))
        report_and_abort(
            f"ampcore.distributed: rank {rank} of {size} raised {kind.__name__}: {value}; aborting every rank\n{text}",
            abort,
        )

    sys.excepthook = hook
