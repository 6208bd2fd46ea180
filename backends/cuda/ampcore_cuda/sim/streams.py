"""``cupy.cuda.Stream``, ``cupy.cuda.Graph``, pinned memory and ``using_allocator`` of the simulator.

Kernels run when launched (nothing is asynchronous), so a stream only orders what it captures: between
``begin_capture`` and ``end_capture`` every operation is recorded (:mod:`.capture`), and ``Graph.launch``
runs the recording again.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from . import capture

__all__ = ["Stream", "Graph", "PinnedMemoryPointer", "alloc_pinned_memory", "using_allocator", "memcpy_async"]

_ids = itertools.count(1)
_local = threading.local()
MEMCPY_HOST_TO_DEVICE = 1


def _stack() -> list[Stream]:
    if not hasattr(_local, "streams"):
        _local.streams = []
    return _local.streams


class Stream:
    """``cupy.cuda.Stream(null=False, non_blocking=False)``: a context manager making it current."""

    def __init__(self, null: bool = False, non_blocking: bool = False, ptds: bool = False):
        self.ptr = 0 if null else next(_ids) * 0x1000
        self._capture: capture.Recording | None = None

    def __enter__(self) -> Stream:
        _stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _stack().pop()

    def use(self) -> Stream:
        _stack()[:] = [self]
        return self

    def synchronize(self) -> None:
        capture.refuse("Stream.synchronize()")

    def is_capturing(self) -> bool:
        return self._capture is not None

    def begin_capture(self, mode: Any = None) -> None:
        if self.ptr == 0:
            raise capture.StreamCaptureError(
                "begin_capture on the null stream: CUDA captures only a created stream (cupy.cuda.Stream())"
            )
        if get_current_stream() is not self:
            raise capture.StreamCaptureError("begin_capture on a stream that is not current: enter `with stream:`")
        self._capture = capture.begin(capture.current_pool())

    def end_capture(self) -> Graph:
        if self._capture is None:
            raise capture.StreamCaptureError("end_capture on a stream that is not capturing")
        recording, self._capture = self._capture, None
        return Graph(capture.end(recording), recording.pool)


NULL = Stream(null=True)


def get_current_stream() -> Stream:
    stack = _stack()
    return stack[-1] if stack else NULL


class Graph:
    """``cupy.cuda.Graph``: the recorded operations, run again in order by :meth:`launch`."""

    def __init__(self, ops: list[Callable[[], None]], pool: Any):
        self._ops = ops
        self._pool = pool  # a graph's buffers stay allocated as long as it lives
        self.launches = 0

    @property
    def nodes(self) -> int:
        """How many operations a launch replays (the simulator's stand-in for the graph's node count)."""
        return len(self._ops)

    def upload(self, stream: Any = None) -> None:
        capture.refuse("Graph.upload()")

    def launch(self, stream: Any = None) -> None:
        capture.refuse("launching a graph")
        for op in self._ops:
            op()
        self.launches += 1


class PinnedMemoryPointer:
    """``cupy.cuda.alloc_pinned_memory(size)``: page-locked host memory at ``ptr``."""

    def __init__(self, size: int):
        self.mem = capture.pinned(size)
        self.ptr = int(self.mem.ctypes.data)
        self.size = int(size)


def alloc_pinned_memory(size: int) -> PinnedMemoryPointer:
    return PinnedMemoryPointer(size)


@contextlib.contextmanager
def using_allocator(allocator: Any = None) -> Iterator[None]:
    """``cupy.cuda.using_allocator(pool.malloc)``: allocations inside the block come from ``pool``."""
    with capture.using_allocator(getattr(allocator, "__self__", allocator)):
        yield


def memcpy_async(dst: int, src: int, size: int, kind: int, stream: int) -> None:
    """``cupy.cuda.runtime.memcpyAsync``; inside a capture a host source must be pinned memory, read at each
    launch (the graph's copy node), and only host-to-device copies are simulated."""
    if kind != MEMCPY_HOST_TO_DEVICE:
        raise ValueError(f"memcpyAsync kind {kind}: the simulator implements only host-to-device (1)")
    if capture.active() is not None and not capture.is_pinned(src, size):
        capture.refuse("memcpyAsync from pageable host memory (the graph would read it at each launch)")

    def copy() -> None:
        ctypes.memmove(dst, src, size)

    capture.run(copy, (), {}, writes=True)
