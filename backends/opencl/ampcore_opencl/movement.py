"""Data-movement kernels: reshape, transpose, broadcast_to, slice, slice_assign, pad, concat, take, scatter_add.

Movement copies raw bits, so its kernels are keyed by item size (1, 2, 4 or 8
bytes), never by dtype: NaN payloads and -0.0 survive, and seven dtypes share
four programs.  One strided copy covers transpose, broadcast, slice, the
interior of pad, the pieces of concat and slice_assign:
``out[o0 + sum(c_d * os_d)] = in[i0 + sum(c_d * is_d)]`` over the collapsed
coordinates ``c``.  On a CPU device each work-item copies a long run of
output elements, decoding coordinates once per row (PoCL does not hoist a
per-element div/mod), and transposes go in cache-sized tiles; on a GPU each
work-item copies one element.  A copy contiguous on both sides is a
device-side ``enqueue_copy``.

Indices of ``take``/``scatter_add`` may be negative (counted from the end, as
NumPy and the cpu backend do).  Out-of-range indices cannot raise without a
host round trip: ``take`` writes zero bits there and ``scatter_add`` drops them
(the core's callers that care, e.g. ``embedding``, check on the host first).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CLArray, broadcast_strides, collapse, contiguous_strides, empty
from .codegen import ctype, prelude
from .devices import DeviceState, is_cpu

__all__ = ["kernels"]

_RAW = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}
_RAW_NP = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_I64, _I32 = np.int64, np.int32

_COPY = """
/* Add to *s and *o the input and output offsets of row r, decoded through meta: shape[0..nd), in strides
   [nd..2nd), out strides [2nd..3nd). */
inline void row_offsets(long r, int nd, __global const long *meta, long *s, long *o) {
    for (int d = nd - 1; d >= 0; --d) {
        long n = meta[d];
        long c = r % n;
        r /= n;
        *s += c * meta[nd + d];
        *o += c * meta[2 * nd + d];
    }
}

/* Strided copy of raw words.  The collapsed layout is rows of n0 elements (strides in_last / out_last) whose
   row index r decodes through meta: shape[0..nd), in strides [nd..2nd), out strides [2nd..3nd).  Work-item w
   copies flat elements [w*chunk, (w+1)*chunk): one div/mod decode per row, then a plain loop. */
__kernel void copy_strided(__global T *out, long out_off, long out_last,
                           __global const T *in, long in_off, long in_last,
                           long n0, long total, long chunk, int nd, __global const long *meta) {
    long start = get_global_id(0) * chunk;
    long end = min(total, start + chunk);
    long row = start / n0, i = start - row * n0;
    while (start < end) {
        long s = in_off, o = out_off;
        row_offsets(row, nd, meta, &s, &o);
        long stop = min(n0, i + (end - start));
        if (in_last == 1 && out_last == 1) {
            for (long k = i; k < stop; ++k) out[o + k] = in[s + k];
        } else {
            for (long k = i; k < stop; ++k) out[o + k * out_last] = in[s + k * in_last];
        }
        start += stop - i;
        i = 0;
        ++row;
    }
}

/* A transpose-like copy in TILE x TILE blocks, so both sides use whole cache lines: the output's last axis
   (n0 long, input stride in_last, output stride 1) against the axis the input walks contiguously (na long,
   output stride out_a).  Unit u = (batch b, tile ta along a, tile tl along the last axis); the batch axes
   decode through meta as in copy_strided. */
