"""matmul on OpenCL: packed, register-blocked GEMM, batched in one launch.

Textbook local-memory tiling reaches ~2% of the cores' peak on PoCL's CPU
device; what its compiler turns into fast code is one work-item per
``MR x NR`` block of C, held in ``MR`` vector registers (``float16`` here is
OpenCL's 16-wide float *vector*, not half precision), fed by a packed copy of
each operand:

1. ``pack_a`` copies A into panels of ``MR`` rows, k-major (``ap[panel][kk][r]``),
   ``pack_b`` copies B into panels of ``NR`` columns (``bp[panel][kk][c]``), both
   converted to the compute type (float16/bfloat16 -> float32, so the GEMM itself
   runs at float32 speed) and padded with zeros to whole panels, so the inner
   loop has no edge guards (one work-item copies one k-slice of one panel);
2. ``gemm`` accumulates ``c_r += broadcast(ap[kk][r]) * bp[kk][:]`` over k (a
   vector load, one broadcast and one FMA per row), then stores the block,
   guarded at the edges and rounded once to the output dtype.

PoCL 3.0 does not inline its builtins (``fma``, ``vload16``, ``vstore16`` are
calls that spill every accumulator), so the inner loop uses plain vector
arithmetic (clang contracts ``c += a * b`` into an FMA) and aligned vector
pointer loads (packed panels are ``NR``-element aligned).

float16 B panels on PoCL take a vector pack (:data:`VECTOR_HALF_PACK_PLATFORMS`): a whole ``NR``-column
row of B is widened as one ``uint16`` -> ``float16`` vector by :func:`half_to_float_vector` (the same bits
as ``half_to_float``), since PoCL does not vectorise the scalar conversion across its work-items.

Batch dims broadcast: the launch's third dimension runs over the output batch
and each work-item finds its operands' matrices through the collapsed batch
strides (0 on a broadcast dim) in a ``state.meta`` buffer.  Tiny products
(where three launches cost more than the product) and integer ones take a
direct kernel, one work-item per output element; it is slow beyond that size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ampcore import dtypes as dt

from .array import CLArray, broadcast_strides, collapse, empty
from .codegen import CType, prelude

__all__ = ["matmul", "kernels", "BLOCKS", "DIRECT_MAX_WORK", "VECTOR_HALF_PACK_PLATFORMS", "half_to_float_vector"]

# (MR, NR) per compute type: 6 rows x 16 floats = 12 AVX2 registers of accumulators, 2 for B and 1 broadcast
# (the measured variants are in benchmarks/bench_opencl_gemm.py's docstring).  double: 6 x 8, same registers.
BLOCKS = {"float": (6, 16), "double": (6, 8)}
# m * n * k up to which the direct kernel wins (measured: 0.24 vs 0.28 ms at 32^3, 3.1 vs 0.5 ms at 64^3).
DIRECT_MAX_WORK = 32 * 32 * 32
# Every launch names its work-group size: PoCL compiles a kernel anew for each work-group size it runs
# with, and the size it picks itself follows the global size, so a new shape would cost a compile
# (~0.7 s each, measured).  Global sizes are rounded up to whole groups and the kernels guard the tail.
_ROW = 16
# Platforms whose float16 B panels are packed a row vector at a time (pack_b's ``vector`` variant).  PoCL 3.0
# on an AVX-512 Xeon, pack_b of a 1024x1024 float16 B, best of 6: scalar 0.99 ms (float32's 0.50, bfloat16's
# 0.37), vector 0.20 ms.  Intel's CPU runtime vectorises the scalar kernel itself and runs the vector one
# slower (1.13-1.40 against 0.46-1.07 ms), so it keeps the scalar kernel.
VECTOR_HALF_PACK_PLATFORMS = frozenset({"Portable Computing Language"})
_INTEGER = {"i32": ("uint", "as_int"), "i64": ("ulong", "as_long")}
_I64 = np.int64
_I32 = np.int32


# ----------------------------------------------------------------------------------------------- sources
def _pack_a_source(c: CType, fp64: bool) -> str:
    mr, _ = BLOCKS[c.compute]
    copy = "\n".join(f"    d[{r}] = i0 + {r} < m ? {c.load('s', f'{r} * k')} : ({c.compute})0;" for r in range(mr))
    return (
        prelude(fp64)
        + f"""
