"""Float8 kernels: ``quantize_float8`` in one pass; ``scaled_mm`` and ``scaled_mm_mx`` on cuBLASLt's float8
tensor cores where the device and the call allow (:mod:`ampcore_cuda.cublaslt`), else on float16 tensor cores.

No ``cuda_fp8.h`` (the sources compile without include paths, like every kernel
here): the conversions are :func:`ampcore.cgen.float8_conversions`, integer
arithmetic bit-exact against ml_dtypes.  ``quantize_float8`` scales, clamps,
rounds and stores each element and folds ``|x|`` into the amax with an
``atomicMax`` on its bits (non-negative floats order as their bit patterns, and
NaN's bits are above inf's, so a NaN anywhere gives NaN).

``scaled_mm`` natively: one cuBLASLt float8 GEMM, ``a`` as it is (M, K) and ``b`` K-major ((K, N) stored
as its transpose, as Float8Linear passes its weight; any other layout is copied first, 1 byte an element:
Ada and Hopper take only this "TN" form), tensor-wise scales as device pointers, row-wise ones as cuBLASLt's
outer vectors (sm_90), the bias in cuBLASLt's epilogue where its type is the documented one (else a float32
D and the finish kernel below).  K must be a multiple of 16 and D's rows a multiple of 16 bytes, e5m2 x
e5m2 is not offered: such a call takes the fallback.

``scaled_mm`` fallback: float8 operands widened exactly to float16, multiplied on tensor
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
into float32 and runs a float32 GEMM, as the reference does.

``scaled_mm_mx`` (MXFP8): natively on sm_100 (cuBLASLt ``VEC32_UE8M0``, the scales converted to e8m0 bytes
and laid out in cuBLASLt's 128 x 4 tiles); elsewhere each operand is dequantized block by block (a power of
two: exact) and multiplied in float32.  The conversions stay integer arithmetic on every device (the
``cvt.rn.satfinite.e4m3x2.f32`` instructions are not used).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt

from . import cublaslt
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
    """``(a * scale_a) @ (b * scale_b) + bias`` with float32 accumulation, rounded once: on cuBLASLt's float8
    GEMM where it runs the call, else on float16 tensor cores with the scales on the accumulator (see the
    module docstring)."""
    cupy = import_cupy()
    with cupy.cuda.Device(a.device_index):
        mode_a, mode_b = _layout(scale_a, a.shape), _layout(scale_b, b.shape)
        native = _native(a, b, (scale_a, mode_a), (scale_b, mode_b), out_dtype, bias, use_fast_accum)
        if native is not None:
            return native
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


def _aligned(data: Any) -> Any:
    """``data`` C-contiguous at a 16-byte aligned address (cuBLASLt's float8 rule), copied only if needed."""
    if data.flags.c_contiguous and data.data.ptr % 16 == 0:
        return data
    return import_cupy().ascontiguousarray(data)  # a new allocation: CuPy's are 256-byte aligned


def _vector(scale: Any, length: int) -> Any:
    """A per-tensor or per-row/column float32 scale as a (length,) vector (cuBLASLt's outer-vector form)."""
    cupy = import_cupy()
    flat = scale.reshape(-1)
    return _aligned(cupy.broadcast_to(flat, (length,)) if flat.size == 1 else flat)


def _native(
    a: CuArray,
    b: CuArray,
    scale_a: tuple[CuArray, int],
    scale_b: tuple[CuArray, int],
    out_dtype: Any,
    bias: CuArray | None,
    use_fast_accum: bool,
) -> CuArray | None:
    """The product on cuBLASLt where this device and this call qualify (per-tensor scales, or row/column
    vectors on sm_90; K a multiple of 16; D's rows 16-byte multiples; not e5m2 x e5m2); None otherwise."""
    (m, k), n = a.shape, b.shape[1]
    if not (m and n and k) or k % 16 or a.dtype == b.dtype == dt.float8_e5m2:
        return None
    support = cublaslt.support(a.device_index)
    (sa, mode_a), (sb, mode_b) = scale_a, scale_b
    if mode_a == mode_b == _PER_TENSOR and support.tensorwise:
        mode, sa_dev, sb_dev = cublaslt.SCALAR, _aligned(sa.data.reshape(())), _aligned(sb.data.reshape(()))
    elif mode_a in (_PER_TENSOR, _PER_ROW) and mode_b in (_PER_TENSOR, _PER_COLUMN) and support.rowwise:
        mode, sa_dev, sb_dev = cublaslt.OUTER, _vector(sa.data, m), _vector(sb.data, n)
    else:
        return None
    return _lt_gemm(a, b, (sa_dev, sb_dev), mode, out_dtype, bias, use_fast_accum)


def _lt_gemm(
    a: CuArray,
    b: CuArray,
    scales: tuple[Any, Any],
    mode: int,
    out_dtype: Any,
    bias: CuArray | None,
    use_fast_accum: bool,
) -> CuArray | None:
    """One cuBLASLt float8 GEMM of ``a`` (M, K) and ``b`` (K, N): the bias in its epilogue where its type is
    cuBLASLt's for this output, else after it (a float32 D, then the finish kernel: one rounding).  None when
    D's rows would not span a multiple of 16 bytes."""
    epilogue = bias is None or cublaslt.BIAS_TYPE[out_dtype] == bias.dtype
    d_dtype = out_dtype if epilogue else dt.float32
    if (b.shape[1] * ctype(d_dtype).itemsize) % 16:
        return None
    lt_bias = None if bias is None or not epilogue else CuArray(_aligned(bias.data), bias.dtype)
    a_rows, b_rows = _aligned(a.data), _aligned(b.data.T)  # both K-major: (M, K) and (N, K)
    out = cublaslt.gemm(
        a_rows, b_rows, scales[0], scales[1], mode, d_dtype, lt_bias, use_fast_accum, (a.dtype, b.dtype)
    )
    if epilogue:
        return out
    one = import_cupy().ones((), dtype=np.float32)
    return _finish(out, (one, one), (_PER_TENSOR, _PER_TENSOR), out_dtype, bias)


_offsets: dict[tuple[int, int, int], tuple[Any, int]] = {}


def _e8m0_tiles(scale: Any) -> Any:
    """(outer, K / 32) float32 powers of two as e8m0 bytes (their float32 exponent field: 2**-127, a float32
    subnormal, is byte 0) in cuBLASLt's tiled ``VEC32_UE8M0`` layout (:func:`ampcore_cuda.cublaslt.swizzle_offsets`)."""
    cupy = import_cupy()
    outer, inner = scale.shape
    key = (int(scale.device.id), outer, inner)
    if key not in _offsets:
        offsets, size = cublaslt.swizzle_offsets(outer, inner)
        _offsets[key] = (cupy.asarray(offsets), size)
    offsets, size = _offsets[key]
    exponent = (contiguous(scale).view(np.uint32) >> np.uint32(23)) & np.uint32(0xFF)
    tiles = cupy.zeros(size, dtype=np.uint8)
    tiles[offsets] = exponent.reshape(-1).astype(np.uint8)
    return tiles


def scaled_mm_mx(
    a: CuArray,
    b: CuArray,
    scale_a: CuArray,
    scale_b: CuArray,
    out_dtype: Any,
    bias: CuArray | None,
    use_fast_accum: bool,
) -> CuArray:
    """``scaled_mm`` with one power-of-two scale per 32 values along K (``scale_a`` (M, K/32), ``scale_b``
    (K/32, N)): cuBLASLt's MXFP8 GEMM on sm_100, else the operands dequantized block by block (exact) and one
    float32 GEMM; one rounding to ``out_dtype`` either way."""
    cupy = import_cupy()
    with cupy.cuda.Device(a.device_index):
        (m, k), n = a.shape, b.shape[1]
        native = None
        if m and n and k and k % 32 == 0 and not a.dtype == b.dtype == dt.float8_e5m2:
            if cublaslt.support(a.device_index).mx:
                scales = (_e8m0_tiles(scale_a.data), _e8m0_tiles(scale_b.data.T))
                native = _lt_gemm(a, b, scales, cublaslt.MX, out_dtype, bias, use_fast_accum)
        if native is not None:
            return native
        deq_a = _dequantize_blocks(a.data, a.dtype, scale_a.data)
        deq_b = _dequantize_blocks(b.data.T, b.dtype, scale_b.data.T)  # blocks run along K: b^T's rows
        acc = CuArray(cupy.matmul(deq_a, deq_b.T), dt.float32)
        one = cupy.ones((), dtype=np.float32)
        return _finish(acc, (one, one), (_PER_TENSOR, _PER_TENSOR), out_dtype, bias)


def _dequantize_blocks(q: Any, dtype: dt.DType, scale: Any) -> Any:
    """(rows, K) float8 values times their (rows, K / 32) block scales, in float32 (exact: powers of two)."""
    rows, k = q.shape
    blocks = CuArray(contiguous(q).reshape(rows * (k // 32), 32), dtype)
    per_block = CuArray(contiguous(scale).reshape(rows * (k // 32), 1), dt.float32)
    return _dequantize(blocks, per_block).data.reshape(rows, k)


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
    return {"quantize_float8": quantize_float8, "scaled_mm": scaled_mm, "scaled_mm_mx": scaled_mm_mx}
