"""Float8 kernels: ``quantize_float8`` in one pass, ``scaled_mm`` as scaled float32 operands on cuBLAS.

No ``cuda_fp8.h`` (the sources compile without include paths, like every kernel
here): the conversions are :func:`ampcore.cgen.float8_conversions`, integer
arithmetic bit-exact against ml_dtypes.  ``quantize_float8`` scales, clamps,
rounds and stores each element and folds ``|x|`` into the amax with an
``atomicMax`` on its bits (non-negative floats order as their bit patterns, and
NaN's bits are above inf's, so a NaN anywhere gives NaN).  ``scaled_mm``
multiplies each float8 operand by its scale into float32 (one rounding, as
torch's CPU ``_scaled_mm``), runs the float32 GEMM, and adds the bias while
rounding once to the output dtype.  Future work on sm_89+: the hardware
``cvt.rn.satfinite.e4m3x2.f32`` conversions and cuBLASLt's float8 GEMM (scales
applied to the accumulator).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt

from .array import CuArray, contiguous
from .codegen import PRELUDE, ctype
from .gemm import matmul
from .launch import BLOCK, raw_kernel
from .runtime import import_cupy

__all__ = ["kernels", "sources"]

_FORMAT = {dt.float8_e4m3fn: "e4m3", dt.float8_e5m2: "e5m2"}
# How a scale array indexes element i of a (rows, inner) view: one scale, scale[i / inner], scale[i % inner],
# or (any other broadcast, materialized) scale[i].
_PER_TENSOR, _PER_ROW, _PER_COLUMN, _PER_ELEMENT = 0, 1, 2, 3
_SCALE_INDEX = "(mode == 0 ? 0 : mode == 1 ? i / inner : mode == 2 ? i % inner : i)"


def _quantize_source(src: str, fmt: str) -> str:
    s = ctype(dt.as_dtype({"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[src]))
    return (
        PRELUDE
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
quantize_{src}_{fmt}(const {s.storage} *__restrict__ x, const float *__restrict__ scale,
                     unsigned char *__restrict__ q, unsigned int *__restrict__ amax_bits,
                     long long size, long long inner, int mode, int saturate) {{
    unsigned int local = 0u;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < size;
         i += (long long)gridDim.x * blockDim.x) {{
        float v = {s.load("x", "i")}, sc = scale[{_SCALE_INDEX}];
        float p = __fmul_rn(v, sc);
        /* A GPU's product with a NaN operand is the canonical NaN (sign cleared); the contract's reference, a
           CPU's, keeps the NaN operand's sign, so take it from the operand. */
        if (p != p) p = v != v ? v : sc;
        q[i] = float_to_{fmt}(p, saturate);
        unsigned int m = __float_as_uint(v) & 0x7fffffffu;
        local = m > local ? m : local;
    }}
    atomicMax(amax_bits, local);
}}
"""
    )


def _dequantize_source(fmt: str) -> str:
    load = cgen.load(f"f8{fmt}", "x", "i")
    return (
        PRELUDE
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
dequantize_{fmt}(const unsigned char *__restrict__ x, const float *__restrict__ scale, float *__restrict__ out,
                 long long size, long long inner, int mode) {{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < size;
         i += (long long)gridDim.x * blockDim.x) {{
        out[i] = __fmul_rn({load}, scale[{_SCALE_INDEX}]);
    }}
}}
"""
    )


def _finish_source(bias: str, out: str) -> str:
    """float32 accumulator (+ bias along the last axis, in float32) rounded once to the output dtype."""
    o = ctype(dt.as_dtype({"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[out]))
    if bias == "none":
        value, params = "acc[i]", ""
    else:
        b = ctype(dt.as_dtype({"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[bias]))
        value, params = f"__fadd_rn(acc[i], {b.load('bias', 'i % n')})", f"const {b.storage} *__restrict__ bias, "
    return (
        PRELUDE
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
finish_{bias}_{out}(const float *__restrict__ acc, {params}{o.storage} *__restrict__ out,
                   long long size, long long n) {{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < size;
         i += (long long)gridDim.x * blockDim.x) {{
        {o.store("out", "i", value)}
    }}
}}
"""
    )


_WIDE = ("f32", "f16", "bf16")


