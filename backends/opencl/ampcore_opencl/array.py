"""The device array of the opencl backend, and the layout arithmetic strided kernels need.

A :class:`CLArray` is a C-contiguous buffer from the device's memory pool
with a shape and an ampcore dtype.  Kernels always write fresh arrays (the
kernel contract lets them return views; ``reshape`` does, sharing the
buffer), so there are no strides to track: transposes, broadcasts and slices
are copies made by kernels that read their input through element strides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ampcore import dtypes as dt

from .codegen import CType, ctype
from .devices import DeviceState

__all__ = ["CLArray", "empty", "contiguous_strides", "broadcast_strides", "collapse"]


class CLArray:
    """``shape`` elements of ``dtype`` in ``buffer`` (a pooled OpenCL buffer) on device ``state``."""

    __slots__ = ("buffer", "shape", "dtype", "state", "size", "_keepalive", "__weakref__")

    def __init__(self, state: DeviceState, shape: Sequence[int], dtype: dt.DType, buffer: Any = None):
        self.state = state
        self.shape = tuple(int(n) for n in shape)
        self.dtype = dtype
        self.size = math.prod(self.shape)
        self.buffer = buffer if buffer is not None else state.allocate(self.size * ctype(dtype).itemsize)
        self._keepalive: Any = None  # a host array a non-blocking upload still reads from

    @property
    def ctype(self) -> CType:
        return ctype(self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * ctype(self.dtype).itemsize

    def reshaped(self, shape: Sequence[int]) -> CLArray:
        """A view with a new shape over the same buffer (same number of elements)."""
        view = CLArray(self.state, shape, self.dtype, self.buffer)
        view._keepalive = self._keepalive
        return view

    def __repr__(self) -> str:
        return f"CLArray(shape={self.shape}, dtype={self.dtype.name}, device=opencl:{self.state.index})"


def empty(state: DeviceState, shape: Sequence[int], dtype: dt.DType) -> CLArray:
    """An uninitialised array on ``state``'s device."""
    return CLArray(state, shape, dtype)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides reading a contiguous ``shape`` broadcast to ``out_shape`` (0 along broadcast axes)."""
    pad = len(out_shape) - len(shape)
    own = contiguous_strides(shape)
    return tuple(0 if i < pad or shape[i - pad] == 1 else own[i - pad] for i in range(len(out_shape)))


def collapse(shape: Sequence[int], *strides: Sequence[int]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge adjacent axes that every operand walks contiguously, and drop size-1 axes.

    ``(4, 5, 6)`` with strides ``(30, 6, 1)`` and ``(0, 0, 1)`` becomes
    ``(20, 6)`` with ``(6, 1)`` and ``(0, 1)``: fewer axes, less index
    arithmetic per element in strided kernels.
    """
    axes = [i for i, n in enumerate(shape) if n != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for i in axes:
        n = shape[i]
        if out_shape and all(s[i] * n == o[-1] for s, o in zip(strides, out_strides)):
            out_shape[-1] *= n
            for s, o in zip(strides, out_strides):
                o[-1] = s[i]
            continue
        out_shape.append(n)
        for s, o in zip(strides, out_strides):
            o.append(s[i])
    return tuple(out_shape), [tuple(o) for o in out_strides]
