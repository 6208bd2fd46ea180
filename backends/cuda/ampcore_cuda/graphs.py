"""CUDA-graph capture and replay: a region of device work recorded once and launched again as one graph.

``capture(fn)`` runs ``fn`` eagerly first (warm-up: every kernel compiled and loaded, every cache this backend
keeps filled, cuBLAS's handle and workspace made), then again on a private stream between CuPy's
``Stream.begin_capture`` and ``end_capture``, with every allocation from a memory pool of the graph's own
(``cupy.cuda.using_allocator``).  The result is a :class:`CapturedGraph`: ``replay()`` launches it, with no
Python between the kernels and no host synchronisation; its buffers are static (the arrays ``fn`` returned,
and every intermediate, are written again by each replay, at the same addresses, for as long as the graph
lives).  Inputs are static too: write new values into the arrays ``fn`` read (``ndarray.set``,
``cupy.copyto``) before a replay.  Only work ``fn`` did on the device replays: Python state it changed (a
counter, a rebound attribute) changed once, at capture, so state that must advance from replay to replay has
to live in device arrays updated in place (as ``adamw_step_amp`` does with its step count, and ``update_scale``
with the loss scale).

Inside a capture this backend (see :func:`active`):
- runs its GEMMs through a cuBLAS handle of its own (:mod:`.blas`; CuPy's wrapper raises there), float32 ones
  included (float64 GEMMs decline);
- uploads a multi-tensor launch's pointer table from page-locked memory the graph keeps (:func:`upload`), and
  keeps alive every cached table the graph reads;
- reads nothing on the host: a host read, a synchronisation, compiling or loading a kernel, or an allocation
  from another pool invalidates the capture (CUDA's ``cudaErrorStreamCaptureUnsupported``), and it raises.

``capture`` declines, with :class:`CaptureDeclinedError` saying why, where the GEMMs cannot be captured
(nvmath-python missing: install ``ampcore-cuda[graphs]``) or CuPy has no stream capture.  On the CUDA simulator
the same path runs (its CuPy records the launches and replays them), so CI tests it; speed only on a GPU.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from . import blas
from .runtime import import_cupy

__all__ = ["CaptureDeclinedError", "CapturedGraph", "support", "capture", "replay", "active", "keep_alive", "upload"]

T = TypeVar("T")
_local = threading.local()


class CaptureDeclinedError(RuntimeError):
    """This backend cannot capture here; ``reason`` says why and what would fix it."""

    def __init__(self, reason: str):
        super().__init__(f"cuda graph capture declined: {reason}")
        self.reason = reason


@dataclass
class _Capture:
    """The capture in progress on this thread: what the graph must keep alive."""

    device: int
    keep: list[Any] = field(default_factory=list)
    eager_bits: bool = False  # decline what would run another path than eager's (a float32 GEMM)


def active() -> _Capture | None:
    """The capture in progress on this thread, or None."""
    return getattr(_local, "capture", None)


def keep_alive(obj: Any) -> None:
    """Keep ``obj`` (a device array the graph reads, a pinned host buffer it copies from) alive as long as the
    graph being captured; nothing outside a capture."""
    current = active()
    if current is not None:
        current.keep.append(obj)


def upload(host: np.ndarray) -> Any:
    """``host`` as a new CuPy array on the current device: ``cupy.asarray`` outside a capture; inside one a
    copy from page-locked memory the graph keeps, a node each replay runs again (CUDA reads a pageable host
    buffer at capture time only, and CuPy stages through a pinned pool it reuses)."""
    cupy = import_cupy()
    current = active()
    if current is None:
        return cupy.asarray(host)
    host = np.ascontiguousarray(host)
    out = cupy.empty(host.shape, dtype=host.dtype)
    pinned = cupy.cuda.alloc_pinned_memory(max(host.nbytes, 1))
    ctypes.memmove(pinned.ptr, host.ctypes.data, host.nbytes)
    current.keep.append(pinned)
    runtime = cupy.cuda.runtime
    runtime.memcpyAsync(
        out.data.ptr, pinned.ptr, host.nbytes, runtime.memcpyHostToDevice, cupy.cuda.get_current_stream().ptr
    )
    return out


def support() -> tuple[bool, str]:
    """``(True, how GEMMs run in a graph)`` where this backend can capture, else ``(False, why and the fix)``."""
    cupy = import_cupy()
    if not hasattr(cupy.cuda, "Graph") or not hasattr(cupy.cuda.Stream, "begin_capture"):
        return False, "this CuPy has no stream capture (cupy.cuda.Graph, CuPy 10+): pip install -U cupy-cuda12x"
    ok, how = blas.support()
    if not ok:
        return False, f"GEMMs inside a graph need a cuBLAS handle of our own, and {how}"
    return True, f"CUDA graphs; GEMMs through {how}"


class CapturedGraph(Generic[T]):
    """A captured region: :meth:`replay` launches it on the current stream (no host synchronisation); ``outputs`` is
    what ``fn`` returned at capture, its arrays written again by every replay."""

    def __init__(self, graph: Any, stream: Any, pool: Any, keep: list[Any], outputs: T, device: int):
        self._graph, self._stream, self._pool, self._keep = graph, stream, pool, keep
        self.outputs = outputs
        self.device = device
        self.replays = 0

    def replay(self) -> None:
        """Launch the graph once on the current stream: asynchronously, after the work already queued there
        (writes into the static inputs) and before what follows (reads of the outputs)."""
        cupy = import_cupy()
        with cupy.cuda.Device(self.device):
            self._graph.launch(cupy.cuda.get_current_stream())
        self.replays += 1

    def __repr__(self) -> str:
        return f"<CapturedGraph cuda:{self.device}, {self.replays} replays>"


def capture(fn: Callable[[], T], *, device: int = 0, warmup: int = 1, eager_bits: bool = False) -> CapturedGraph[T]:
    """Record ``fn()``'s device work on ``cuda:device`` as a CUDA graph, after ``warmup`` eager calls.

    ``fn`` runs ``warmup + 1`` times, the last one captured (its device work runs only at replays).
    ``eager_bits=True``: a kernel whose graph path is not its eager one (a float32 GEMM: cublasGemmEx on our
    handle in a graph, CuPy's matmul eagerly, whose sums need not be ordered alike) raises
    :class:`CaptureDeclinedError` instead of running it (a captured program must give eager's bits).  Raises
    :class:`CaptureDeclinedError` (nothing run) where this backend cannot capture, ValueError for ``warmup < 1``
    (the kernels must be loaded before capture), and what ``fn`` raises; an error inside the capture ends it
    and discards the graph.
    """
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
        raise ValueError(
            f"warmup must be an int >= 1 (kernels must be compiled and loaded before capture), got {warmup!r}"
        )
    if active() is not None:
        raise RuntimeError("capture() inside a capture: CUDA graphs do not nest here; capture the outer region")
    ok, why = support()
    if not ok:
        raise CaptureDeclinedError(why)
    cupy = import_cupy()
    blas.prepare(device)
    with cupy.cuda.Device(device):
        for _ in range(warmup):
            fn()
        cupy.cuda.Device(device).synchronize()
        pool = cupy.cuda.MemoryPool()
        stream = cupy.cuda.Stream(non_blocking=True)
        current = _Capture(device, eager_bits=eager_bits)
        with stream, cupy.cuda.using_allocator(pool.malloc):
            mode = getattr(cupy.cuda.runtime, "streamCaptureModeRelaxed", None)
            stream.begin_capture() if mode is None else stream.begin_capture(mode)
            _local.capture = current
            try:
                outputs = fn()
            except BaseException:
                _local.capture = None
                stream.end_capture()
                raise
            _local.capture = None
            graph = stream.end_capture()
    return CapturedGraph(graph, stream, pool, current.keep, outputs, device)


def replay(graph: CapturedGraph[Any]) -> None:
    """``graph.replay()``: one launch of a captured region."""
    graph.replay()
