"""Reduction kernels of the opencl backend: sum, max, argmax, cumsum (and the fused softmax family, from
:mod:`.softmax`).

Every pass sees its (contiguous) input as ``outer x rlen x inner``: output
element ``o`` reduces the ``rlen`` elements of row ``(o / inner, o % inner)``,
``inner`` apart, so there is no index arithmetic per element.  Reduced axes
that are not one block (0 and 2 of 3, say) take one pass per block, through
accumulator-typed intermediates (:func:`reduce_steps`).

Three launch shapes, chosen by the sizes (never by reading device data):

- many short rows: one work-item per row, accumulating in blocks of 16 or
  256 (block sums, then their sum: error grows like n/16 + 16, not n);
- few long rows: one work-group per row, each work-item striding through the
  row, then a tree reduction in local memory;
- rows too long for one work-group: two passes, partials of ``CHUNK``
  elements per work-group, then one work-group per row over the partials.

float16/bfloat16/float32 accumulate in float, float64 in double, bool and
integer sums in long (int64 out); the result is rounded once on output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CLArray, empty
from .codegen import ctype, prelude
from .devices import DeviceState, cl

__all__ = ["kernels", "reduce_steps", "work_group_size"]

# Per-row blocks of the one-work-item-per-row kernel (see the module docstring and red_item): long ones where a
# row is contiguous, short ones where rows interleave (a column reduction).
ITEM_BLOCK_CONTIGUOUS = 256
ITEM_BLOCK_STRIDED = 16
ITEM_LOCAL = 64  # its work-group size
ITEM_MAX_LEN = 256  # rows up to this long always get one work-item each
MANY_ROWS = 1024  # with this many rows, rows up to ITEM_MAX_LEN_MANY long get one work-item each
ITEM_MAX_LEN_MANY = 8192
CHUNK = 32768  # elements one work-group reduces in the first of two passes
MAX_LOCAL = 256  # work-group size of the group kernels (a power of two, capped by the device and kernel)

_I32, _I64 = np.dtype(np.int32), np.dtype(np.int64)

# --------------------------------------------------------------------------- shared helpers


def work_group_size(state: DeviceState, kernel: Any, cap: int = MAX_LOCAL) -> int:
    """The largest power of two <= ``cap`` that the device allows for ``kernel`` (the tree reductions need
    a power of two)."""
    limit = min(cap, state.max_work_group_size)
    try:
        limit = min(limit, int(kernel.get_work_group_info(cl().kernel_work_group_info.WORK_GROUP_SIZE, state.device)))
    except Exception:  # noqa: BLE001 - an ICD without the query: the device limit stands  # pragma: no cover
        pass
    return 1 << (max(limit, 1).bit_length() - 1)


def dummy(state: DeviceState) -> Any:
    """A tiny buffer for pointer arguments a kernel variant never touches."""
    return state.meta((0,))


def local(nbytes: int) -> Any:
    return cl().LocalMemory(max(int(nbytes), 8))


def is_float_c(c_type: str) -> bool:
    return c_type in ("float", "double")


def lowest(c_type: str) -> str:
    """The identity of max in ``c_type``."""
    return {"float": "-INFINITY", "double": "-INFINITY", "int": "INT_MIN", "long": "LONG_MIN"}[c_type]


def accumulator(dtype: dt.DType) -> str:
    """The C type sums accumulate in: float for float16/bfloat16/float32, double, long for bool/int."""
    if dtype == dt.float64:
        return "double"
    return "float" if dtype.is_floating_point else "long"


def acc_size(c_type: str) -> int:
    """Bytes of one accumulator value."""
    return 4 if c_type in ("float", "int") else 8


def sum_dtype(dtype: dt.DType) -> dt.DType:
    return dtype if dtype.is_floating_point else dt.int64


# --------------------------------------------------------------------------- layout


def reduce_steps(shape: Sequence[int], axes: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(outer, rlen, inner)`` of each pass reducing the contiguous ``shape`` over ``axes``.

    Reduced axes that are one block (size-1 axes aside) take one pass: the
    input is ``outer x rlen x inner``.  Otherwise the last block goes first,
    into accumulator-typed values, then the next block of that, and so on:
    axes (0, 2) of ``(N, C, HW)`` are ``HW`` then ``N``, each pass reading
    memory in order, instead of an index computation per element.
    """
    dims = [(n, i in axes) for i, n in enumerate(shape) if n != 1]
    if any(n == 0 for n, _ in dims) or not any(red for _, red in dims):
        size = math.prod(n for n, red in dims if not red)
        return [(1, 0 if any(n == 0 for n, red in dims if red) else 1, size)]
    steps = []
    while any(red for _, red in dims):
        last = max(i for i, (_, red) in enumerate(dims) if red) + 1
        first = last
        while first > 0 and dims[first - 1][1]:
            first -= 1
        steps.append(
            (
                math.prod(n for n, _ in dims[:first]),
                math.prod(n for n, _ in dims[first:last]),
                math.prod(n for n, _ in dims[last:]),
            )
        )
        dims = dims[:first] + dims[last:]
    return steps


