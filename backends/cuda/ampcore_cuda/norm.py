"""Fused layer-norm over the trailing ``n`` elements of each row: forward, input gradient, and the weight/bias
gradients.  Not in ampcore's kernel contract (``ampcore.kernels.FUSED``), so not registered: the launchers are
here for when the contract gains ``layer_norm``; the sources are compile-checked with the rest.

Forward, per row: mean and variance by two block reductions (float32, float64
for float64; the two-pass variance does not cancel), ``rstd = 1 / sqrt(var +
eps)`` correctly rounded, ``y = (x - mean) * rstd * w + b`` rounded once.
Backward, per row: ``gx = rstd * (gxh - mean(gxh) - xh * mean(gxh * xh))`` with
``xh = (x - mean) * rstd`` and ``gxh = gy * w``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .array import CuArray, contiguous
from .codegen import FLOAT_CTYPES, PRELUDE, CType, ctype
from .launch import BLOCK, raw_kernel
from .rows import ROW_BLOCK, acc_type, launch_rows, reduce_helpers
from .runtime import import_cupy

__all__ = ["sources", "layer_norm", "layer_norm_backward"]


def _affine_params(c: CType) -> str:
    return f"const {c.storage} *__restrict__ w, const {c.storage} *__restrict__ b, int affine"


def _forward(c: CType) -> str:
    w, b = c.load("w", "r"), c.load("b", "r")
    return (
        PRELUDE
        + reduce_helpers(acc_type(c))
        + f"""
extern "C" __global__ void __launch_bounds__({ROW_BLOCK})
layer_norm_{c.tag}(const {c.storage} *__restrict__ x, {_affine_params(c)}, {c.storage} *__restrict__ y,
        ACC *__restrict__ mean_out, ACC *__restrict__ rstd_out, long long n, ACC eps) {{
    const long long base = (long long)blockIdx.x * n;
    ACC s = 0;
    for (long long r = threadIdx.x; r < n; r += blockDim.x) s += (ACC){c.load("x", "base + r")};
    const ACC mean = block_reduce(s, false) / (ACC)n;
    ACC q = 0;
    for (long long r = threadIdx.x; r < n; r += blockDim.x) {{
        const ACC d = (ACC){c.load("x", "base + r")} - mean;
        q += d * d;
    }}
    const ACC rstd = (ACC)1 / sqrt(block_reduce(q, false) / (ACC)n + eps);
    for (long long r = threadIdx.x; r < n; r += blockDim.x) {{
        ACC v = ((ACC){c.load("x", "base + r")} - mean) * rstd;
        if (affine) v = v * (ACC){w} + (ACC){b};
        {c.store("y", "base + r", "v")}
    }}
    if (threadIdx.x == 0) {{ mean_out[blockIdx.x] = mean; rstd_out[blockIdx.x] = rstd; }}
}}
"""
    )


def _backward(c: CType) -> str:
    return (
        PRELUDE
        + reduce_helpers(acc_type(c))
        + f"""
extern "C" __global__ void __launch_bounds__({ROW_BLOCK})
layer_norm_backward_{c.tag}(const {c.storage} *__restrict__ x, const {c.storage} *__restrict__ gy,
        const {c.storage} *__restrict__ w, int affine, const ACC *__restrict__ mean_in,
        const ACC *__restrict__ rstd_in, {c.storage} *__restrict__ gx, long long n) {{
    const long long base = (long long)blockIdx.x * n;
    const ACC mean = mean_in[blockIdx.x], rstd = rstd_in[blockIdx.x];
    ACC s1 = 0, s2 = 0;
    for (long long r = threadIdx.x; r < n; r += blockDim.x) {{
        const ACC xh = ((ACC){c.load("x", "base + r")} - mean) * rstd;
        const ACC g = (ACC){c.load("gy", "base + r")} * (affine ? (ACC){c.load("w", "r")} : (ACC)1);
        s1 += g;
        s2 += g * xh;
    }}
    const ACC m1 = block_reduce(s1, false) / (ACC)n, m2 = block_reduce(s2, false) / (ACC)n;
    for (long long r = threadIdx.x; r < n; r += blockDim.x) {{
        const ACC xh = ((ACC){c.load("x", "base + r")} - mean) * rstd;
        const ACC g = (ACC){c.load("gy", "base + r")} * (affine ? (ACC){c.load("w", "r")} : (ACC)1);
        const ACC v = rstd * ((g - m1) - xh * m2);
        {c.store("gx", "base + r", "v")}
    }}
}}
"""
    )


def _params_backward(c: CType) -> str:
    acc = acc_type(c)
    return (
        PRELUDE
        + f"""
