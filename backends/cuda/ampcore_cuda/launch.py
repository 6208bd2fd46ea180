"""Compiling and launching this backend's CUDA C, and the multi-tensor meta arrays.

Every kernel is a standalone ``extern "C"`` source (no headers prepended) that
:mod:`.compiler` gives NVRTC with :data:`OPTIONS` plus the device's ``-arch``,
so the source compiled is exactly the one tests/test_cuda_kernels_compile.py
gives nvcc.  All of them compile with ``--fmad=false`` (each operation rounded
on its own, as on the cpu backend) and ``--ftz=false`` (subnormals kept, as
torch's CUDA kernels keep them; ``cupy.RawKernel`` would add ``-ftz=true``).

Multi-tensor launches (``unscale_and_check``, ``adamw_step``) cover every
tensor of a dtype group in one launch: a device int64 array ``meta`` holds
each tensor's first block, its size and its data pointers, and each block
finds its tensor by a binary search of the first blocks.  ``meta`` is cached
by its contents, so the same tensors step after step upload nothing, and a new
one is an asynchronous copy (CuPy stages it through pinned memory): no host
synchronisation either way.  Inside a CUDA graph capture a new table is uploaded from page-locked memory the
graph keeps (:func:`ampcore_cuda.graphs.upload`) and not cached, and a cached one is kept alive by the graph.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import cgen

from . import compiler, graphs
from .runtime import import_cupy

__all__ = ["OPTIONS", "BLOCK", "ILP", "raw_kernel", "multi_tensor_meta", "MULTI_TENSOR_HELPERS", "blocks_for"]

OPTIONS = ("--std=c++17", "--fmad=false", "--ftz=false")
BLOCK = 256  # threads per block
ILP = 4  # elements per thread in the elementwise multi-tensor kernels: a block covers BLOCK * ILP elements
TILE = BLOCK * ILP
_META_CACHE_SIZE = 64

_kernels: dict[tuple, Any] = {}
_metas: OrderedDict[tuple, Any] = OrderedDict()


def raw_kernel(key: tuple, source: Callable[[], str], name: str) -> Any:
    """The kernel for ``key`` on the current device, built from ``source()`` on first use there; called like a
    ``cupy.RawKernel``: ``kernel(grid, block, args)``."""
    device = import_cupy().cuda.runtime.getDevice()
    kernel = _kernels.get((key, device))
    if kernel is None:
        kernel = _kernels[(key, device)] = compiler.load(source(), name, OPTIONS)
    return kernel


def blocks_for(size: int, tile: int = TILE) -> int:
    return -(-size // tile)


def multi_tensor_meta(device: int, groups: Sequence[Sequence[Any]], tile: int = TILE) -> tuple[Any, int]:
    """The meta array for ``groups`` (per tensor, CuPy arrays of one size) and the total number of blocks.

    Layout (int64): first block of each tensor and the total (n + 1), sizes (n), then per tensor the data
    pointers of its arrays.  See :data:`MULTI_TENSOR_HELPERS` for the device side.
    """
    starts, total = cgen.tile_starts([g[0].size for g in groups], tile)
    key = (device, tile, tuple((g[0].size, *(a.data.ptr for a in g)) for g in groups))
    meta = _metas.get(key)
    if meta is None:
        host = np.array(
            starts + [total] + [g[0].size for g in groups] + [a.data.ptr for g in groups for a in g], dtype=np.uint64
        ).view(np.int64)
        with import_cupy().cuda.Device(device):
            meta = graphs.upload(host)
        if graphs.active() is None:  # a table made inside a capture holds its values only at the graph's replays
            _metas[key] = meta
            if len(_metas) > _META_CACHE_SIZE:
                _metas.popitem(last=False)
    else:
        _metas.move_to_end(key)
    graphs.keep_alive(meta)  # a graph reads it at every replay: it must outlive the cache's eviction
    return meta, total


MULTI_TENSOR_HELPERS = r"""
/* Which tensor block ``blk`` belongs to: the last t with starts[t] <= blk (meta layout: see launch.py). */
__device__ __forceinline__ int mt_tensor(const long long *meta, int n_tensors, long long blk) {
    int lo = 0, hi = n_tensors - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (meta[mid] <= blk) lo = mid; else hi = mid - 1;
    }
    return lo;
}
__device__ __forceinline__ long long mt_size(const long long *meta, int n_tensors, int t) {
    return meta[n_tensors + 1 + t];
}
__device__ __forceinline__ void *mt_ptr(const long long *meta, int n_tensors, int per_tensor, int t, int j) {
    return (void *)meta[2 * n_tensors + 1 + t * per_tensor + j];
}
"""
