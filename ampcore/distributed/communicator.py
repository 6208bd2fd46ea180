"""The one interface every collective goes through, and its MPI implementation (device data staged via the host).

Callers (:mod:`.collectives`, DDP, ZeRO, the GradScaler) only ever hold a
:class:`Communicator`.  :class:`MPICommunicator` copies a device array to the
host, runs the MPI collective on the NumPy buffer and copies the result back:
it works for every backend.  A backend with a device-side path (CUDA through
NCCL: ``ampcore_cuda.nccl``) registers a :class:`DevicePath` for its device
type with :meth:`MPICommunicator.set_device_path`; from then on that device's
arrays take it, and nothing that calls the communicator changes.

MPI has no bfloat16 and no float16 sum, so 16-bit floats are reduced in
float32 and rounded once to their dtype (more accurate than summing in 16
bits, as NCCL does); broadcast and all-gather move their raw bits.
"""

from __future__ import annotations

import abc
import pickle
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..syncs import to_host
from ..tensor import Tensor
from .watchdog import Watchdog

__all__ = ["Communicator", "MPICommunicator", "DevicePath", "CollectiveStats", "REDUCE_OPS"]

REDUCE_OPS = ("sum", "avg", "max", "min")
_MISSING = "<missing>"


@dataclass
class CollectiveStats:
    """What the collectives of one communicator moved and how long the caller waited in them.

    ``bytes`` is payload per rank (each array's size, not the wire traffic of
    the algorithm); ``bytes_by_op`` splits it by collective ("all_reduce",
    "all_gather", ...).
    """

    calls: int = 0
    bytes: int = 0
    seconds: float = 0.0
    bytes_by_op: dict[str, int] = field(default_factory=dict)

    def add(self, op: str, nbytes: int, seconds: float) -> None:
        self.calls += 1
        self.bytes += nbytes
        self.seconds += seconds
        self.bytes_by_op[op] = self.bytes_by_op.get(op, 0) + nbytes

    def reset(self) -> None:
        self.calls, self.bytes, self.seconds = 0, 0, 0.0
        self.bytes_by_op = {}


class DevicePath(abc.ABC):
    """Collectives on one backend's own device arrays, without the host (NCCL for CUDA).

    Every method gets the backend array and its ampcore dtype and returns new
    backend array(s); ``op`` is one of :data:`REDUCE_OPS`.
    """

    @abc.abstractmethod
    def all_reduce(self, array: Any, dtype: dt.DType, op: str) -> Any:
        """``op`` of ``array`` over every rank."""

    @abc.abstractmethod
    def broadcast(self, array: Any, dtype: dt.DType, src: int) -> Any:
        """Rank ``src``'s ``array``."""

    @abc.abstractmethod
    def all_gather(self, array: Any, dtype: dt.DType) -> list[Any]:
        """Every rank's ``array``, in rank order."""


class Communicator(abc.ABC):
    """Collectives among ``size`` ranks, on backend arrays and on small host values.

    Every rank must call the same collectives in the same order (MPI's rule).
    ``stats`` counts calls, payload bytes and seconds spent inside them.
    """

    rank: int
    size: int
    stats: CollectiveStats

    @abc.abstractmethod
    def all_reduce(self, t: Tensor, op: str) -> Tensor:
        """A new tensor: ``op`` ("sum", "avg", "max", "min") of ``t`` over every rank."""

    @abc.abstractmethod
    def broadcast(self, t: Tensor, src: int) -> Tensor:
        """A new tensor holding rank ``src``'s ``t`` (same shape and dtype on every rank)."""

    @abc.abstractmethod
    def all_gather(self, t: Tensor) -> list[Tensor]:
        """Every rank's ``t`` (same shape and dtype on every rank), in rank order."""

    @abc.abstractmethod
    def all_reduce_host(self, values: np.ndarray, op: str) -> np.ndarray:
        """``op`` of a small host array over every rank (the GradScaler's found-inf flag)."""

    @abc.abstractmethod
    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's picklable ``obj``, in rank order (configurations, checkpoints)."""

    @abc.abstractmethod
    def barrier(self) -> None:
        """Return once every rank has called it."""

    def check_consistent(self, what: str, settings: dict[str, Any]) -> None:
        """ValueError on every rank unless every rank passed equal ``settings`` (a collective).

        The message names the first differing key, the rank and both values,
        so a mismatched launch fails at wrap time instead of diverging later.
        """
        everyone = self.all_gather_object(settings)
        for rank, theirs in enumerate(everyone):
            if theirs == everyone[0]:
                continue
            keys = list(everyone[0]) + [k for k in theirs if k not in everyone[0]]
            key = next(k for k in keys if theirs.get(k, _MISSING) != everyone[0].get(k, _MISSING))
            raise ValueError(
                f"{what}: ranks disagree on {key!r}: rank 0 has {everyone[0].get(key, _MISSING)!r}, "
                f"rank {rank} has {theirs.get(key, _MISSING)!r}; every rank must use the same "
                "configuration"
            )


def _check_op(op: str) -> str:
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduce op {op!r}; use one of {', '.join(map(repr, REDUCE_OPS))}")
    return op


def _as_bits(a: np.ndarray) -> np.ndarray:
    """A view MPI can send: 16-bit floats (bfloat16 has no MPI type) and bools as unsigned integers."""
    if a.dtype.itemsize == 2 and a.dtype.kind not in "iu":
        return a.view(np.uint16)
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    return a