def sources() -> dict[str, str]:
    """Every kernel source of this family, by kernel name."""
    out = {f"quantize_{s}_{f}": _quantize_source(s, f) for s in _WIDE for f in ("e4m3", "e5m2")}
    out.update({f"dequantize_{f}": _dequantize_source(f) for f in ("e4m3", "e5m2")})
    out.update({f"finish_{b}_{o}": _finish_source(b, o) for b in ("none", *_WIDE) for o in _WIDE})
    return out


def _grid(size: int) -> tuple[int]:
    return (max(1, min(-(-size // BLOCK), 65535 * 8)),)


def _scale_mode(scale: CuArray, shape: tuple[int, ...]) -> tuple[Any, int, int]:
    """(scale data, mode, inner) for a scale that broadcasts onto ``shape``: per tensor, per row (one scale
    per index of the leading axes), per column (one per index of the last axis), else materialized."""
    inner = shape[-1] if shape else 1
    padded = (1,) * (len(shape) - scale.ndim) + scale.shape
    if scale.size == 1:
        return contiguous(scale.data), _PER_TENSOR, inner
    if padded[:-1] == shape[:-1] and padded[-1] == 1:
        return contiguous(scale.data), _PER_ROW, inner
    if all(n == 1 for n in padded[:-1]) and padded[-1] == inner:
        return contiguous(scale.data), _PER_COLUMN, inner
    full = import_cupy().broadcast_to(scale.data.reshape(padded), shape)
    return contiguous(full), _PER_ELEMENT, inner


def quantize_float8(x: CuArray, scale: CuArray, dtype: Any, saturate: bool) -> tuple[CuArray, CuArray]:
    """``(cast(x * scale, dtype), max|x|)`` in one pass; see the kernel contract in ``ampcore.kernels``."""
    cupy = import_cupy()
    src, fmt = ctype(x.dtype).tag, _FORMAT[dtype]
    with cupy.cuda.Device(x.device_index):
        scales, mode, inner = _scale_mode(scale, x.shape)
        data = contiguous(x.data)
        q = cupy.empty(x.shape, dtype=np.uint8)
        amax = cupy.zeros((), dtype=np.uint32)
        if x.size:
            kernel = raw_kernel(("quantize", src, fmt), lambda: _quantize_source(src, fmt), f"quantize_{src}_{fmt}")
            args = (data, scales, q, amax, np.int64(x.size), np.int64(inner))
            kernel(_grid(x.size), (BLOCK,), (*args, np.int32(mode), np.int32(bool(saturate))))
        return CuArray(q, dtype), CuArray(amax.view(np.float32), dt.float32)


def _dequantize(x: CuArray, scale: CuArray) -> CuArray:
    cupy = import_cupy()
    fmt = _FORMAT[x.dtype]
    scales, mode, inner = _scale_mode(scale, x.shape)
    out = cupy.empty(x.shape, dtype=np.float32)
    if x.size:
        kernel = raw_kernel(("dequantize", fmt), lambda: _dequantize_source(fmt), f"dequantize_{fmt}")
        args = (contiguous(x.data), scales, out, np.int64(x.size), np.int64(inner), np.int32(mode))
        kernel(_grid(x.size), (BLOCK,), args)
    return CuArray(out, dt.float32)


def scaled_mm(
    a: CuArray,
    b: CuArray,
    scale_a: CuArray,
    scale_b: CuArray,
    out_dtype: Any,
    bias: CuArray | None,
    use_fast_accum: bool,
) -> CuArray:
    """``(a * scale_a) @ (b * scale_b) + bias`` with float32 products and accumulation, rounded once."""
    cupy = import_cupy()
    with cupy.cuda.Device(a.device_index):
        acc = matmul(_dequantize(a, scale_a), _dequantize(b, scale_b))
        out_tag = ctype(out_dtype).tag
        bias_tag = "none" if bias is None else ctype(bias.dtype).tag
        out = cupy.empty(acc.shape, dtype=ctype(out_dtype).cupy_dtype)
        if acc.size:
            name = f"finish_{bias_tag}_{out_tag}"
            kernel = raw_kernel(("finish", bias_tag, out_tag), lambda: _finish_source(bias_tag, out_tag), name)
            extra = () if bias is None else (contiguous(bias.data),)
            n = np.int64(acc.shape[-1])
            kernel(_grid(acc.size), (BLOCK,), (contiguous(acc.data), *extra, out, np.int64(acc.size), n))
        return CuArray(out, out_dtype)


def kernels() -> dict[str, Callable[..., Any]]:
    return {"quantize_float8": quantize_float8, "scaled_mm": scaled_mm}