__kernel void copy_tiled(__global T *out, long out_off, __global const T *in, long in_off, long in_last,
                         long n0, long na, long out_a, long tiles_l, long tiles_a, long units, long per,
                         int nd, __global const long *meta) {
    long end = min(units, (long)(get_global_id(0) + 1) * per);
    for (long u = get_global_id(0) * per; u < end; ++u) {
        long b = u / (tiles_l * tiles_a), t = u - b * tiles_l * tiles_a;
        long a0 = (t / tiles_l) * TILE, l0 = (t % tiles_l) * TILE;
        long s = in_off, o = out_off;
        row_offsets(b, nd, meta, &s, &o);
        long ea = min(na - a0, (long)TILE), el = min(n0 - l0, (long)TILE);
        for (long ia = 0; ia < ea; ++ia) {
            __global T *dst = out + o + (a0 + ia) * out_a + l0;
            __global const T *src = in + s + (a0 + ia) + l0 * in_last;
            for (long il = 0; il < el; ++il) dst[il] = src[il * in_last];
        }
    }
}

__kernel void fill(__global T *out, T value) { out[get_global_id(0)] = value; }

/* out[(o*m + j)*inner + r] = x[(o*n + idx[j])*inner + r]; a negative index counts from the end, one out of
   range gives zero bits. */
__kernel void take(__global T *out, __global const T *x, __global const long *idx, long n, long m, long inner) {
    long r = get_global_id(0), j = get_global_id(1), o = get_global_id(2);
    long k = idx[j];
    k += (k < 0) ? n : 0;
    out[(o * m + j) * inner + r] = (k >= 0 && k < n) ? x[(o * n + k) * inner + r] : (T)0;
}
"""

# scatter_add without float atomics, so the result does not depend on scheduling: a stable counting sort of
# the indices (integer atomics only count) gives each output row the source positions that hit it in
# increasing order, then each output element sums its positions in that order (as np.add.at does).
_BUCKETS = """
inline long wrapped(long k, long size) { return k + ((k < 0) ? size : 0); }

__kernel void count(__global const long *idx, long size, __global int *counts) {
    long k = wrapped(idx[get_global_id(0)], size);
    if (k >= 0 && k < size) atomic_inc(counts + k);
}

/* Exclusive prefix sum of counts[0..n) into offsets[0..n], in three passes over P chunks of `chunk`. */
__kernel void scan_chunks(__global const int *counts, long n, long chunk, __global int *sums) {
    long w = get_global_id(0), end = min(n, (w + 1) * chunk);
    int s = 0;
    for (long i = w * chunk; i < end; ++i) s += counts[i];
    sums[w] = s;
}
__kernel void scan_sums(__global int *sums, int p) {
    int run = 0;
    for (int w = 0; w < p; ++w) { int s = sums[w]; sums[w] = run; run += s; }
    sums[p] = run;
}
__kernel void scan_apply(__global const int *counts, long n, long chunk, __global const int *sums,
                         int p, __global int *offsets, __global int *cursor) {
    long w = get_global_id(0), end = min(n, (w + 1) * chunk);
    int run = sums[w];
    for (long i = w * chunk; i < end; ++i) { offsets[i] = run; cursor[i] = run; run += counts[i]; }
    if (w == p - 1) offsets[n] = sums[p];
}

/* Unordered bucket fill, then each position finds its rank among its bucket's positions: stable order. */
__kernel void fill_buckets(__global const long *idx, long size, __global int *cursor, __global int *unordered) {
    int j = (int)get_global_id(0);
    long k = wrapped(idx[j], size);
    if (k >= 0 && k < size) unordered[atomic_inc(cursor + k)] = j;
}
__kernel void order_buckets(__global const long *idx, long size, __global const int *offsets,
                            __global const int *unordered, __global int *ordered) {
    int j = (int)get_global_id(0);
    long k = wrapped(idx[j], size);
    if (k < 0 || k >= size) return;
    int lo = offsets[k], hi = offsets[k + 1], rank = 0;
    for (int p = lo; p < hi; ++p) rank += unordered[p] < j;
    ordered[lo + rank] = j;
}
"""


_GATHER_SUM = """
/* out[o, v, r] = sum over the positions j of bucket v, in increasing order, of src[o, j, r].  A unit is a
   tile of TILE consecutive r of one output row (o, v), accumulated in private memory so each source row is
   read contiguously; work-item w does units [w*per, (w+1)*per). */
