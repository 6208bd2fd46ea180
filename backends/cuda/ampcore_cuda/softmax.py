"""Fused softmax / log_softmax and their backward kernels: one block per row, float32 accumulation (float64 for
float64), each output rounded once.  A row of -inf, or with a NaN, gives NaN, as on the cpu backend.

The four kernels share one template and differ in two C expressions:
``term`` (what the row sums: ``exp(x - m)``, ``g * y`` or ``g``) and
``result`` (each output from the element, the row max ``M`` and sum ``S``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import cgen

from .array import CuArray, contiguous
from .codegen import FLOAT_CTYPES, PRELUDE, CType, ctype
from .launch import raw_kernel
from .rows import ROW_BLOCK, acc_type, launch_rows, reduce_helpers, row_geometry
from .runtime import import_cupy

__all__ = ["sources", "softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "kernels"]

# name: (needs the row max, term summed, result)  -- X is x (or y), G is gy, M the max, S the sum.
_OPS = cgen.SOFTMAX_OPS


def _source(op: str, c: CType) -> str:
    needs_max, term, result = _OPS[op]
    acc = acc_type(c)
    load_g = c.load("gy", "e") if op.endswith("_backward") else "0"
    max_pass = (
        f"""    M = NEG_INF;
    for (long long r = threadIdx.x; r < n; r += blockDim.x) M = nan_max(M, (ACC){c.load("x", "base + r * inner")});
    M = block_reduce(M, true);
"""
        if needs_max
        else ""
    )
    return (
        PRELUDE
        + reduce_helpers(acc)
        + f"""
__device__ __forceinline__ ACC term_of(ACC X, ACC G, ACC M) {{ return {term}; }}
__device__ __forceinline__ ACC result_of(ACC X, ACC G, ACC M, ACC S) {{ return {result}; }}

extern "C" __global__ void __launch_bounds__({ROW_BLOCK})
{op}_{c.tag}(const {c.storage} *__restrict__ x, const {c.storage} *__restrict__ gy, {c.storage} *__restrict__ out,
        long long n, long long inner) {{
    const long long base = ROW_BASE((long long)blockIdx.x);
    ACC M = 0;
{max_pass}    ACC S = 0;
    for (long long r = threadIdx.x; r < n; r += blockDim.x) {{
        const long long e = base + r * inner;
        S += term_of((ACC){c.load("x", "e")}, (ACC)({load_g}), M);
    }}
    S = block_reduce(S, false);
    for (long long r = threadIdx.x; r < n; r += blockDim.x) {{
        const long long e = base + r * inner;
        const ACC v = result_of((ACC){c.load("x", "e")}, (ACC)({load_g}), M, S);
        {c.store("out", "e", "v")}
    }}
}}
"""
    )


def sources() -> dict[str, str]:
    """Every kernel source of this family, by kernel name."""
    return {f"{op}_{c.tag}": _source(op, c) for op in _OPS for c in FLOAT_CTYPES}


def _run(op: str, x: CuArray, gy: CuArray | None, axis: int) -> CuArray:
    if gy is not None and (gy.shape != x.shape or gy.dtype != x.dtype):
        raise ValueError(f"{op}: gy {gy.shape} {gy.dtype.name} must match y {x.shape} {x.dtype.name}")
    cupy = import_cupy()
    c = ctype(x.dtype)
    with cupy.cuda.Device(x.device_index):
        out = cupy.empty(x.shape, dtype=c.cupy_dtype)  # C order: empty_like keeps a transposed layout
        rows, n, inner = row_geometry(x.shape, axis)
        if rows:
            src, g = contiguous(x.data), contiguous((x if gy is None else gy).data)
            kernel = raw_kernel(("softmax", op, c.tag), lambda: _source(op, c), f"{op}_{c.tag}")
            launch_rows(kernel, rows, n, (src, g, out, np.int64(n), np.int64(inner)))
    return CuArray(out, x.dtype)


def softmax(x: CuArray, axis: int) -> CuArray:
    """exp(x - max) / sum(exp(x - max)) along ``axis``."""
    return _run("softmax", x, None, axis)


def log_softmax(x: CuArray, axis: int) -> CuArray:
    """(x - max) - log(sum(exp(x - max))) along ``axis``."""
    return _run("log_softmax", x, None, axis)


def softmax_backward(y: CuArray, gy: CuArray, axis: int) -> CuArray:
    """y * (gy - sum(gy * y)) along ``axis``, ``y`` the softmax output."""
    return _run("softmax_backward", y, gy, axis)


def log_softmax_backward(y: CuArray, gy: CuArray, axis: int) -> CuArray:
    """gy - exp(y) * sum(gy) along ``axis``, ``y`` the log_softmax output."""
    return _run("log_softmax_backward", y, gy, axis)


def kernels() -> dict[str, Callable[..., Any]]:
    """The fused softmax family by contract name."""
    return {
        "softmax": softmax,
        "log_softmax": log_softmax,
        "softmax_backward": softmax_backward,
        "log_softmax_backward": log_softmax_backward,
    }
