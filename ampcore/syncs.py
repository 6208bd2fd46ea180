"""Host syncs: the one door device data takes to the host, counted, and input checks that wait for it.

A *host sync* is any read of device data by the host: ``Tensor.item()``,
``.numpy()``, ``bool(t)``, a move between devices.  On an asynchronous device
each one waits for every queued kernel, so a training step should have at
most one (the GradScaler's skip decision).  :func:`count_host_syncs` counts
them, by reason, so tests and benchmarks can hold that line.

Checks that need to look at values (a class index outside ``[0, C)``) would
each cost a sync.  Instead an op computes a 0-d flag on the device and
:func:`defer_check` queues it; the queue is read, all flags in one transfer,
just before the next host read on that device, before an optimizer step
(so a bad batch never updates anything), or together with the GradScaler's
found-inf flag.  The error then names the op and the bad value, as an
immediate check would, and says that it was deferred (torch's CUDA
device-side asserts work the same way).
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from .dtypes import float32
from .hooks import CAPTURE
from .kernels import KernelGate

if TYPE_CHECKING:
    from .tensor_base import TensorBase as Tensor

__all__ = [
    "HostSyncs",
    "count_host_syncs",
    "to_host",
    "defer_check",
    "run_deferred_checks",
    "pending_flag",
    "requeue_check",
    "pending_tensor_ids",
    "set_aside_pending",
    "put_back_pending",
    "read_with_checks",
    "MAX_PENDING_CHECKS",
]

MAX_PENDING_CHECKS = 64
"""Queued checks per device beyond which they are read at once (bounds memory when nothing reads)."""


@dataclass(eq=False)  # blocks are told apart by identity: two with equal counts are still two
class HostSyncs:
    """Host reads seen inside a :func:`count_host_syncs` block: the total and a count per reason."""

    count: int = 0
    by_reason: Counter = field(default_factory=Counter)

    def add(self, reason: str) -> None:
        self.count += 1
        self.by_reason[reason] += 1


@dataclass(frozen=True)
class _Check:
    flag: Tensor  # 0-d, true where the check failed
    error: Callable[[], Exception]  # builds the error on failure (it may read the inputs then)


class _State(threading.local):
    def __init__(self) -> None:
        self.counters: list[HostSyncs] = []
        self.pending: dict[Any, list[_Check]] = {}


_state = _State()


@contextlib.contextmanager
def count_host_syncs() -> Iterator[HostSyncs]:
    """Count this thread's host reads inside the block (blocks nest; each counts its own)."""
    counter = HostSyncs()
    _state.counters.append(counter)
    try:
        yield counter
    finally:
        _state.counters.remove(counter)


def to_host(t: Tensor, reason: str = "read", *, run_checks: bool = True) -> np.ndarray:
    """``t``'s data as a NumPy array: one host sync (after any queued checks on its device).

    ``run_checks=False`` leaves the queued checks for a later read: a
    collective staging gradients through the host does not need them, and the
    optimizer step reads them before it changes anything.
    """
    if run_checks and _state.pending.get(t.device):
        run_deferred_checks(t.device)
    return _read(t._backend, t._data, reason)


def _read(backend: Any, array: Any, reason: str) -> np.ndarray:
    recorder = CAPTURE.recorder
    if recorder is not None:  # a captured step being recorded: a replay could not give the host this value
        recorder.host_read(reason)
    for counter in _state.counters:
        counter.add(reason)
    return np.asarray(KernelGate.of(backend, reason).to_numpy(array))


def defer_check(flag: Tensor, error: Callable[[], Exception]) -> None:
    """Queue a device-side check: ``error()`` is raised at the next read if the 0-d ``flag`` is true."""
    recorder = CAPTURE.recorder
    if recorder is not None:  # a captured step being recorded queues it again on every replay
        recorder.check_queued(flag, error)
    queue = _state.pending.setdefault(flag.device, [])
    queue.append(_Check(flag, error))
    if len(queue) >= MAX_PENDING_CHECKS:
        run_deferred_checks(flag.device)


def set_aside_pending() -> dict[Any, list[_Check]]:
    """Take every queued check out of the queue (unread), to put back with :func:`put_back_pending`: a captured
    call's recording starts from an empty queue, as its replays' kernels do (they see only their own checks)."""
    saved = dict(_state.pending)
    _state.pending.clear()
    return saved


def put_back_pending(saved: dict[Any, list[_Check]]) -> None:
    """Put checks set aside by :func:`set_aside_pending` back, before any queued since."""
    for device, checks in saved.items():
        _state.pending[device] = checks + _state.pending.get(device, [])