__kernel void gather_sum(__global STORE *out, __global const STORE *src, __global const int *offsets,
                         __global const int *ordered, long m, long size, long inner, long tiles,
                         long units, long per) {
    long u = get_global_id(0) * per, end = min(units, u + per);
    if (u >= end) return;
    long row = u / tiles, t = u - row * tiles, v = row % size, o = row / size;
    for (; u < end; ++u) {
        long r0 = t * TILE;
        int nr = (int)min((long)TILE, inner - r0);
        ACC acc[TILE];
        for (int q = 0; q < nr; ++q) acc[q] = ZERO;
        int hi = offsets[v + 1];
        for (int p = offsets[v]; p < hi; ++p) {
            long base = (o * m + ordered[p]) * inner + r0;
            for (int q = 0; q < nr; ++q) { long s = base + q; acc[q] = COMBINE(acc[q], LOAD); }
        }
        long d0 = (o * size + v) * inner + r0;
        for (int q = 0; q < nr; ++q) { long d = d0 + q; ACC a = acc[q]; STORE_STMT }
        if (++t == tiles) { t = 0; if (++v == size) { v = 0; ++o; } }
    }
}
"""
_TILE = 32

# Accumulator per dtype tag: (type, zero, combine(a, b)); ints wrap as NumPy's do, bool is a logical or.
_ACC = {
    "f16": ("float", "0.0f", "({a} + {b})"),
    "bf16": ("float", "0.0f", "({a} + {b})"),
    "f32": ("float", "0.0f", "({a} + {b})"),
    "f64": ("double", "0.0", "({a} + {b})"),
    "i32": ("uint", "0u", "({a} + (uint)({b}))"),
    "i64": ("ulong", "0ul", "({a} + (ulong)({b}))"),
    "b8": ("int", "0", "({a} | {b})"),
}


def _source(state: DeviceState, body: str, **defines: str) -> Callable[[], str]:
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    return lambda: prelude(state.fp64, state.half.native) + head + body


def _raw_kernel(state: DeviceState, itemsize: int, name: str, scalars: Sequence[Any]) -> Any:
    key = ("movement", f"raw{itemsize}")
    return state.kernel(key, _source(state, _COPY, T=_RAW[itemsize], TILE=str(_TILE)), name, scalars)


def _enqueue_copy(state: DeviceState, dst: Any, dst_off: int, src: Any, src_off: int, nbytes: int) -> None:
    state.copy(dst, src, nbytes, dst_off, src_off)


def _chunk(state: DeviceState, total: int) -> int:
    """Elements per work-item of a strided copy.  On a CPU device long runs per work-item beat one element
    each (PoCL does not hoist the per-element div/mod): ~8 chunks per core, each >= 4096 elements.  On a GPU
    one element per work-item keeps neighbouring work-items on neighbouring addresses."""
    if not is_cpu(state.device):
        return 1
    return max(4096, -(-total // (8 * state.device.max_compute_units)))


def _local(state: DeviceState) -> tuple[int] | None:
    """Work-groups of one on a CPU device: a chunk is long, and the cores share out the work-groups."""
    return (1,) if is_cpu(state.device) else None


def _copy(
    state: DeviceState,
    itemsize: int,
    shape: Sequence[int],
    out: Any,
    out_off: int,
    out_strides: Sequence[int],
    src: Any,
    in_off: int,
    in_strides: Sequence[int],
) -> None:
    """Enqueue ``out[out_off + c . out_strides] = src[in_off + c . in_strides]`` for every coordinate of ``shape``
    (element units); nothing when ``shape`` is empty."""
    if math.prod(shape) == 0:
        return
    shape, (ins, outs) = collapse(shape, in_strides, out_strides)
    if not shape:
        shape, ins, outs = (1,), (0,), (0,)
    if len(shape) == 1 and ins[0] == 1 and outs[0] == 1:
        _enqueue_copy(state, out, out_off * itemsize, src, in_off * itemsize, shape[0] * itemsize)
        return
    rest, total = shape[:-1], math.prod(shape)
    if is_cpu(state.device) and outs[-1] == 1 and ins[-1] != 1 and 1 in ins[:-1]:
        _copy_tiled(state, itemsize, shape, out, out_off, outs, src, in_off, ins)
        return
    chunk = _chunk(state, total)
    kernel = _raw_kernel(
        state, itemsize, "copy_strided", [None, _I64, _I64, None, _I64, _I64, _I64, _I64, _I64, _I32, None]
    )
    meta = state.meta(tuple(rest) + tuple(ins[:-1]) + tuple(outs[:-1]))
    state.launch(
        kernel,
        (-(-total // chunk),),
        _local(state),
        out,
        out_off,
        outs[-1],
        src,
        in_off,
        ins[-1],
        shape[-1],
        total,
        chunk,
        len(rest),
        meta,
    )


def _copy_tiled(
    state: DeviceState,
    itemsize: int,
    shape: Sequence[int],
    out: Any,
    out_off: int,
    outs: Sequence[int],
    src: Any,
    in_off: int,
    ins: Sequence[int],
) -> None:
    """A collapsed copy whose output's last axis is strided in the input while another axis is contiguous there
    (a transpose): copied in tiles, on a CPU device, where walking the input at a large stride would miss the
    cache on every element."""
    a = list(ins[:-1]).index(1)
    batch = [d for d in range(len(shape) - 1) if d != a]
    n0, na = shape[-1], shape[a]
    tiles_l, tiles_a = -(-n0 // _TILE), -(-na // _TILE)
    units = math.prod(shape[d] for d in batch) * tiles_l * tiles_a
    per = max(1, -(-units // (8 * state.device.max_compute_units)))
    meta = state.meta(tuple(shape[d] for d in batch) + tuple(ins[d] for d in batch) + tuple(outs[d] for d in batch))
    kernel = _raw_kernel(
        state,
        itemsize,
        "copy_tiled",
        [None, _I64, None, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _I32, None],
    )
    state.launch(
        kernel,
        (-(-units // per),),
        _local(state),
        out,
        out_off,
        src,
        in_off,
        ins[-1],
        n0,
        na,
        outs[a],
        tiles_l,
        tiles_a,
        units,
        per,
        len(batch),
        meta,
    )


def _fill_bits(out: CLArray, value: Any) -> None:
    """Fill ``out`` with ``value`` converted on the host exactly as NumPy's ``np.full`` does (one rounding)."""
    if not out.size:
        return
    itemsize = out.ctype.itemsize
    host = np.full((), value, dtype=out.dtype.numpy)
    if out.dtype == dt.bool_:
        host = host.astype(np.uint8)
    bits = host.view(_RAW_NP[itemsize])
    kernel = _raw_kernel(out.state, itemsize, "fill", [None, _RAW_NP[itemsize]])
    out.state.launch(kernel, (out.size,), None, out.buffer, bits)