# --------------------------------------------------------------------------- sum / max / argmax sources

_COMBINE = {
    # sum: plain addition; max: NumPy's NaN-propagating maximum, keeping the earlier of equal values;
    # argmax: the first maximum, and the first NaN if there is one (NumPy's rule).
    "sum": "*a += b;",
    "max": "if (!(*a >= b || IS_NAN(*a))) *a = b;",
    "argmax": """bool take = IS_NAN(*a) ? (IS_NAN(b) && bi < *ai)
                            : (IS_NAN(b) || b > *a || (b == *a && bi < *ai));
    if (take) { *a = b; *ai = bi; }""",
}

_REDUCE_HEAD = """
#define ACC {acc}
#define IS_NAN(v) {is_nan}
#define INIT {init}
#define LOAD(e) ({load})
#define INDEX(e, r) ({index})
#define WITH_INDEX {with_index}
inline void combine(ACC *a, long *ai, ACC b, long bi) {{
    {combine}
}}

/* Row o of an outer x rlen x inner array starts at ROWBASE(o); its elements are inner apart. */
#define ROWBASE(o) (((o) / inner) * rlen * inner + (o) % inner)
#define ARGS __global const {in_t} *x, __global const long *xidx, long nrows, long rlen, long inner

/* Work-items stride through elements [r0, r1) of row `row`, then a tree in local memory; the group's result
   is left in lv[0] (and li[0]). */
inline void red_group(ARGS, long row, long r0, long r1, __local ACC *lv, __local long *li) {{
    int lid = get_local_id(0), wg = get_local_size(0);
    long base = ROWBASE(row);
    ACC a = INIT; long ai = LONG_MAX;
    for (long r = r0 + lid; r < r1; r += wg) {{ long e = base + r * inner; combine(&a, &ai, LOAD(e), INDEX(e, r)); }}
    lv[lid] = a;
#if WITH_INDEX
    li[lid] = ai;
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = wg >> 1; s > 0; s >>= 1) {{
        if (lid < s) {{
            ACC b = lv[lid]; long bi = 0;
#if WITH_INDEX
            bi = li[lid];
            combine(&b, &bi, lv[lid + s], li[lid + s]);
            li[lid] = bi;
#else
            combine(&b, &bi, lv[lid + s], 0);
#endif
            lv[lid] = b;
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
}}
"""

