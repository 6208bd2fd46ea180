"""Stream capture in the simulator: what ``Stream.begin_capture`` / ``end_capture`` record and ``Graph.launch``
replays, and what CUDA refuses while a stream captures.

A real capture runs nothing: kernels, cuBLAS(Lt) calls and copies become graph nodes that run at each launch.
The simulator must compute each operation to know its result's shape, so it runs them, records how to run them
again (writing into the same arrays: a graph's buffers are static), and at ``end_capture`` puts back every
array that existed before the capture, as the GPU would have left it, and fills every array allocated inside it
with 0xFF bytes (NaN), as a graph's buffers hold garbage until its first launch.

Refused inside a capture, with :class:`StreamCaptureError` naming the operation (CUDA:
``cudaErrorStreamCaptureUnsupported``, the capture invalidated): a synchronisation, a read of device data on
the host, a host-to-device copy from pageable memory (CuPy's ``asarray`` of host data), compiling or loading a
kernel, an allocation that is not from the capture's pool (``cupy.cuda.using_allocator(pool.malloc)``), an
operation the simulator cannot record (a NumPy call on device arrays outside the simulated CuPy), and CuPy's
cuBLAS wrapper (``NotImplementedError``, as CuPy raises).
"""

from __future__ import annotations

import contextlib
import ctypes
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = [
    "StreamCaptureError",
    "Recording",
    "active",
    "begin",
    "end",
    "refuse",
    "run",
    "on_allocate",
    "track",
    "current_pool",
    "using_allocator",
    "pinned",
    "is_pinned",
]

# Every device allocation's owner, for the snapshot a capture restores (weak: a freed array is gone).
_LIVE: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()
_allocators: list[Any] = []  # cupy.cuda.using_allocator's stack of pools (None: the default pool)
_pinned: dict[int, int] = {}  # pinned host allocations: address -> size
_active: Recording | None = None


class StreamCaptureError(RuntimeError):
    """An operation CUDA refuses while a stream captures (the capture is invalidated)."""


class Recording:
    """One capture in progress: its pool, the operations recorded so far, and what it must restore."""

    def __init__(self, pool: Any):
        self.pool = pool
        self.ops: list[Callable[[], None]] = []
        self.depth = 0
        self.allocated: list[weakref.ref] = []
        self.saved = [(weakref.ref(a), a.tobytes()) for a in list(_LIVE.values()) if a.nbytes]


def active() -> Recording | None:
    """The capture in progress, or None."""
    return _active


def begin(pool: Any) -> Recording:
    global _active
    if _active is not None:
        raise StreamCaptureError("a stream capture is already in progress (the simulator captures one at a time)")
    _active = Recording(pool)
    return _active


def end(recording: Recording) -> list[Callable[[], None]]:
    """Stop capturing: restore what existed before, poison what was allocated inside; the recorded operations."""
    global _active
    _active = None
    for ref, saved in recording.saved:
        array = ref()
        if array is not None:
            _bytes(array)[:] = np.frombuffer(saved, np.uint8)
    for ref in recording.allocated:
        array = ref()
        if array is not None:
            _bytes(array)[:] = 0xFF
    return recording.ops


def _bytes(array: np.ndarray) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * array.nbytes).from_address(array.__array_interface__["data"][0]))


def refuse(what: str) -> None:
    """StreamCaptureError naming ``what`` when a capture is in progress."""
    if _active is not None:
        raise StreamCaptureError(
            f"{what} inside a stream capture: CUDA refuses it (cudaErrorStreamCaptureUnsupported) and invalidates "
            "the capture; do it before begin_capture or after end_capture"
        )


def track(owner: np.ndarray) -> None:
    """Note a new device allocation (the snapshot a later capture restores)."""
    _LIVE[id(owner)] = owner


def on_allocate(owner: np.ndarray) -> None:
    """Check a device allocation made while capturing: inside a recorded operation, from the capture's pool."""
    recording = _active
    if recording is None:
        return
    if recording.depth == 0:
        raise StreamCaptureError(
            f"a {owner.nbytes}-byte device array was made by an operation the CUDA simulator cannot record "
            "inside a capture (a NumPy call on device arrays, not the simulated CuPy's): use cupy's functions"
        )
    if recording.pool is None or current_pool() is not recording.pool:
        raise StreamCaptureError(
            f"a {owner.nbytes}-byte allocation inside a stream capture is not from the capture's pool: its "
            "memory would go back to the default pool while the graph still writes it; begin the capture and "
            "allocate under cupy.cuda.using_allocator(pool.malloc) with a pool the graph keeps"
        )
    recording.allocated.append(weakref.ref(owner))


def current_pool() -> Any:
    return _allocators[-1] if _allocators else None


@contextlib.contextmanager
def using_allocator(pool: Any) -> Iterator[None]:
    _allocators.append(pool)
    try:
        yield
    finally:
        _allocators.pop()


def _root(value: Any) -> Any:
    while isinstance(value, np.ndarray) and value.base is not None and isinstance(value.base, np.ndarray):
        value = value.base
    return value


def _store(target: Any, value: Any) -> None:
    if isinstance(target, tuple):
        for t, v in zip(target, value):
            _store(t, v)
    elif isinstance(target, np.ndarray):
        np.copyto(target.view(np.ndarray), np.asarray(value).view(np.ndarray), casting="unsafe")


def _roots(values: Any) -> set[int]:
    found: set[int] = set()
    for v in values:
        if isinstance(v, np.ndarray):
            found.add(id(_root(v)))
        elif isinstance(v, (list, tuple)):
            found |= _roots(v)
    return found


def run(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], *, writes: bool = False, reads: tuple = ()) -> Any:
    """``fn(*args, **kwargs)``, recorded when a capture is in progress: a result that shares no memory with the
    arguments (a new array) is refreshed in place at each launch; a call that ``writes`` into its arguments
    runs again at each launch; ``reads``: arrays ``fn`` reads besides its arguments.  Calls made inside a
    recorded call are part of it."""
    recording = _active
    if recording is None or recording.depth:
        return fn(*args, **kwargs)
    inputs = _roots((getattr(fn, "__self__", None), *args, *kwargs.values(), *reads))
    recording.depth += 1
    try:
        result = fn(*args, **kwargs)
    finally:
        recording.depth -= 1
    parts = result if isinstance(result, tuple) else (result,)
    if any(id(_root(p)) not in inputs for p in parts if isinstance(p, np.ndarray)):
        recording.ops.append(lambda: _store(result, fn(*args, **kwargs)))
    elif writes:
        recording.ops.append(lambda: fn(*args, **kwargs))
    return result


def pinned(nbytes: int) -> np.ndarray:
    """Page-locked host memory (``cupy.cuda.alloc_pinned_memory``): a NumPy byte array, registered."""
    buffer = np.zeros(max(int(nbytes), 1), np.uint8)
    _pinned[buffer.ctypes.data] = buffer.nbytes
    weakref.finalize(buffer, _pinned.pop, buffer.ctypes.data, None)
    return buffer


def is_pinned(ptr: int, nbytes: int) -> bool:
    return any(start <= ptr and ptr + nbytes <= start + size for start, size in _pinned.items())
