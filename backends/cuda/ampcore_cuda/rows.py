"""What the row kernels (softmax, layer-norm, cross-entropy) share: the accumulator types, a block-wide
reduction, and how a row along any axis is addressed.

One block reduces and writes one row.  A row is the ``n`` elements along the
reduced axis; with ``inner`` the product of the dimensions after it, row ``o``
starts at ``(o / inner) * n * inner + o % inner`` and steps by ``inner``
(``inner == 1``, the last axis, is the coalesced case).
"""

from __future__ import annotations

from typing import Any

from ampcore import cgen

from .codegen import CType

__all__ = ["ROW_BLOCK", "acc_type", "reduce_helpers", "row_geometry", "row_block", "launch_rows"]

ROW_BLOCK = 256  # threads per row block; a power of two >= 32 (the reduction below relies on it)


def acc_type(c: CType) -> str:
    return "double" if c.tag == "f64" else "float"


def reduce_helpers(acc: str) -> str:
    """``ACC``, ``NEG_INF``, ``nan_max`` (NumPy's maximum: NaN wins) and ``block_reduce`` for ``acc``.

    ``block_reduce`` returns the block's sum (or NaN-propagating max) to every
    thread: warp shuffles, then one warp over the per-warp results.  No
    ``INFINITY`` macro: NVRTC compiles without math.h.
    """
    neg_inf = "__longlong_as_double(0xfff0000000000000LL)" if acc == "double" else "__int_as_float(0xff800000)"
    return f"""
typedef {acc} ACC;
#define NEG_INF ({neg_inf})
{cgen.ROW_BASE}{cgen.nan_max(cgen.CUDA)}__device__ __forceinline__ ACC warp_reduce(ACC v, bool is_max) {{
    for (int o = 16; o > 0; o >>= 1) {{
        ACC w = __shfl_down_sync(0xffffffffu, v, o);
        v = is_max ? nan_max(v, w) : v + w;
    }}
    return v;
}}
__device__ ACC block_reduce(ACC v, bool is_max) {{
    __shared__ ACC partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = warp_reduce(v, is_max);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {{
        v = lane < warps ? partial[lane] : (is_max ? NEG_INF : (ACC)0);
        v = warp_reduce(v, is_max);
        if (lane == 0) partial[0] = v;
    }}
    __syncthreads();
    const ACC r = partial[0];
    __syncthreads();  /* partial is reused by the next reduction */
    return r;
}}
"""


row_geometry = cgen.row_geometry


def row_block(n: int) -> int:
    """Threads per row block: ROW_BLOCK, halved while half of it still covers the row (at least a warp)."""
    return cgen.fit_group_size(n, ROW_BLOCK, 32)


def launch_rows(kernel: Any, rows: int, n: int, args: tuple) -> None:
    """One block per row (grid.x holds 2^31 - 1 rows: more than any tensor here)."""
    kernel((rows,), (row_block(n),), args)