def pending_tensor_ids() -> set[int]:
    """The ids of the tensors the queued checks hold (their flags, and the tensors their errors read)."""
    ids: set[int] = set()
    for checks in _state.pending.values():
        for c in checks:
            for one in (c.originals if isinstance(c, _Compacted) else ()) + (c,):
                ids.add(id(one.flag))
                for cell in getattr(one.error, "__closure__", None) or ():
                    try:
                        ids.add(id(cell.cell_contents))
                    except ValueError:  # an empty cell
                        continue
    return ids


def requeue_check(flag: Tensor, error: Callable[[], Exception]) -> None:
    """Queue a check a captured step's replay made again: merged into the last compacted entry of its device
    (one kernel, no read), as :func:`pending_flag` leaves the queue, so a replayed step reads nothing."""
    queue = _state.pending.setdefault(flag.device, [])
    last = queue[-1] if queue else None
    if isinstance(last, _Compacted) and len(last.originals) < MAX_PENDING_CHECKS:
        k = KernelGate.of(flag._backend, "deferred checks")
        total = k.add(last.flag._data, k.reshape(k.cast(flag._data, float32), (1,)))
        kept = (*last.originals, _Check(flag, error))
        queue[-1] = _Compacted(last.flag._wrap(total, flag.device, flag._backend), _first_failure(list(kept)), kept)
        return
    queue.append(_Check(flag, error))
    if len(queue) >= MAX_PENDING_CHECKS:
        run_deferred_checks(flag.device)


def run_deferred_checks(device: Any = None) -> None:
    """Read the queued checks of ``device`` (all devices for None) in one transfer each; raise the first failure."""
    devices = list(_state.pending) if device is None else [device]
    for d in devices:
        if _state.pending.get(d):
            read_with_checks(None, d)


def pending_flag(device: Any) -> Tensor | None:
    """The queued checks of ``device`` as one 1-element float32 flag on the device (nonzero if any failed),
    without reading them.  None if none are queued.

    They stay queued, compacted into one check whose error is the first
    failing one's (among the first :data:`MAX_PENDING_CHECKS` compacted), raised
    at the next read; so a fused optimizer step under a GradScaler skips on
    this flag (a bad batch updates nothing, nor does any later step until the
    read that raises the error) and the queue does not grow.
    """
    checks = _state.pending.get(device)
    if not checks:
        return None
    backend = checks[0].flag._backend
    k = KernelGate.of(backend, "deferred checks")
    total = None
    for c in checks:
        flag = k.reshape(k.cast(c.flag._data, float32), (1,))
        total = flag if total is None else k.add(total, flag)
    out = checks[0].flag._wrap(total, device, backend)
    kept = [o for c in checks for o in (c.originals if isinstance(c, _Compacted) else (c,))][:MAX_PENDING_CHECKS]
    _state.pending[device] = [_Compacted(out, _first_failure(kept), tuple(kept))]
    return out


@dataclass(frozen=True)
class _Compacted(_Check):
    originals: tuple[_Check, ...] = ()


def _first_failure(kept: list[_Check]) -> Callable[[], Exception]:
    def error() -> Exception:
        for c in kept:
            if bool(np.asarray(KernelGate.of(c.flag._backend, "deferred checks").to_numpy(c.flag._data)).any()):
                return c.error()
        return RuntimeError(
            f"an input check queued on the device failed, but more than {MAX_PENDING_CHECKS} checks were queued "
            "since the last read and only the first ones keep their details; read a value more often to see it"
        )

    return error


@overload
def read_with_checks(values: Tensor, device: Any = None, *, reason: str | None = None) -> np.ndarray: ...
@overload
def read_with_checks(values: None, device: Any = None, *, reason: str | None = None) -> None: ...
def read_with_checks(values: Tensor | None, device: Any = None, *, reason: str | None = None) -> np.ndarray | None:
    """Read the 1-D float32 ``values`` and the queued checks of its device in one transfer.

    Returns the values on the host (None if ``values`` is None); raises the
    first failed check's error, after clearing the queue.  Works on the
    backend's arrays directly, so no op is traced or autocast on the way.  ``reason`` labels the read for
    :func:`count_host_syncs` (default: "checks", or "values and checks").
    """
    device = values.device if values is not None else device
    checks = _state.pending.pop(device, [])
    if values is None and not checks:
        return None
    backend = values._backend if values is not None else checks[0].flag._backend
    k = KernelGate.of(backend, "deferred checks")
    arrays = ([values._data] if values is not None else []) + [
        k.reshape(k.cast(c.flag._data, float32), (1,)) for c in checks
    ]
    host = _read(
        backend,
        arrays[0] if len(arrays) == 1 else k.concat(arrays, 0),
        reason or ("checks" if values is None else "values and checks"),
    )
    n = 0 if values is None else values.shape[0]
    for check, failed in zip(checks, host[n:]):
        if failed:
            raise check.error()
    return host[:n] if values is not None else None