/* A (z, m, k) -> ap (z, P, k, MR), rows past m zero: one column of one panel per work-item. */
__kernel void pack_a(__global const {c.storage} *a, __global {c.compute} *ap, long m, long k, long P) {{
    long kk = get_global_id(0), p = get_global_id(1), z = get_global_id(2);
    if (kk >= k) return;  /* the launch rounds k up to whole work-groups */
    long i0 = p * {mr};
    __global const {c.storage} *s = a + (z * m + i0) * k + kk;
    __global {c.compute} *d = ap + ((z * P + p) * k + kk) * {mr};
{copy}
}}
"""
    )


def half_to_float_vector(width: int) -> str:
    """OpenCL C of ``float{width} half_to_float_v{width}(uint{width} h)``: codegen's integer ``half_to_float``
    on a vector of float16 bit patterns (one per lane, high 16 bits zero), giving the same bits lane by lane.
    A subnormal is ``(0.5 + e * 2**-24) - 0.5``, exact, instead of an integer-to-float conversion, which
    PoCL calls out of line for vectors."""
    u, f = f"uint{width}", f"float{width}"
    return f"""
inline {f} half_to_float_v{width}({u} h) {{
    {u} e = h & 0x7fffu;
    {f} f = e < 0x400u ? as_{f}(e | 0x3f000000u) - 0.5f : as_{f}((e << 13) + 0x38000000u);
    f = e >= 0x7c00u ? as_{f}((e << 13) | 0x7f800000u) : f;
    return as_{f}(as_{u}(f) | ((h & 0x8000u) << 16));
}}
"""


def _pack_b_source(c: CType, fp64: bool, vector: bool = False) -> str:
    """pack_b's source; ``vector`` (float16 only): a full row of a panel is widened as one vector."""
    _, nr = BLOCKS[c.compute]
    copy = "\n".join(f"    d[{j}] = j0 + {j} < n ? {c.load('s', str(j))} : ({c.compute})0;" for j in range(nr))
    helper = full = ""
    if vector:
        lanes = ", ".join(f"(uint)s[{j}]" for j in range(nr))
        helper = half_to_float_vector(nr)
        full = f"""    if (j0 + {nr} <= n) {{  /* a full row: one vector (d is NR-aligned) */
        *(__global float{nr} *)d = half_to_float_v{nr}((uint{nr})({lanes}));
        return;
    }}
"""
    return (
        prelude(fp64)
        + helper
        + f"""
/* B (z, k, n) -> bp (z, Q, k, NR), columns past n zero: one row of one panel per work-item. */
__kernel void pack_b(__global const {c.storage} *b, __global {c.compute} *bp, long k, long n, long Q) {{
    long kk = get_global_id(0), q = get_global_id(1), z = get_global_id(2);
    if (kk >= k) return;  /* the launch rounds k up to whole work-groups */
    long j0 = q * {nr};
    __global const {c.storage} *s = b + (z * k + kk) * n + j0;
    __global {c.compute} *d = bp + ((z * Q + q) * k + kk) * {nr};
{full}{copy}
}}
"""
    )


def _pack_b_vector_source(c: CType, fp64: bool) -> str:
    return _pack_b_source(c, fp64, vector=True)


