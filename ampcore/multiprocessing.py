"""torch.multiprocessing's names: Python's :mod:`multiprocessing`, plus :func:`spawn`.

``spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn")``
runs ``fn(i, *args)`` in ``nprocs`` new processes, as torch's does, and
raises :class:`ProcessRaisedException` (with the child's traceback) when one
raises, after stopping the others.  It starts plain processes: a
``DistributedDataParallel`` script should start its ranks with ``mpiexec`` (or
``python -m ampcore.distributed.run``), because ampcore's process group is an
MPI job; ``init_process_group`` in a spawned process says so.
"""

from __future__ import annotations

import multiprocessing as _mp
import traceback
from collections.abc import Callable
from multiprocessing import (
    Array,
    Barrier,
    Event,
    Lock,
    Manager,
    Pipe,
    Pool,
    Process,
    Queue,
    SimpleQueue,
    Value,
    cpu_count,
    current_process,
    get_all_start_methods,
    get_context,
    get_start_method,
    set_start_method,
)
from typing import Any

__all__ = [
    "spawn",
    "start_processes",
    "ProcessContext",
    "ProcessRaisedException",
    "ProcessExitedException",
    "Process",
    "Queue",
    "SimpleQueue",
    "Pool",
    "Manager",
    "Event",
    "Lock",
    "Barrier",
    "Pipe",
    "Value",
    "Array",
    "cpu_count",
    "current_process",
    "get_context",
    "get_start_method",
    "set_start_method",
    "get_all_start_methods",
]


class ProcessRaisedException(Exception):  # noqa: N818 - torch's name
    """A spawned process raised; the message carries its traceback."""

    def __init__(self, msg: str, error_index: int, error_pid: int | None) -> None:
        super().__init__(msg)
        self.error_index, self.pid = error_index, error_pid


class ProcessExitedException(Exception):  # noqa: N818 - torch's name
    """A spawned process exited with a non-zero status (or was killed) without raising."""

    def __init__(self, msg: str, error_index: int, error_pid: int | None, exit_code: int | None) -> None:
        super().__init__(msg)
        self.error_index, self.pid, self.exit_code = error_index, error_pid, exit_code


def _run(fn: Callable[..., Any], index: int, args: tuple[Any, ...], errors: Any) -> None:
    try:
        fn(index, *args)
    except KeyboardInterrupt:
        pass  # the parent is stopping the processes
    except Exception:  # noqa: BLE001 - sent to the parent, which raises it as ProcessRaisedException
        errors.put((index, traceback.format_exc()))
        raise SystemExit(1) from None


class ProcessContext:
    """The processes :func:`start_processes` started; :meth:`join` waits for them and raises a child's error."""

    def __init__(self, processes: list[Any], errors: Any) -> None:
        self.processes = processes
        self.errors = errors

    def pids(self) -> list[int | None]:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every process (up to ``timeout`` seconds each); True when all have finished.

        The first failure stops the others and raises: ProcessRaisedException naming the process and carrying
        its traceback, or ProcessExitedException for a non-zero exit without one.
        """
        for p in self.processes:
            p.join(timeout)
            if p.exitcode not in (None, 0):
                self._fail(self.processes.index(p), p)
        return all(p.exitcode is not None for p in self.processes)

    def _fail(self, index: int, process: Any) -> None:
        for other in self.processes:
            if other.is_alive():
                other.terminate()
        for other in self.processes:
            other.join()
        if not self.errors.empty():
            failed, trace = self.errors.get()
            pid = self.processes[failed].pid
            raise ProcessRaisedException(
                f"\n\n-- Process {failed} terminated with the following error:\n{trace}", failed, pid
            )
        raise ProcessExitedException(
            f"process {index} terminated with exit code {process.exitcode}", index, process.pid, process.exitcode
        )


def start_processes(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    nprocs: int = 1,
    join: bool = True,
    daemon: bool = False,
    start_method: str = "spawn",
) -> ProcessContext | None:
    """Run ``fn(i, *args)`` for i in 0..nprocs-1, each in a new process of ``start_method``."""
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs must be a positive int, got {nprocs!r}")
    context: Any = _mp.get_context(start_method)
    errors = context.SimpleQueue()
    processes = []
    for i in range(nprocs):
        process = context.Process(target=_run, args=(fn, i, tuple(args), errors), daemon=daemon)
        process.start()
        processes.append(process)
    spawned = ProcessContext(processes, errors)
    if not join:
        return spawned
    spawned.join()
    return None


def spawn(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    nprocs: int = 1,
    join: bool = True,
    daemon: bool = False,
    start_method: str = "spawn",
) -> ProcessContext | None:
    """torch.multiprocessing.spawn: :func:`start_processes` with the ``spawn`` start method by default."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