def _whole_copy(x: CLArray) -> CLArray:
    out = empty(x.state, x.shape, x.dtype)
    if x.size:
        _enqueue_copy(x.state, out.buffer, 0, x.buffer, 0, x.nbytes)
    return out


# --------------------------------------------------------------------------- views and permutations
def reshape(x: CLArray, shape: Sequence[int]) -> CLArray:
    """A view over ``x``'s buffer (CLArrays are always contiguous); one ``-1`` is inferred."""
    shape = tuple(int(n) for n in shape)
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if shape.count(-1) > 1 or known == 0 or x.size % known:
            raise ValueError(f"cannot reshape {x.shape} ({x.size} elements) to {shape}")
        shape = tuple(x.size // known if n == -1 else n for n in shape)
    if math.prod(shape) != x.size:
        raise ValueError(f"cannot reshape {x.shape} ({x.size} elements) to {shape}")
    return x.reshaped(shape)


def transpose(x: CLArray, axes: Sequence[int]) -> CLArray:
    axes = tuple(int(a) % max(x.ndim, 1) for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"transpose axes {axes} are not a permutation of 0..{x.ndim - 1} for shape {x.shape}")
    own = contiguous_strides(x.shape)
    shape = tuple(x.shape[a] for a in axes)
    out = empty(x.state, shape, x.dtype)
    _copy(
        x.state,
        x.ctype.itemsize,
        shape,
        out.buffer,
        0,
        contiguous_strides(shape),
        x.buffer,
        0,
        tuple(own[a] for a in axes),
    )
    return out


def broadcast_to(x: CLArray, shape: Sequence[int]) -> CLArray:
    shape = tuple(int(n) for n in shape)
    pad = len(shape) - x.ndim
    if pad < 0 or any(n != 1 and n != shape[pad + i] for i, n in enumerate(x.shape)):
        raise ValueError(f"shape {x.shape} cannot be broadcast to {shape}")
    if math.prod(shape) == x.size:  # only size-1 axes added or kept: the same elements in the same order
        return x.reshaped(shape)
    out = empty(x.state, shape, x.dtype)
    _copy(
        x.state,
        x.ctype.itemsize,
        shape,
        out.buffer,
        0,
        contiguous_strides(shape),
        x.buffer,
        0,
        broadcast_strides(x.shape, shape),
    )
    return out


# --------------------------------------------------------------------------- basic indexing
def _region(shape: Sequence[int], index: tuple) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """Element offset, shape and strides of ``x[index]`` inside a contiguous ``shape`` (ints drop their axis)."""
    if len(index) > len(shape):
        raise IndexError(f"index {index!r} has more entries than shape {tuple(shape)} has axes")
    own = contiguous_strides(shape)
    offset, out_shape, strides = 0, [], []
    for axis, item in enumerate(index):
        n = shape[axis]
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            length = len(range(start, stop, step))
            if length:
                offset += start * own[axis]
            out_shape.append(length)
            strides.append(own[axis] * step)
        else:
            k = int(item)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {axis} with size {n}")
            offset += (k % n) * own[axis]
    out_shape += shape[len(index) :]
    strides += own[len(index) :]
    return offset, tuple(out_shape), tuple(strides)


def slice_(x: CLArray, index: tuple) -> CLArray:
    offset, shape, strides = _region(x.shape, tuple(index))
    out = empty(x.state, shape, x.dtype)
    _copy(x.state, x.ctype.itemsize, shape, out.buffer, 0, contiguous_strides(shape), x.buffer, offset, strides)
    return out


def slice_assign(base: CLArray, index: tuple, values: Any) -> CLArray:
    """A copy of ``base`` with ``base[index] = values``; ``values`` broadcasts to the region (a number too)."""
    offset, shape, strides = _region(base.shape, tuple(index))
    out = _whole_copy(base)
    if not isinstance(values, CLArray):
        values = _full(base.state, (), values, base.dtype)
    if values.dtype != base.dtype:
        raise TypeError(f"slice_assign values are {values.dtype.name}, the base is {base.dtype.name}; cast first")
    pad = len(shape) - values.ndim
    if pad < 0 or any(n != 1 and n != shape[pad + i] for i, n in enumerate(values.shape)):
        raise ValueError(f"values of shape {values.shape} cannot be assigned to a region of shape {shape}")
    _copy(
        base.state,
        base.ctype.itemsize,
        shape,
        out.buffer,
        offset,
        strides,
        values.buffer,
        0,
        broadcast_strides(values.shape, shape),
    )
    return out


def _full(state: DeviceState, shape: Sequence[int], value: Any, dtype: dt.DType) -> CLArray:
    out = empty(state, shape, dtype)
    _fill_bits(out, value)
    return out


def pad(x: CLArray, widths: Sequence[Sequence[int]], value: Any) -> CLArray:
    widths = tuple((int(lo), int(hi)) for lo, hi in widths)
    if len(widths) != x.ndim or any(lo < 0 or hi < 0 for lo, hi in widths):
        raise ValueError(f"pad widths {widths} must be one non-negative (lo, hi) pair per axis of {x.shape}")
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, widths))
    out = empty(x.state, shape, x.dtype) if x.size == math.prod(shape) else _full(x.state, shape, value, x.dtype)
    own = contiguous_strides(shape)
    offset = sum(lo * s for (lo, _), s in zip(widths, own))
    _copy(x.state, x.ctype.itemsize, x.shape, out.buffer, offset, own, x.buffer, 0, contiguous_strides(x.shape))
    return out