class MPICommunicator(Communicator):
    """Collectives over an mpi4py communicator; device arrays are staged through host memory.

    ``timeout`` seconds bound every collective: a rank that waits longer
    (another rank died, or never called it) aborts the whole job with a
    message naming itself and the collective, instead of hanging forever.
    """

    def __init__(self, comm: Any, timeout: float | None = None) -> None:
        from mpi4py import MPI

        self._mpi = MPI
        self._comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.stats = CollectiveStats()
        self._device_paths: dict[str, DevicePath] = {}
        self._watchdog = Watchdog(self.rank, self.size, timeout, comm.Abort) if timeout else None

    def _timed(self, name: str, nbytes: int, fn: Any, *args: Any) -> Any:
        start = time.perf_counter()
        if self._watchdog is not None:
            with self._watchdog.guard(name):
                out = fn(*args)
        else:
            out = fn(*args)
        self.stats.add(name, nbytes, time.perf_counter() - start)
        return out

    def _mpi_op(self, op: str) -> Any:
        return {"sum": self._mpi.SUM, "avg": self._mpi.SUM, "max": self._mpi.MAX, "min": self._mpi.MIN}[op]

    # ------------------------------------------------------------------ arrays (host-staged)
    def set_device_path(self, device_type: str, path: DevicePath | None) -> None:
        """Send collectives of ``device_type`` tensors through ``path`` (None: back to host staging)."""
        if path is None:
            self._device_paths.pop(device_type, None)
        elif not isinstance(path, DevicePath):
            raise TypeError(f"a device path must be an ampcore.distributed.DevicePath, got {type(path).__name__}")
        else:
            self._device_paths[device_type] = path

    def _on_device(self, name: str, t: Tensor, *args: Any) -> Any:
        """The device path's result for ``t`` (rewrapped as tensors), or None when ``t`` is host-staged."""
        path = self._device_paths.get(t.device.type)
        if path is None:
            return None
        out = self._timed(name, t.numel() * t.dtype.itemsize, getattr(path, name), t._data, t.dtype, *args)
        wrap = lambda a: Tensor._wrap(a, t.device, t._backend)  # noqa: E731 - local adapter
        return [wrap(a) for a in out] if isinstance(out, list) else wrap(out)

    def all_reduce(self, t: Tensor, op: str) -> Tensor:
        _check_op(op)
        if op == "avg" and not t.dtype.is_floating_point:
            raise TypeError(f"all_reduce(op='avg') needs a floating tensor, got {t.dtype.name}; use op='sum'")
        on_device = self._on_device("all_reduce", t, op)
        if on_device is not None:
            return on_device
        host = _staged(t)
        work = host.astype(np.float32) if t.dtype in (dt.float16, dt.bfloat16) else host
        self._timed("all_reduce", host.nbytes, self._comm.Allreduce, self._mpi.IN_PLACE, work, self._mpi_op(op))
        if op == "avg":
            work = work / np.asarray(self.size, dtype=work.dtype)
        return _unstaged(work, t)

    def broadcast(self, t: Tensor, src: int) -> Tensor:
        self._check_rank(src)
        on_device = self._on_device("broadcast", t, src)
        if on_device is not None:
            return on_device
        host = _staged(t)
        self._timed("broadcast", host.nbytes, self._comm.Bcast, _as_bits(host), src)
        return _unstaged(host, t)

    def all_gather(self, t: Tensor) -> list[Tensor]:
        on_device = self._on_device("all_gather", t)
        if on_device is not None:
            return on_device
        host = _staged(t)
        out = np.empty((self.size,) + host.shape, dtype=host.dtype)
        self._timed("all_gather", host.nbytes, self._comm.Allgather, _as_bits(host), _as_bits(out))
        return [_unstaged(out[r], t) for r in range(self.size)]

    # ------------------------------------------------------------------ host values
    def all_reduce_host(self, values: np.ndarray, op: str) -> np.ndarray:
        _check_op(op)
        work = np.ascontiguousarray(values).copy()
        self._timed("all_reduce", work.nbytes, self._comm.Allreduce, self._mpi.IN_PLACE, work, self._mpi_op(op))
        return work / self.size if op == "avg" else work

    def all_gather_object(self, obj: Any) -> list[Any]:
        size = len(pickle.dumps(obj))
        return self._timed("all_gather_object", size, self._comm.allgather, obj)

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Rank ``src``'s picklable ``obj`` on every rank (a checkpoint saved by rank 0)."""
        self._check_rank(src)
        return self._timed(
            "broadcast_object", len(pickle.dumps(obj)) if self.rank == src else 0, self._comm.bcast, obj, src
        )

    def barrier(self) -> None:
        self._timed("barrier", 0, self._comm.Barrier)

    def split(self, color: int) -> MPICommunicator:
        """A new communicator of the ranks that passed the same ``color`` (a collective; torch's ``new_group``).

        It keeps this one's timeout and device paths.
        """
        if isinstance(color, bool) or not isinstance(color, int) or color < 0:
            raise ValueError(f"color must be a non-negative integer, got {color!r}")
        timeout = self._watchdog.timeout if self._watchdog is not None else None
        sub = MPICommunicator(self._timed("split", 0, self._comm.Split, color, self.rank), timeout=timeout)
        sub._device_paths = dict(self._device_paths)
        return sub

    def _check_rank(self, rank: Any) -> None:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.size:
            raise ValueError(
                f"rank {rank!r} is not in this communicator of {self.size} rank(s); use 0..{self.size - 1}"
            )


def _staged(t: Tensor) -> np.ndarray:
    """A private, contiguous host copy of ``t`` (one host sync, counted as a "collective")."""
    return np.array(to_host(t, "collective", run_checks=False), copy=True, order="C")


def _unstaged(host: np.ndarray, like: Tensor) -> Tensor:
    """``host`` back on ``like``'s device, in ``like``'s dtype (16-bit floats rounded once)."""
    data = like._backend.from_numpy(np.ascontiguousarray(host), like.dtype, like.device.index)
    return Tensor._wrap(data, like.device, like._backend)
