"""Data movement and creation through CuPy.  Movement works on the stored elements, so one code path serves
every dtype (bfloat16 bits move as uint16); only ``scatter_add`` computes, in float32 for 16-bit inputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CuArray, contiguous
from .codegen import ctype
from .convert import LOW, down, scalar_storage, up
from .runtime import import_cupy, import_cupy_module

__all__ = ["kernels"]


def _same(x: CuArray, data: Any) -> CuArray:
    return CuArray(data, x.dtype)


def reshape(x: CuArray, shape: Sequence[int]) -> CuArray:
    return _same(x, x.data.reshape(tuple(shape)))


def transpose(x: CuArray, axes: Sequence[int]) -> CuArray:
    return _same(x, x.data.transpose(tuple(axes)))


def broadcast_to(x: CuArray, shape: Sequence[int]) -> CuArray:
    return _same(x, import_cupy().broadcast_to(x.data, tuple(shape)))


def slice_(x: CuArray, index: tuple) -> CuArray:
    return _same(x, x.data[index])


def slice_assign(base: CuArray, index: tuple, values: CuArray) -> CuArray:
    """A copy of ``base`` with ``base[index] = values`` (values broadcast)."""
    cp = import_cupy()
    with cp.cuda.Device(base.device_index):
        out = base.data.copy()
        out[index] = values.data
    return _same(base, out)


def pad(x: CuArray, widths: Sequence[tuple[int, int]], value: float) -> CuArray:
    cp = import_cupy()
    with cp.cuda.Device(x.device_index):
        shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, widths))
        out = cp.full(shape, scalar_storage(value, x.dtype), dtype=ctype(x.dtype).cupy_dtype)
        out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, widths))] = x.data
    return _same(x, out)


def concat(xs: Sequence[CuArray], axis: int) -> CuArray:
    xs = list(xs)
    cp = import_cupy()
    with cp.cuda.Device(xs[0].device_index):
        return _same(xs[0], cp.concatenate([x.data for x in xs], axis=axis))


def take(x: CuArray, indices: CuArray, axis: int) -> CuArray:
    cp = import_cupy()
    with cp.cuda.Device(x.device_index):
        return _same(x, cp.take(x.data, indices.data, axis=axis))


def scatter_add(src: CuArray, indices: CuArray, axis: int, size: int) -> CuArray:
    """Zeros with ``size`` along ``axis``, then ``out[.., indices[j], ..] += src[.., j, ..]`` (atomics: the
    order of additions, so float results, may vary between runs)."""
    cupyx = import_cupy_module("cupyx")
    cp = import_cupy()
    with cp.cuda.Device(src.device_index):
        moved = cp.moveaxis(up(src), axis, 0)
        acc = moved if src.dtype.is_floating_point else moved.astype(np.float64)  # no int64 atomics in cupyx
        out = cp.zeros((size,) + moved.shape[1:], dtype=acc.dtype)
        cupyx.scatter_add(out, indices.data, acc)
        out = cp.moveaxis(out, 0, axis)
        return (
            down(out, src.dtype)
            if src.dtype in LOW
            else CuArray(contiguous(out).astype(ctype(src.dtype).cupy_dtype, copy=False), src.dtype)
        )


def full(shape: Sequence[int], value: Any, dtype: Any, device_index: int = 0) -> CuArray:
    dtype = dt.as_dtype(dtype)
    cp = import_cupy()
    with cp.cuda.Device(device_index):
        return CuArray(cp.full(tuple(shape), scalar_storage(value, dtype), dtype=ctype(dtype).cupy_dtype), dtype)


def arange(start: float, stop: float, step: float, dtype: Any, device_index: int = 0) -> CuArray:
    """Integers directly; floats computed in float64 and rounded once (the cpu backend's numbers)."""
    dtype = dt.as_dtype(dtype)
    cp = import_cupy()
    with cp.cuda.Device(device_index):
        if not dtype.is_floating_point:
            return CuArray(cp.arange(start, stop, step, dtype=ctype(dtype).cupy_dtype), dtype)
        return down(cp.arange(start, stop, step, dtype=np.float64), dtype)


def _generator(seed: int) -> Any:
    return import_cupy().random.default_rng(seed)


def uniform(shape: Sequence[int], dtype: Any, seed: int, device_index: int = 0) -> CuArray:
    """U[0, 1), deterministic in ``seed`` on this backend (not the cpu backend's numbers: another generator)."""
    dtype = dt.as_dtype(dtype)
    cp = import_cupy()
    with cp.cuda.Device(device_index):
        sample = _generator(seed).random(tuple(shape), dtype=np.float64 if dtype == dt.float64 else np.float32)
        out = down(sample, dtype)
        if dtype in LOW:  # a float32 sample just below 1 rounds up to 1.0 in 2 bytes: keep [0, 1)
            below_one = scalar_storage(np.nextafter(dtype.numpy.type(1), dtype.numpy.type(0)), dtype)
            bits = below_one.view(np.uint16)  # positive 16-bit floats order as their bits
            out = CuArray(cp.minimum(out.data.view(np.uint16), bits).view(out.data.dtype), dtype)
        return out


def normal(shape: Sequence[int], dtype: Any, seed: int, device_index: int = 0) -> CuArray:
    """N(0, 1), deterministic in ``seed`` on this backend."""
    dtype = dt.as_dtype(dtype)
    cp = import_cupy()
    with cp.cuda.Device(device_index):
        sample = _generator(seed).standard_normal(tuple(shape), dtype=np.float64 if dtype == dt.float64 else np.float32)
        return down(sample, dtype)


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    return {
        "reshape": reshape,
        "transpose": transpose,
        "broadcast_to": broadcast_to,
        "slice": slice_,
        "slice_assign": slice_assign,
        "pad": pad,
        "concat": concat,
        "take": take,
        "scatter_add": scatter_add,
        "full": full,
        "arange": arange,
        "uniform": uniform,
        "normal": normal,
    }
