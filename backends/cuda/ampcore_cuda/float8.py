"""Float8 kernels: ``quantize_float8`` in one pass, ``scaled_mm`` on float16 tensor cores.

No ``cuda_fp8.h`` (the sources compile without include paths, like every kernel
here): the conversions are :func:`ampcore.cgen.float8_conversions`, integer
arithmetic bit-exact against ml_dtypes.  ``quantize_float8`` scales, clamps,
rounds and stores each element and folds ``|x|`` into the amax with an
``atomicMax`` on its bits (non-negative floats order as their bit patterns, and
NaN's bits are above inf's, so a NaN anywhere gives NaN).

``scaled_mm``: float8 operands widened exactly to float16, multiplied on tensor
cores with float32 accumulation; scales applied to the accumulator.  Every
e4m3fn and e5m2 value (subnormals, max, e5m2's inf, NaN with its sign) is a
float16 value, so the widening is exact; a product of two float16 values is
exact in float32, so one ``gemmStridedBatchedEx`` (A, B ``CUDA_R_16F``, C
``CUDA_R_32F``, ``CUBLAS_COMPUTE_32F``) gives the float32 accumulator of the
unscaled operands.  A finish kernel multiplies it by ``scale_a`` (per tensor or
per row) and ``scale_b`` (per tensor or per column), adds the bias in float32
and rounds once to the output dtype.  The contract's reference scales the
operands before the product instead; the two differ by float32 rounding only
(the kernel contract in :mod:`ampcore.kernels` allows it).  A scale that varies
along K cannot be applied to the accumulator: such a call scales the operands
into float32 and runs a float32 GEMM, as the reference does.  No float8
hardware instruction is used (``Capabilities.float8`` is ``"emulated"``);
future work on sm_89+: the ``cvt.rn.satfinite.e4m3x2.f32`` conversions and
cuBLASLt's float8 GEMM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt

from .array import CuArray, contiguous
from .codegen import PRELUDE, ctype
from .gemm import gemm_ex, matmul
from .launch import BLOCK, raw_kernel
from .runtime import import_cupy

__all__ = ["kernels", "sources"]

_FORMAT = {dt.float8_e4m3fn: "e4m3", dt.float8_e5m2: "e5m2"}
# How a scale array indexes element i of a (rows, inner) view: one scale, scale[i / inner], scale[i % inner],
# or (any other broadcast, materialized) scale[i].
_PER_TENSOR, _PER_ROW, _PER_COLUMN, _PER_ELEMENT = 0, 1, 2, 3
_SCALE_INDEX = "({mode} == 0 ? 0 : {mode} == 1 ? i / inner : {mode} == 2 ? i % inner : i)"


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
        float v = {s.load("x", "i")}, sc = scale[{_SCALE_INDEX.format(mode="mode")}];
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
        out[i] = __fmul_rn({load}, scale[{_SCALE_INDEX.format(mode="mode")}]);
    }}
}}
"""
    )