def _gemm_source(c: CType, fp64: bool, epilogue: Any = None) -> str:
    """The packed GEMM's source; ``epilogue`` (:class:`.gemm_epilogue.Epilogue`): each element of C goes through
    it (a fused chain) instead of being stored rounded."""
    mr, nr = BLOCKS[c.compute]
    vt = f"{c.compute}{nr}"
    rows = range(mr)
    out_type = epilogue.out_storage if epilogue is not None else c.storage
    extra = "".join(f", {p}" for p in epilogue.params) if epilogue is not None else ""
    lines = [
        prelude(fp64) + (epilogue.helper if epilogue is not None else ""),
        f"""
/* One MR x NR block of C per work-item: (panel of A, panel of B, output batch index). */
__kernel void gemm(__global const {c.compute} *ap, __global const {c.compute} *bp, __global {out_type} *out,
                   long m, long n, long k, long P, long Q, int nd, __global const long *meta{extra}) {{
    long p = get_global_id(0), q = get_global_id(1), z = get_global_id(2);
    long za = strided_offset(z, nd, meta, meta + nd), zb = strided_offset(z, nd, meta, meta + 2 * nd);
    __global const {c.compute} *A = ap + (za * P + p) * k * {mr};
    __global const {c.compute} *B = bp + (zb * Q + q) * k * {nr};
""",
    ]
    lines += [f"    {vt} c{r} = ({vt})(0);" for r in rows]
    lines.append(f"""    for (long kk = 0; kk < k; ++kk) {{
        {vt} bv = *(__global const {vt} *)(B + kk * {nr});
        __global const {c.compute} *a = A + kk * {mr};""")
    lines += [f"        c{r} += ({vt})(a[{r}]) * bv;" for r in rows]
    lines.append(f"""    }}
    long i0 = p * {mr}, j0 = q * {nr};
    long rows = min((long){mr}, m - i0), cols = min((long){nr}, n - j0);
    __global {out_type} *o = out + (z * m + i0) * n + j0;""")

    if epilogue is not None:  # the block through the epilogue in a loop: inlined per element, it bloated the kernel
        # an array of vectors, read element by element: PoCL 3 drops a kernel that vstore16s into a float array
        lines.append(f"    {vt} blocks[{mr}];")
        lines += [f"    blocks[{r}] = c{r};" for r in rows]
        lines.append(f"    const {c.compute} *block = (const {c.compute} *)blocks;")
        call = epilogue.call("(z * m + i0 + r) * n + j0 + jj", "i0 + r", "j0 + jj", f"block[r * {nr} + jj]")
        lines += [
            "    for (long r = 0; r < rows; ++r)",
            f"        for (long jj = 0; jj < cols; ++jj) {{ {call} }}",
            "}",
        ]
        return "\n".join(lines)
    for r in rows:
        full = " ".join(c.store("o", f"{r} * n + {j}", f"c{r}.s{j:x}") for j in range(nr))
        part = " ".join(f"if ({j} < cols) {{ {c.store('o', f'{r} * n + {j}', f'c{r}.s{j:x}')} }}" for j in range(nr))
        lines.append(
            f"    if ({r} < rows) {{\n        if (cols == {nr}) {{ {full} }}\n        else {{ {part} }}\n    }}"
        )
    lines.append("}")
    return "\n".join(lines)


def _direct_source(c: CType, fp64: bool, epilogue: Any = None) -> str:
    """The direct kernel's source; ``epilogue`` as for :func:`_gemm_source` (float operands only)."""
    out_type = epilogue.out_storage if epilogue is not None else c.storage
    extra = "".join(f", {p}" for p in epilogue.params) if epilogue is not None else ""
    if c.tag in _INTEGER:  # wrapping arithmetic, as NumPy's: unsigned in C (signed overflow is undefined there)
        acc, back = _INTEGER[c.tag]
        body = f"acc += ({acc})A[kk] * ({acc})B[kk * n];"
        store = f"out[(z * m + i) * n + j] = {back}(acc);"
    else:
        acc = c.compute
        body = f"acc += {c.load('A', 'kk')} * {c.load('B', 'kk * n')};"
        store = c.store("out", "(z * m + i) * n + j", "acc", value_type=acc)
        if epilogue is not None:
            store = epilogue.call("(z * m + i) * n + j", "i", "j", "acc")
    return (
        prelude(fp64)
        + (epilogue.helper if epilogue is not None else "")
        + f"""
/* One element of C per work-item, j fastest. */
__kernel void direct(__global const {c.storage} *a, __global const {c.storage} *b, __global {out_type} *out,
                     long m, long n, long k, int nd, __global const long *meta{extra}) {{
    long j = get_global_id(0), i = get_global_id(1), z = get_global_id(2);
    if (j >= n) return;  /* the launch rounds n up to whole work-groups */
    long za = strided_offset(z, nd, meta, meta + nd), zb = strided_offset(z, nd, meta, meta + 2 * nd);
    __global const {c.storage} *A = a + (za * m + i) * k;
    __global const {c.storage} *B = b + zb * k * n + j;
    {acc} acc = 0;
    for (long kk = 0; kk < k; ++kk) {{ {body} }}
    {store}
}}
"""
    )