/* gw[j] = sum_rows gy * xh, gb[j] = sum_rows gy: one thread per column, rows read coalesced across threads. */
extern "C" __global__ void __launch_bounds__({BLOCK})
layer_norm_backward_params_{c.tag}(const {c.storage} *__restrict__ x, const {c.storage} *__restrict__ gy,
        const {acc} *__restrict__ mean_in, const {acc} *__restrict__ rstd_in, {c.storage} *__restrict__ gw,
        {c.storage} *__restrict__ gb, long long rows, long long n) {{
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= n) return;
    {acc} sw = 0, sb = 0;
    for (long long r = 0; r < rows; ++r) {{
        const {acc} g = ({acc}){c.load("gy", "r * n + j")};
        sw += g * ((({acc}){c.load("x", "r * n + j")} - mean_in[r]) * rstd_in[r]);
        sb += g;
    }}
    {c.store("gw", "j", "sw")}
    {c.store("gb", "j", "sb")}
}}
"""
    )


def sources() -> dict[str, str]:
    """Every kernel source of this family, by kernel name."""
    out: dict[str, str] = {}
    for c in FLOAT_CTYPES:
        out[f"layer_norm_{c.tag}"] = _forward(c)
        out[f"layer_norm_backward_{c.tag}"] = _backward(c)
        out[f"layer_norm_backward_params_{c.tag}"] = _params_backward(c)
    return out


def _acc_np(c: CType) -> Any:
    return np.float64 if c.tag == "f64" else np.float32


def layer_norm(
    x: CuArray, weight: CuArray | None, bias: CuArray | None, n: int, eps: float
) -> tuple[CuArray, Any, Any]:
    """Normalise each row of ``n`` trailing elements; returns ``y`` and the CuPy ``mean``/``rstd`` per row
    (float32, float64 for float64) that :func:`layer_norm_backward` takes."""
    if (weight is None) != (bias is None):
        raise ValueError("layer_norm: give both weight and bias, or neither")
    cupy, c = import_cupy(), ctype(x.dtype)
    rows = x.size // n if n else 0
    with cupy.cuda.Device(x.device_index):
        src = contiguous(x.data)
        y, mean, rstd = cupy.empty_like(src), cupy.empty(rows, _acc_np(c)), cupy.empty(rows, _acc_np(c))
        if rows:
            w, b = (
                (src, src)
                if weight is None
                else (
                    contiguous(weight.data),  # the kernel indexes w[r]
                    contiguous(bias.data),
                )
            )  # type: ignore[union-attr]
            kernel = raw_kernel(("layer_norm", c.tag), lambda: _forward(c), f"layer_norm_{c.tag}")
            launch_rows(
                kernel, rows, n, (src, w, b, np.int32(weight is not None), y, mean, rstd, np.int64(n), _acc_np(c)(eps))
            )
    return CuArray(y, x.dtype), mean, rstd


def layer_norm_backward(
    x: CuArray, gy: CuArray, weight: CuArray | None, mean: Any, rstd: Any, n: int
) -> tuple[CuArray, CuArray | None, CuArray | None]:
    """``(gx, gw, gb)`` of :func:`layer_norm` (``gw``/``gb`` None without a weight)."""
    cupy, c = import_cupy(), ctype(x.dtype)
    rows = x.size // n if n else 0
    with cupy.cuda.Device(x.device_index):
        xs, gys = contiguous(x.data), contiguous(gy.data)
        gx = cupy.empty_like(xs)
        w = xs if weight is None else contiguous(weight.data)
        if rows:
            kernel = raw_kernel(("layer_norm_backward", c.tag), lambda: _backward(c), f"layer_norm_backward_{c.tag}")
            launch_rows(kernel, rows, n, (xs, gys, w, np.int32(weight is not None), mean, rstd, gx, np.int64(n)))
        if weight is None:
            return CuArray(gx, x.dtype), None, None
        gw, gb = cupy.empty(n, c.cupy_dtype), cupy.empty(n, c.cupy_dtype)
        kernel = raw_kernel(
            ("layer_norm_backward_params", c.tag), lambda: _params_backward(c), f"layer_norm_backward_params_{c.tag}"
        )
        kernel((-(-n // BLOCK),), (BLOCK,), (xs, gys, mean, rstd, gw, gb, np.int64(rows), np.int64(n)))
    return CuArray(gx, x.dtype), CuArray(gw, x.dtype), CuArray(gb, x.dtype)