# One work-item per row, accumulating in blocks (see the module docstring).  The barrier after each block is
# no synchronisation the work needs: on CPU devices (PoCL) it makes the work-group run block by block across
# its work-items instead of each work-item's whole row in turn, so a column reduction reads memory in order
# (several times faster there).  Every work-item must reach it: the extra ones read a valid row.
_REDUCE_KERNELS = """
__kernel void red_item_{kind}(ARGS, __global {out_t} *out, __global long *out_idx, long block) {{
    long o = get_global_id(0);
    long base = ROWBASE(o < nrows ? o : nrows - 1);
    ACC a = INIT; long ai = LONG_MAX;
    for (long r0 = 0; r0 < rlen; r0 += block) {{
        long r1 = min(rlen, r0 + block);
        ACC b = INIT; long bi = LONG_MAX;
        for (long r = r0; r < r1; ++r) {{ long e = base + r * inner; combine(&b, &bi, LOAD(e), INDEX(e, r)); }}
        combine(&a, &ai, b, bi);
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    if (o < nrows) {{ {write} }}
}}

/* One work-group per (row, chunk of chunk_len elements); o = row * nchunks + chunk. */
__kernel void red_group_{kind}(ARGS, __global {out_t} *out, __global long *out_idx, long chunk_len, long nchunks,
                               __local ACC *lv, __local long *li) {{
    long o = get_group_id(0);
    long row = o / nchunks, r0 = (o - row * nchunks) * chunk_len;
    red_group(x, xidx, nrows, rlen, inner, row, r0, min(rlen, r0 + chunk_len), lv, li);
    if (get_local_id(0) == 0) {{ ACC a = lv[0]; long ai = WITH_INDEX ? li[0] : 0; {write} }}
}}
"""


def _op_types(op: str, dtype: dt.DType) -> tuple[str, dt.DType]:
    """(accumulator C type, output dtype) of ``op`` on ``dtype``."""
    if op == "sum":
        return accumulator(dtype), sum_dtype(dtype)
    acc = ctype(dtype).compute
    return acc, (dtype if op == "max" else dt.int64)


def _reduce_source(state: DeviceState, op: str, dtype: dt.DType, acc_input: bool) -> str:
    """The reduction programme: kernels ``red_{item,group}_{final,acc}`` writing the result (``final``) or
    accumulator-typed values and, for argmax, indices (``acc``); ``acc_input`` reads such values instead of
    ``dtype`` elements."""
    acc, out_dtype = _op_types(op, dtype)
    src, out = ctype(dtype), ctype(out_dtype)
    if op == "argmax":
        final, final_t = "out[o] = ai;", "long"
    else:
        final, final_t = out.store("out", "o", "(a)", value_type="double" if acc == "double" else ""), out.storage
    in_t, load = (acc, "x[e]") if acc_input else (src.storage, src.load("x", "e"))
    head = _REDUCE_HEAD.format(
        acc=acc,
        is_nan="((v) != (v))" if is_float_c(acc) else "(0)",  # not isnan(): a call on PoCL (elementwise._MAXMIN)
        init="0" if op == "sum" else lowest(acc),
        load=load,
        index="xidx[e]" if acc_input and op == "argmax" else "(r)",
        with_index=int(op == "argmax"),
        combine=_COMBINE[op],
        in_t=in_t,
    )
    to_acc = "out[o] = a;" + (" out_idx[o] = ai;" if op == "argmax" else "")
    return (
        prelude(state.fp64)
        + head
        + _REDUCE_KERNELS.format(kind="final", out_t=final_t, write=final)
        + _REDUCE_KERNELS.format(kind="acc", out_t="ACC", write=to_acc)
    )


_HEAD_TYPES = [None, None, _I64, _I64, _I64, None, None]
_TYPES = {"item": _HEAD_TYPES + [_I64], "group": _HEAD_TYPES + [_I64, _I64, None, None]}


def _kernel(state: DeviceState, op: str, dtype: dt.DType, acc_input: bool, mode: str, final: bool) -> Any:
    key = ("reduce", op, ctype(dtype).tag, "acc" if acc_input else "elements")
    name = f"red_{mode}_{'final' if final else 'acc'}"
    return state.kernel(key, lambda: _reduce_source(state, op, dtype, acc_input), name, _TYPES[mode])


class _Values:
    """Reduction input or output: a buffer of elements or of accumulator values (with argmax's indices)."""

    def __init__(self, buffer: Any, indices: Any, is_acc: bool):
        self.buffer, self.indices, self.is_acc = buffer, indices, is_acc


