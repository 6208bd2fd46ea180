"""``matmul`` through cuBLAS: float16/bfloat16 inputs multiply on tensor cores and accumulate in float32
(``cublasGemmStridedBatchedEx`` with ``CUBLAS_COMPUTE_32F``), the output rounded once to the input dtype
(or, for the float8 ``scaled_mm``, the float32 accumulator itself: ``gemm_ex``'s ``out_dtype``);
float32/float64 through CuPy's ``matmul`` (cuBLAS s/dgemm, no TF32 unless the user sets CUPY_TF32=1).

Batch dimensions broadcast; every matmul is one strided-batched call.  A
bfloat16 GEMM on a device before compute capability 8.0 (no bfloat16 in
cuBLAS there) is widened to float32 instead: the same numbers, without tensor
cores.  Row-major ``C = A @ B`` is column-major ``C^T = B^T A^T``, so the
operands are passed swapped; a transposed operand (a ``.T`` view, as every
linear layer's backward makes) goes to cuBLAS as ``CUBLAS_OP_T`` and a
broadcast batch as batch stride 0, so neither is copied.

Inside a CUDA graph capture (:mod:`.graphs`) every GEMM goes through ``cublasGemmStridedBatchedEx`` with this
backend's own cuBLAS handle (:mod:`.blas`), float32 ones too (``CUDA_R_32F`` operands, ``CUBLAS_COMPUTE_32F``:
no TF32), as CuPy's cuBLAS wrapper raises during capture.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from . import blas, graphs
from .array import CuArray, contiguous
from .convert import down, up
from .runtime import import_cupy, import_cupy_module

__all__ = ["matmul", "gemm_ex", "kernels", "CUDA_R", "CUDA_R_32F", "CUBLAS_COMPUTE_32F"]

# library_types.h / cublas_api.h values (stable ABI); CuPy's cublas module needs libcublas to even import.
CUDA_R = {dt.float16: 2, dt.bfloat16: 14}
CUDA_R_32F = 0
_OUT_R = {**CUDA_R, dt.float32: CUDA_R_32F}  # the output types gemm_ex writes (float32: the bare accumulator)
_IN_R = _OUT_R  # inside a graph float32 GEMMs go through gemm_ex too (CuPy's matmul is cuBLAS through CuPy)
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUBLAS_POINTER_MODE_HOST = 0
_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)  # host alpha/beta (float, as the compute type)


def _has_bf16_gemm(device: int) -> bool:
    cupy = import_cupy()
    return int(cupy.cuda.Device(device).compute_capability) >= 80


def _batch_stride(shape: tuple[int, ...], strides: tuple[int, ...]) -> int | None:
    """The one element stride between consecutive matrices of the flattened batch, None when there is none
    (0 for a broadcast batch: cuBLAS reads the same matrix for every entry)."""
    dims = [(n, s) for n, s in zip(shape, strides) if n > 1]
    for (_, outer), (n, inner) in zip(dims, dims[1:]):
        if outer != inner * n:
            return None
    return dims[-1][1] if dims else 0


def _layout(rows: int, cols: int, sr: int, sc: int) -> tuple[int, int] | None:
    """How cuBLAS reads a row-major ``rows x cols`` matrix with element strides ``(sr, sc)`` as the transpose
    it needs (column-major ``C^T = B^T A^T``): ``(CUBLAS_OP_N, ld)`` for row-major storage, ``(CUBLAS_OP_T,
    ld)`` for column-major storage (a transposed view); None when neither (a copy is needed)."""
    if cols == 1:  # a dimension of size 1 may have any stride: take the one that makes a layout valid
        sc = 1
    if rows == 1:
        sr = max(cols, 1) if sc == 1 else 1
    if sc == 1 and sr >= max(1, cols):
        return CUBLAS_OP_N, sr
    if sr == 1 and sc >= max(1, rows):
        return CUBLAS_OP_T, sc
    return None


def _operand(x: Any, batch: tuple[int, ...]) -> tuple[Any, int, int, int]:
    """``x`` broadcast to ``batch`` as ``(array, op, ld, batch stride)`` for cuBLAS, without a copy when its
    layout allows (a transposed view goes as CUBLAS_OP_T: no 32-64 MB copies per GEMM on mlp-large)."""
    cupy = import_cupy()
    x = cupy.broadcast_to(x, batch + x.shape[-2:])
    rows, cols = x.shape[-2:]
    item = x.dtype.itemsize
    if all(s % item == 0 and s >= 0 for s in x.strides):
        strides = tuple(s // item for s in x.strides)
        layout, stride = _layout(rows, cols, *strides[-2:]), _batch_stride(x.shape[:-2], strides[:-2])
        if layout is not None and stride is not None:
            return x, layout[0], layout[1], stride
    x = contiguous(x)
    return x, CUBLAS_OP_N, max(cols, 1), rows * cols


def _batched(a: Any, b: Any) -> tuple[Any, Any, tuple[int, ...]]:
    """Both operands as 3-d or more arrays of one broadcast batch shape (1-d operands as a row / a column)."""
    if a.ndim == 1:
        a = a[None, :]
    if b.ndim == 1:
        b = b[:, None]
    return a, b, tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))


def gemm_ex(a: CuArray, b: CuArray, out_dtype: dt.DType | None = None) -> CuArray:
    """A 16-bit GEMM on tensor cores with float32 accumulation, the output rounded once by cuBLAS to
    ``out_dtype`` (default: the inputs' dtype; float32 is the accumulator itself).  The caller's contract,
    unchecked on this hot path: ``a`` and ``b`` share a dtype in :data:`CUDA_R` (bfloat16 only on cc >= 8.0),
    ``out_dtype`` is theirs or float32, and the current device is the operands'."""
    cupy = import_cupy()
    out_dtype = a.dtype if out_dtype is None else out_dtype
    a2, b2, batch = _batched(a.data, b.data)
    m, k = a2.shape[-2:]
    n = b2.shape[-1]
    count = math.prod(batch)
    out = cupy.empty((count, m, n), dtype=np.float32 if out_dtype is dt.float32 else a.data.dtype)
    if out.size and k:
        (a3, op_a, lda, stride_a), (b3, op_b, ldb, stride_b) = _operand(a2, batch), _operand(b2, batch)
        kind = _IN_R[a.dtype]
        _gemm_call()(
            op_b,
            op_a,
            n,
            m,
            k,
            _ONE.ctypes.data,
            b3.data.ptr,
            kind,
            ldb,
            stride_b,
            a3.data.ptr,
            kind,
            lda,
            stride_a,
            _ZERO.ctypes.data,
            out.data.ptr,
            _OUT_R[out_dtype],
            n,
            m * n,
            count,
            CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT,
        )
    elif out.size:
        out[...] = 0  # k == 0: an empty sum
    return CuArray(out.reshape(_result_shape(a.shape, b.shape, batch)), out_dtype)


def _gemm_call() -> Callable[..., None]:
    """``cublasGemmStridedBatchedEx`` taking its arguments after the handle: CuPy's handle, or inside a CUDA
    graph capture this backend's own (:mod:`.blas`; CuPy's wrapper raises there)."""
    current = graphs.active()
    if current is not None:
        return functools.partial(blas.gemm_strided_batched_ex, current.device)
    cublas = import_cupy_module("cupy.cuda.cublas")
    handle = import_cupy_module("cupy.cuda.device").get_cublas_handle()
    cublas.setPointerMode(handle, CUBLAS_POINTER_MODE_HOST)
    return functools.partial(cublas.gemmStridedBatchedEx, handle)


def _result_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...], batch: tuple[int, ...]) -> tuple[int, ...]:
    rows = () if len(a_shape) == 1 else (a_shape[-2],)
    cols = () if len(b_shape) == 1 else (b_shape[-1],)
    return batch + rows + cols


