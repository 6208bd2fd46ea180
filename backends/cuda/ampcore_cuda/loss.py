"""Fused cross-entropy over class logits ``(rows, C)`` with int64 targets: forward (per-row loss and the
log-sum-exp it keeps for the backward) and backward (``gy * (softmax - onehot)``), one block per row.
Not in ampcore's kernel contract (``ampcore.kernels.FUSED``), so not registered; compile-checked with the rest.

A target outside ``[0, C)`` that is not ``ignore_index`` sets a device flag
instead of raising: the core reads it with its deferred checks (no host sync
here).  Ignored rows have loss 0 and gradient 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .array import CuArray, contiguous
from .codegen import FLOAT_CTYPES, PRELUDE, CType, ctype
from .launch import raw_kernel
from .rows import ROW_BLOCK, acc_type, launch_rows, reduce_helpers
from .runtime import import_cupy

__all__ = ["sources", "cross_entropy", "cross_entropy_backward"]


def _forward(c: CType) -> str:
    return (
        PRELUDE
        + reduce_helpers(acc_type(c))
        + f"""
extern "C" __global__ void __launch_bounds__({ROW_BLOCK})
cross_entropy_{c.tag}(const {c.storage} *__restrict__ x, const long long *__restrict__ target,
        ACC *__restrict__ loss, ACC *__restrict__ lse_out, int *__restrict__ bad_target, long long n,
        long long ignore_index) {{
    const long long base = (long long)blockIdx.x * n;
    const long long t = target[blockIdx.x];
    ACC M = NEG_INF;
    for (long long r = threadIdx.x; r < n; r += blockDim.x) M = nan_max(M, (ACC){c.load("x", "base + r")});
    M = block_reduce(M, true);
    ACC S = 0;
    for (long long r = threadIdx.x; r < n; r += blockDim.x) S += exp((ACC){c.load("x", "base + r")} - M);
    const ACC lse = M + log(block_reduce(S, false));
    if (threadIdx.x != 0) return;
    lse_out[blockIdx.x] = lse;
    if (t == ignore_index) {{ loss[blockIdx.x] = 0; return; }}
    if (t < 0 || t >= n) {{ bad_target[0] = 1; loss[blockIdx.x] = 0; return; }}
    loss[blockIdx.x] = lse - (ACC){c.load("x", "base + t")};
}}
"""
    )


def _backward(c: CType) -> str:
    return (
        PRELUDE
        + reduce_helpers(acc_type(c))
        + f"""
extern "C" __global__ void __launch_bounds__({ROW_BLOCK})
cross_entropy_backward_{c.tag}(const {c.storage} *__restrict__ x, const long long *__restrict__ target,
        const ACC *__restrict__ lse_in, const ACC *__restrict__ gy, {c.storage} *__restrict__ gx, long long n,
        long long ignore_index) {{
    const long long base = (long long)blockIdx.x * n;
    const long long t = target[blockIdx.x];
    const bool skip = t == ignore_index || t < 0 || t >= n;
    const ACC lse = lse_in[blockIdx.x], g = gy[blockIdx.x];
    for (long long r = threadIdx.x; r < n; r += blockDim.x) {{
        const ACC p = exp((ACC){c.load("x", "base + r")} - lse);
        const ACC v = skip ? (ACC)0 : g * (p - (r == t ? (ACC)1 : (ACC)0));
        {c.store("gx", "base + r", "v")}
    }}
}}
"""
    )


def sources() -> dict[str, str]:
    """Every kernel source of this family, by kernel name."""
    out: dict[str, str] = {}
    for c in FLOAT_CTYPES:
        out[f"cross_entropy_{c.tag}"] = _forward(c)
        out[f"cross_entropy_backward_{c.tag}"] = _backward(c)
    return out


def _acc_np(c: CType) -> Any:
    return np.float64 if c.tag == "f64" else np.float32


def cross_entropy(logits: CuArray, target: CuArray, ignore_index: int = -100) -> tuple[Any, Any, Any]:
    """Per-row loss, log-sum-exp (CuPy float32, float64 for float64 logits) and a CuPy int32 flag set to 1 if a
    target was out of range, for ``(rows, C)`` logits and ``(rows,)`` integer targets (read as int64: the kernel
    takes ``const long long *``)."""
    cupy, c = import_cupy(), ctype(logits.dtype)
    rows, n = logits.shape
    with cupy.cuda.Device(logits.device_index):
        loss, lse = cupy.empty(rows, _acc_np(c)), cupy.empty(rows, _acc_np(c))
        bad = cupy.zeros(1, np.int32)
        if rows:
            kernel = raw_kernel(("cross_entropy", c.tag), lambda: _forward(c), f"cross_entropy_{c.tag}")
            targets = contiguous(target.data, dtype=np.int64)
            launch_rows(
                kernel, rows, n, (contiguous(logits.data), targets, loss, lse, bad, np.int64(n), np.int64(ignore_index))
            )
    return loss, lse, bad


def cross_entropy_backward(logits: CuArray, target: CuArray, lse: Any, gy: Any, ignore_index: int = -100) -> CuArray:
    """The logits' gradient ``gy[row] * (softmax - onehot(target))``, rounded once to the logits' dtype."""
    cupy, c = import_cupy(), ctype(logits.dtype)
    rows, n = logits.shape
    with cupy.cuda.Device(logits.device_index):
        xs = contiguous(logits.data)
        gx = cupy.empty_like(xs)
        if rows:
            kernel = raw_kernel(
                ("cross_entropy_backward", c.tag), lambda: _backward(c), f"cross_entropy_backward_{c.tag}"
            )
            launch_rows(
                kernel,
                rows,
                n,
                (
                    xs,
                    contiguous(target.data, dtype=np.int64),
                    lse,
                    contiguous(gy, dtype=_acc_np(c)),
                    gx,
                    np.int64(n),
                    np.int64(ignore_index),
                ),
            )
    return CuArray(gx, logits.dtype)