# ----------------------------------------------------------------------------------------------- launch
def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def _kernel(
    state: Any,
    variant: str,
    c: CType,
    source: Callable[..., str],
    scalars: list[Any],
    name: str = "",
    epilogue: Any = None,
) -> Any:
    """The compiled kernel ``name`` (default: ``variant``) of ``source``, cached under ``variant`` (and the
    epilogue's key)."""
    key = ("matmul", c.tag, variant, BLOCKS.get(c.compute))  # the block is in the key so benchmarks may vary it
    if epilogue is None:
        return state.kernel(key, lambda: source(c, state.fp64), name or variant, scalars)
    scalars = scalars + [None] * len(epilogue.params)
    return state.kernel((*key, epilogue.key), lambda: source(c, state.fp64, epilogue), name or variant, scalars)


def _batch_meta(
    state: Any, a_batch: tuple[int, ...], b_batch: tuple[int, ...], batch: tuple[int, ...]
) -> tuple[int, Any]:
    """(nd, meta buffer) describing where output matrix z reads its A and B matrices (in matrix units)."""
    sa = broadcast_strides(a_batch, batch)
    sb = broadcast_strides(b_batch, batch)
    shape, (sa, sb) = collapse(batch, sa, sb)
    return len(shape), state.meta(shape + sa + sb)


class _Product(NamedTuple):
    """A batched product's sizes: ``z`` matrices of ``m x n`` over ``k``, batch layout ``nd``/``meta``."""

    m: int
    n: int
    k: int
    z: int
    nd: int
    meta: Any