def matmul(a: CuArray, b: CuArray) -> CuArray:
    """``(..., m, k) @ (..., k, n)`` with broadcast batch dimensions; 16-bit inputs accumulate in float32."""
    cupy = import_cupy()
    with cupy.cuda.Device(a.device_index):
        if a.dtype in CUDA_R and (a.dtype == dt.float16 or _has_bf16_gemm(a.device_index)):
            return gemm_ex(a, b)
        current = graphs.active()
        if current is not None:  # no cupy.matmul inside a graph: its cuBLAS refuses capture
            if current.eager_bits:
                raise graphs.CaptureDeclinedError(
                    f"a {a.dtype.name} GEMM runs through CuPy's matmul eagerly and cublasGemmEx inside a CUDA graph, "
                    "whose sums need not be ordered alike (a captured program keeps eager's bits)"
                )
            if a.dtype in CUDA_R:
                return down(gemm_ex(CuArray(up(a), dt.float32), CuArray(up(b), dt.float32)).data, a.dtype)
            if a.dtype != dt.float32:
                raise graphs.CaptureDeclinedError(f"a {a.dtype.name} GEMM cannot run inside a CUDA graph here")
            return gemm_ex(a, b)
        if a.dtype in CUDA_R:
            return down(cupy.matmul(up(a), up(b)), a.dtype)
        return CuArray(cupy.matmul(a.data, b.data), a.dtype)


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    return {"matmul": matmul}