def concat(xs: Sequence[CLArray], axis: int) -> CLArray:
    xs = list(xs)
    if not xs:
        raise ValueError("concat needs at least one array")
    first = xs[0]
    axis = int(axis) % max(first.ndim, 1)
    for x in xs[1:]:
        if (
            x.dtype != first.dtype
            or x.ndim != first.ndim
            or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != axis)
        ):
            raise ValueError(
                f"concat of {x.shape} {x.dtype.name} with {first.shape} {first.dtype.name} "
                f"along axis {axis}: dtypes and the other axes must match"
            )
    shape = first.shape[:axis] + (sum(x.shape[axis] for x in xs),) + first.shape[axis + 1 :]
    out = empty(first.state, shape, first.dtype)
    own = contiguous_strides(shape)
    start = 0
    for x in xs:
        _copy(
            first.state,
            first.ctype.itemsize,
            x.shape,
            out.buffer,
            start * own[axis],
            own,
            x.buffer,
            0,
            contiguous_strides(x.shape),
        )
        start += x.shape[axis]
    return out


# --------------------------------------------------------------------------- gather / scatter
def _split(shape: Sequence[int], axis: int) -> tuple[int, int, int]:
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def take(x: CLArray, indices: CLArray, axis: int) -> CLArray:
    axis = int(axis) % max(x.ndim, 1)
    if indices.dtype != dt.int64 or indices.ndim != 1:
        raise TypeError(f"take needs 1-D int64 indices, got {indices.dtype.name} of shape {indices.shape}")
    outer, n, inner = _split(x.shape, axis)
    m = indices.size
    out = empty(x.state, x.shape[:axis] + (m,) + x.shape[axis + 1 :], x.dtype)
    if out.size:
        kernel = _raw_kernel(x.state, x.ctype.itemsize, "take", [None, None, None, _I64, _I64, _I64])
        x.state.launch(kernel, (inner, m, outer), None, out.buffer, x.buffer, indices.buffer, n, m, inner)
    return out