def _packed(a: CLArray, b: CLArray, out: CLArray, g: _Product, epilogue: Any = None, extra: Sequence[Any] = ()) -> None:
    state, c = a.state, a.ctype
    m, n, k, z, nd, meta = g
    mr, nr = BLOCKS[c.compute]
    panels_a, panels_b = -(-m // mr), -(-n // nr)
    za, zb = math.prod(a.shape[:-2]), math.prod(b.shape[:-2])
    item = 8 if c.compute == "double" else 4
    ap = state.allocate(za * panels_a * mr * k * item)
    bp = state.allocate(zb * panels_b * nr * k * item)
    if k:
        pack_a = _kernel(state, "pack_a", c, _pack_a_source, [None, None, _I64, _I64, _I64])
        if c.tag == "f16" and state.platform in VECTOR_HALF_PACK_PLATFORMS:
            pack_b = _kernel(state, "pack_b_vector", c, _pack_b_vector_source, [None, None, _I64, _I64, _I64], "pack_b")
        else:
            pack_b = _kernel(state, "pack_b", c, _pack_b_source, [None, None, _I64, _I64, _I64])
        state.launch(pack_a, (_round_up(k, _ROW), panels_a, za), (_ROW, 1, 1), a.buffer, ap, m, k, panels_a)
        state.launch(pack_b, (_round_up(k, _ROW), panels_b, zb), (_ROW, 1, 1), b.buffer, bp, k, n, panels_b)
    scalars = [None, None, None, _I64, _I64, _I64, _I64, _I64, _I32, None]
    gemm = _kernel(state, "gemm", c, _gemm_source, scalars, epilogue=epilogue)
    # One work-item per work-group: PoCL's implicit vectoriser would otherwise try to widen the already
    # vectorised block across work-items (measured slower).
    state.launch(
        gemm, (panels_a, panels_b, z), (1, 1, 1), ap, bp, out.buffer, m, n, k, panels_a, panels_b, nd, meta, *extra
    )


def _direct(a: CLArray, b: CLArray, out: CLArray, g: _Product, epilogue: Any = None, extra: Sequence[Any] = ()) -> None:
    state = a.state
    m, n, k, z, nd, meta = g
    scalars = [None, None, None, _I64, _I64, _I64, _I32, None]
    kernel = _kernel(state, "direct", a.ctype, _direct_source, scalars, epilogue=epilogue)
    grid = (_round_up(n, _ROW), m, z)
    state.launch(kernel, grid, (_ROW, 1, 1), a.buffer, b.buffer, out.buffer, m, n, k, nd, meta, *extra)


def matmul(a: CLArray, b: CLArray) -> CLArray:
    """``a @ b`` for ``(..., m, k) @ (..., k, n)`` with broadcast batch dims (1-D operands as NumPy does).

    Floats accumulate in float32 (float16/bfloat16/float32, rounded once on
    output) or float64; int32/int64 wrap as NumPy's.  Raises TypeError for
    mixed or bool dtypes and ValueError for shapes that do not match.
    """
    a2, b2, batch, shape = operands(a, b)
    out = empty(a.state, batch + a2.shape[-2:-1] + b2.shape[-1:], a.dtype)
    if out.size:
        launch(a2, b2, out)
    return out.reshaped(shape)


def operands(a: CLArray, b: CLArray) -> tuple[CLArray, CLArray, tuple[int, ...], tuple[int, ...]]:
    """``(a, b)`` as batches of matrices (a 1-D operand as NumPy takes it), the output's batch shape and the
    result's shape; TypeError and ValueError as :func:`matmul` says."""
    if a.dtype != b.dtype:
        raise TypeError(f"matmul needs operands of one dtype, got {a.dtype.name} and {b.dtype.name}; cast first")
    if a.dtype == dt.bool_:
        raise TypeError("the opencl matmul does not take bool operands; cast them to a numeric dtype")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul needs operands with at least 1 dimension, got shapes {a.shape} and {b.shape}")
    a2 = a.reshaped((1,) + a.shape) if a.ndim == 1 else a
    b2 = b.reshaped(b.shape + (1,)) if b.ndim == 1 else b
    (m, k), (k2, n) = a2.shape[-2:], b2.shape[-2:]
    if k != k2:
        raise ValueError(f"matmul shapes {a.shape} and {b.shape} do not match: {k} != {k2} (inner dimensions)")
    try:
        batch = tuple(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
    except ValueError:
        raise ValueError(f"matmul batch dimensions of shapes {a.shape} and {b.shape} cannot be broadcast") from None
    shape = batch + ((m,) if a.ndim > 1 else ()) + ((n,) if b.ndim > 1 else ())
    return a2, b2, batch, shape


def launch(a: CLArray, b: CLArray, out: CLArray, epilogue: Any = None, extra: Sequence[Any] = ()) -> None:
    """Enqueue ``out = a @ b`` (batches of matrices, as :func:`operands` makes them; ``out`` not empty), each
    element through ``epilogue`` with the operand buffers ``extra`` where one is given."""
    (m, k), n = a.shape[-2:], b.shape[-1]
    batch = out.shape[:-2]
    nd, meta = _batch_meta(a.state, a.shape[:-2], b.shape[:-2], batch)
    small = m * n * k <= DIRECT_MAX_WORK or a.ctype.tag in _INTEGER
    (_direct if small else _packed)(a, b, out, _Product(m, n, k, math.prod(batch), nd, meta), epilogue, extra)


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels for the backend's table."""
    return {"matmul": matmul}