def _widen_source(fmt: str) -> str:
    """float8 to float16, exactly: every e4m3fn and e5m2 value is a float16 value (NaN stays a NaN, the sign of
    zero, inf and NaN kept), so the one rounding of the float16 store never rounds."""
    h = ctype(dt.float16)
    load = cgen.load(f"f8{fmt}", "x", "i")
    return (
        PRELUDE
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
widen_{fmt}(const unsigned char *__restrict__ x, {h.storage} *__restrict__ out, long long size) {{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < size;
         i += (long long)gridDim.x * blockDim.x) {{
        {h.store("out", "i", load)}
    }}
}}
"""
    )


def _finish_source(bias: str, out: str) -> str:
    """The (rows, n) float32 accumulator times ``scale_a`` (mode 0: per tensor, 1: per row) and ``scale_b``
    (mode 0: per tensor, 2: per column), in float32, plus the bias along the last axis in float32, rounded once
    to the output dtype."""
    o = ctype(dt.as_dtype({"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[out]))
    if bias == "none":
        value, params = "v", ""
    else:
        b = ctype(dt.as_dtype({"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[bias]))
        value, params = f"__fadd_rn(v, {b.load('bias', 'i % inner')})", f"const {b.storage} *__restrict__ bias, "
    index_a, index_b = _SCALE_INDEX.format(mode="mode_a"), _SCALE_INDEX.format(mode="mode_b")
    return (
        PRELUDE
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
finish_{bias}_{out}(const float *__restrict__ acc, const float *__restrict__ scale_a,
                   const float *__restrict__ scale_b, {params}{o.storage} *__restrict__ out,
                   long long size, long long inner, int mode_a, int mode_b) {{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < size;
         i += (long long)gridDim.x * blockDim.x) {{
        float v = __fmul_rn(__fmul_rn(acc[i], scale_a[{index_a}]), scale_b[{index_b}]);
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
    out.update({f"widen_{f}": _widen_source(f) for f in ("e4m3", "e5m2")})
    out.update({f"finish_{b}_{o}": _finish_source(b, o) for b in ("none", *_WIDE) for o in _WIDE})
    return out


def _grid(size: int) -> tuple[int]:
    return (max(1, min(-(-size // BLOCK), 65535 * 8)),)


def _layout(scale: CuArray, shape: tuple[int, ...]) -> int:
    """How a scale broadcasts onto ``shape``: per tensor, per row (one scale per index of the leading axes),
    per column (one per index of the last axis), else per element (materialized by :func:`_scale_mode`)."""
    padded = (1,) * (len(shape) - scale.ndim) + scale.shape
    if scale.size == 1:
        return _PER_TENSOR
    if padded[:-1] == shape[:-1] and padded[-1] == 1:
        return _PER_ROW
    if all(n == 1 for n in padded[:-1]) and padded[-1] == (shape[-1] if shape else 1):
        return _PER_COLUMN
    return _PER_ELEMENT


def _scale_mode(scale: CuArray, shape: tuple[int, ...]) -> tuple[Any, int, int]:
    """(scale data, mode, inner) for a scale that broadcasts onto ``shape`` (see :func:`_layout`)."""
    inner = shape[-1] if shape else 1
    mode = _layout(scale, shape)
    if mode != _PER_ELEMENT:
        return contiguous(scale.data), mode, inner
    padded = (1,) * (len(shape) - scale.ndim) + scale.shape
    return contiguous(import_cupy().broadcast_to(scale.data.reshape(padded), shape)), _PER_ELEMENT, inner


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
    """``(a * scale_a) @ (b * scale_b) + bias`` with float32 accumulation, rounded once: on float16 tensor
    cores with the scales applied to the accumulator (see the module docstring)."""
    cupy = import_cupy()
    with cupy.cuda.Device(a.device_index):
        mode_a, mode_b = _layout(scale_a, a.shape), _layout(scale_b, b.shape)
        if mode_a in (_PER_TENSOR, _PER_ROW) and mode_b in (_PER_TENSOR, _PER_COLUMN):
            acc = _widened_product(a, b)
            scales = (contiguous(scale_a.data), contiguous(scale_b.data))
        else:
            # A scale varying along K (a per-column scale_a, a per-row scale_b, any per-element one) does not
            # factor out of the sum: scale the operands into float32 and run a float32 GEMM, as the reference.
            acc = matmul(_dequantize(a, scale_a), _dequantize(b, scale_b))
            one = cupy.ones((), dtype=np.float32)
            scales, mode_a, mode_b = (one, one), _PER_TENSOR, _PER_TENSOR  # x * 1 * 1 is x, NaN and inf too
        return _finish(acc, scales, (mode_a, mode_b), out_dtype, bias)


def _widen(x: CuArray) -> CuArray:
    """``x`` as float16, exactly; a transposed view (Float8Linear's ``weight.t()``) stays one, over widened
    storage, so that gemm_ex hands it to cuBLAS as CUBLAS_OP_T instead of a row-major copy being made first."""
    if x.data.ndim == 2 and not x.data.flags.c_contiguous and x.data.flags.f_contiguous:
        return CuArray(_widen(CuArray(x.data.T, x.dtype)).data.T, dt.float16)
    cupy = import_cupy()
    fmt = _FORMAT[x.dtype]
    out = cupy.empty(x.shape, dtype=np.float16)
    if x.size:
        kernel = raw_kernel(("widen", fmt), lambda: _widen_source(fmt), f"widen_{fmt}")
        kernel(_grid(x.size), (BLOCK,), (contiguous(x.data), out, np.int64(x.size)))
    return CuArray(out, dt.float16)


def _widened_product(a: CuArray, b: CuArray) -> CuArray:
    """``a @ b`` of the unscaled float8 operands: float16 copies (exact), one float16 GEMM on tensor cores with
    exact products and float32 accumulation, the float32 accumulator out.  The copies (2 bytes an element)
    are dropped when this returns, before the output is allocated."""
    return gemm_ex(_widen(a), _widen(b), dt.float32)


def _finish(
    acc: CuArray, scales: tuple[Any, Any], modes: tuple[int, int], out_dtype: Any, bias: CuArray | None
) -> CuArray:
    """``acc * scale_a * scale_b + bias`` in float32, rounded once to ``out_dtype``."""
    cupy = import_cupy()
    out_tag = ctype(out_dtype).tag
    bias_tag = "none" if bias is None else ctype(bias.dtype).tag
    out = cupy.empty(acc.shape, dtype=ctype(out_dtype).cupy_dtype)
    if acc.size:
        name = f"finish_{bias_tag}_{out_tag}"
        kernel = raw_kernel(("finish", bias_tag, out_tag), lambda: _finish_source(bias_tag, out_tag), name)
        extra = () if bias is None else (contiguous(bias.data),)
        sizes = (np.int64(acc.size), np.int64(acc.shape[-1]))
        args = (contiguous(acc.data), *scales, *extra, out, *sizes, *(np.int32(m) for m in modes))
        kernel(_grid(acc.size), (BLOCK,), args)
    return CuArray(out, out_dtype)


def kernels() -> dict[str, Callable[..., Any]]:
    return {"quantize_float8": quantize_float8, "scaled_mm": scaled_mm}