def _buckets_kernel(state: DeviceState, name: str, scalars: Sequence[Any]) -> Any:
    return state.kernel(("movement", "buckets"), _source(state, _BUCKETS), name, scalars)


def _scan_chunks(n: int) -> tuple[int, int]:
    """(number of chunks, chunk length) for a scan of ``n`` counts: chunks of >= 256, at most 1024 of them."""
    p = max(1, min(1024, -(-n // 256)))
    return p, -(-n // p)


def _ordered_buckets(state: DeviceState, indices: CLArray, size: int) -> Any:
    """Enqueue the stable counting sort: (offsets[size + 1], ordered[m]) as int32 device buffers."""
    m = indices.size
    counts, offsets, cursor = (state.allocate(4 * (size + 1)) for _ in range(3))
    unordered, ordered = state.allocate(4 * m), state.allocate(4 * m)
    p, chunk = _scan_chunks(size)
    sums = state.allocate(4 * (p + 1))
    state.launch(_raw_kernel(state, 4, "fill", [None, np.uint32]), (size + 1,), None, counts, 0)
    k = lambda name, *scalars: _buckets_kernel(state, name, scalars)  # noqa: E731
    if m:
        state.launch(k("count", None, _I64, None), (m,), None, indices.buffer, size, counts)
    state.launch(k("scan_chunks", None, _I64, _I64, None), (p,), None, counts, size, chunk, sums)
    state.launch(k("scan_sums", None, _I32), (1,), None, sums, p)
    state.launch(
        k("scan_apply", None, _I64, _I64, None, _I32, None, None),
        (p,),
        None,
        counts,
        size,
        chunk,
        sums,
        p,
        offsets,
        cursor,
    )
    if m:
        state.launch(k("fill_buckets", None, _I64, None, None), (m,), None, indices.buffer, size, cursor, unordered)
        state.launch(
            k("order_buckets", None, _I64, None, None, None),
            (m,),
            None,
            indices.buffer,
            size,
            offsets,
            unordered,
            ordered,
        )
    return offsets, ordered


def _gather_sum_kernel(state: DeviceState, dtype: dt.DType) -> Any:
    c = ctype(dtype)
    acc, zero, combine = _ACC[c.tag]
    load = c.load("src", "s")
    store = c.store("out", "d", "a") if c.tag != "b8" else "out[d] = (uchar)(a != 0);"
    if c.tag in ("i32", "i64"):
        store = f"out[d] = ({c.storage})a;"
    source = _source(
        state,
        _GATHER_SUM,
        TILE=str(_TILE),
        STORE=c.storage,
        ACC=acc,
        ZERO=zero,
        LOAD=load,
        STORE_STMT=store,
        **{"COMBINE(a, b)": combine.format(a="(a)", b="(b)")},
    )
    return state.kernel(
        ("movement", "gather_sum", c.tag),
        source,
        "gather_sum",
        [None, None, None, None, _I64, _I64, _I64, _I64, _I64, _I64],
    )


def scatter_add(src: CLArray, indices: CLArray, axis: int, size: int) -> CLArray:
    """Zeros of ``src``'s shape with ``size`` along ``axis``, plus ``src[.., j, ..]`` at ``indices[j]``.

    Deterministic, without float atomics: a stable counting sort of the indices
    (O(len + size), plus O(k^2) over the k duplicates of each index, e.g. a
    padding token), then each output element sums its source rows in index
    order in float32 (float64 for float64; ints wrap), rounded once.  Work:
    O(size * inner + len * inner), so an embedding backward at vocab 30000 x
    8192 tokens reads each gradient row once.
    """
    axis, size = int(axis) % max(src.ndim, 1), int(size)
    if indices.dtype != dt.int64 or indices.ndim != 1:
        raise TypeError(f"scatter_add needs 1-D int64 indices, got {indices.dtype.name} of shape {indices.shape}")
    outer, m, inner = _split(src.shape, axis)
    if m != indices.size:
        raise ValueError(f"scatter_add: {indices.size} indices for {m} source rows along axis {axis} of {src.shape}")
    if m >= 2**31 or size >= 2**31:
        raise ValueError(f"scatter_add of {m} rows into {size} supports fewer than 2**31 of each")
    state = src.state
    out = empty(state, src.shape[:axis] + (size,) + src.shape[axis + 1 :], src.dtype)
    if not out.size:
        return out
    offsets, ordered = _ordered_buckets(state, indices, size)
    tiles = -(-inner // _TILE)
    units = outer * size * tiles
    per = 1 if not is_cpu(state.device) else -(-units // (8 * state.device.max_compute_units))
    state.launch(
        _gather_sum_kernel(state, src.dtype),
        (-(-units // per),),
        _local(state),
        out.buffer,
        src.buffer,
        offsets,
        ordered,
        m,
        size,
        inner,
        tiles,
        units,
        per,
    )
    return out


def kernels() -> dict[str, Callable[..., Any]]:
    """The movement family's kernels, keyed by their contract names."""
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
    }