def _pass(state: DeviceState, op: str, dtype: dt.DType, src: _Values, dst: _Values, step: tuple[int, int, int]) -> None:
    """Enqueue one ``outer x rlen x inner`` reduction of ``src`` into ``dst``: one launch, or partials of
    ``CHUNK`` elements and then a pass over them."""
    outer, rlen, inner = step
    rows, final = outer * inner, not dst.is_acc
    head = [src.buffer, src.indices, rows, rlen, inner]
    size = acc_size(_op_types(op, dtype)[0])
    if rlen <= ITEM_MAX_LEN or (rows >= MANY_ROWS and rlen <= ITEM_MAX_LEN_MANY):
        kernel = _kernel(state, op, dtype, src.is_acc, "item", final)
        wg = work_group_size(state, kernel, ITEM_LOCAL)
        block = ITEM_BLOCK_CONTIGUOUS if inner == 1 else ITEM_BLOCK_STRIDED
        state.launch(kernel, (-(-rows // wg) * wg,), (wg,), *head, dst.buffer, dst.indices, block)
        return
    nchunks = -(-rlen // CHUNK)
    group = _kernel(state, op, dtype, src.is_acc, "group", final and nchunks == 1)
    wg = work_group_size(state, group)
    scratch = (local(wg * size), local(wg * 8))
    if nchunks == 1:
        state.launch(group, (rows * wg,), (wg,), *head, dst.buffer, dst.indices, rlen, 1, *scratch)
        return
    partials = _Values(
        state.allocate(rows * nchunks * size),
        state.allocate(rows * nchunks * 8) if op == "argmax" else dummy(state),
        True,
    )
    state.launch(
        group, (rows * nchunks * wg,), (wg,), *head, partials.buffer, partials.indices, CHUNK, nchunks, *scratch
    )
    _pass(state, op, dtype, partials, dst, (rows, nchunks, 1))


def _reduce(op: str, x: CLArray, axes: Sequence[int], out_shape: tuple[int, ...]) -> CLArray:
    """Reduce ``x`` over ``axes`` with ``op`` into a fresh array of ``out_shape``."""
    state, dtype = x.state, x.dtype
    acc, out_dtype = _op_types(op, dtype)
    out = empty(state, out_shape, out_dtype)
    if out.size == 0:
        return out
    steps = reduce_steps(x.shape, axes)
    if op != "sum" and any(rlen == 0 for _, rlen, _ in steps):
        raise ValueError(
            f"{op} over an empty axis of a {x.shape} array has no identity; reduce over non-empty axes or use sum"
        )
    src = _Values(x.buffer, dummy(state), False)
    for i, step in enumerate(steps):
        if i == len(steps) - 1:
            dst = _Values(out.buffer, dummy(state), False)
        else:  # argmax reduces one axis: one step, so no indices here
            dst = _Values(state.allocate(step[0] * step[2] * acc_size(acc)), dummy(state), True)
        _pass(state, op, dtype, src, dst, step)
        src = dst
    return out


def _reduced_shape(shape: tuple[int, ...], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def reduce_sum(x: CLArray, axes: Sequence[int], keepdims: bool) -> CLArray:
    """Sum over ``axes`` (float32 or better accumulation; bool/int give int64)."""
    axes = tuple(axes)
    return _reduce("sum", x, axes, _reduced_shape(x.shape, axes, keepdims))


def reduce_max(x: CLArray, axes: Sequence[int], keepdims: bool) -> CLArray:
    """Maximum over ``axes``; a NaN in a reduced slice gives NaN.  ValueError for an empty reduced axis."""
    axes = tuple(axes)
    return _reduce("max", x, axes, _reduced_shape(x.shape, axes, keepdims))


def argmax(x: CLArray, axis: int) -> CLArray:
    """int64 index of the first maximum along ``axis`` (the first NaN, if any).  ValueError when empty."""
    return _reduce("argmax", x, (axis,), _reduced_shape(x.shape, (axis,), False))


# --------------------------------------------------------------------------- cumsum

CUMSUM_ITEMS = 4096  # split lines into chunks until about this many work-items run
CUMSUM_MIN_CHUNK = 64
CUMSUM_MAX_CHUNKS = 4096  # the carry scan runs one work-item per line over at most this many chunk sums

_CUMSUM_SOURCE = """
#define ACC {acc}
#define LOAD(e) ({load})
/* Work-item g handles chunk g / lines of line g % lines: neighbouring work-items read neighbouring lines. */
#define CHUNK_RANGE \\
    long g = get_global_id(0); long c = g / lines; long line = g - c * lines; \\
    long base = (line / inner) * n * inner + line % inner; \\
    long r0 = c * chunk_len, r1 = min(n, r0 + chunk_len);

__kernel void cs_chunk_sums(__global const {in_t} *x, __global ACC *sums, long lines, long n, long inner,
                            long chunk_len) {{
    CHUNK_RANGE
    ACC s = 0;
    for (long r = r0; r < r1; ++r) s += LOAD(base + r * inner);
    sums[g] = s;
}}

/* Exclusive scan of one line's chunk sums, in place: the carry into each chunk. */
__kernel void cs_carries(__global ACC *sums, long lines, long nchunks) {{
    long line = get_global_id(0);
    ACC run = 0;
    for (long c = 0; c < nchunks; ++c) {{ ACC v = sums[c * lines + line]; sums[c * lines + line] = run; run += v; }}
}}

__kernel void cs_scan(__global const {in_t} *x, __global const ACC *carry, __global {out_t} *out, long lines,
                      long n, long inner, long chunk_len, int has_carry) {{
    CHUNK_RANGE
    ACC s = has_carry ? carry[g] : 0;
    for (long r = r0; r < r1; ++r) {{ long e = base + r * inner; s += LOAD(e); {store} }}
}}
"""


def _cumsum_kernel(state: DeviceState, dtype: dt.DType, name: str, types: list[Any]) -> Any:
    acc, out = accumulator(dtype), ctype(sum_dtype(dtype))
    src = ctype(dtype)

    def source() -> str:
        return prelude(state.fp64) + _CUMSUM_SOURCE.format(
            acc=acc,
            load=src.load("x", "e"),
            in_t=src.storage,
            out_t=out.storage,
            store=out.store("out", "e", "s", value_type="double" if acc == "double" else ""),
        )

    return state.kernel(("cumsum", src.tag), source, name, types)


def cumsum(x: CLArray, axis: int) -> CLArray:
    """Inclusive prefix sum along ``axis`` (float32 or better accumulation; bool/int give int64).

    Lines too few to keep the device busy are cut into chunks: chunk sums,
    their exclusive scan per line, then each chunk scans from its carry.
    """
    state, dtype = x.state, x.dtype
    out = empty(state, x.shape, sum_dtype(dtype))
    if out.size == 0:
        return out
    n = x.shape[axis]
    inner = math.prod(x.shape[axis + 1 :])
    lines = out.size // n
    nchunks = 1
    if lines < CUMSUM_ITEMS // 2 and n > CUMSUM_MIN_CHUNK:
        nchunks = min(-(-n // CUMSUM_MIN_CHUNK), -(-CUMSUM_ITEMS // lines), CUMSUM_MAX_CHUNKS)
    chunk_len = -(-n // nchunks)
    nchunks = -(-n // chunk_len)
    scan = _cumsum_kernel(state, dtype, "cs_scan", [None, None, None, _I64, _I64, _I64, _I64, _I32])
    if nchunks == 1:
        state.launch(scan, (lines,), None, x.buffer, dummy(state), out.buffer, lines, n, inner, chunk_len, 0)
        return out
    sums = state.allocate(lines * nchunks * acc_size(accumulator(dtype)))
    chunk_sums = _cumsum_kernel(state, dtype, "cs_chunk_sums", [None, None, _I64, _I64, _I64, _I64])
    carries = _cumsum_kernel(state, dtype, "cs_carries", [None, _I64, _I64])
    state.launch(chunk_sums, (lines * nchunks,), None, x.buffer, sums, lines, n, inner, chunk_len)
    state.launch(carries, (lines,), None, sums, lines, nchunks)
    state.launch(scan, (lines * nchunks,), None, x.buffer, sums, out.buffer, lines, n, inner, chunk_len, 1)
    return out


# --------------------------------------------------------------------------- table


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name: sum, max, argmax and cumsum (the fused softmax family, built on
    its row helpers, is :mod:`.softmax`'s)."""
    return {"sum": reduce_sum, "max": reduce_max, "argmax": argmax, "cumsum": cumsum}
