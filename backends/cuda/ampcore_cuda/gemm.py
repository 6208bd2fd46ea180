"""``matmul`` through cuBLAS: float16/bfloat16 inputs multiply on tensor cores and accumulate in float32
(``cublasGemmStridedBatchedEx`` with ``CUBLAS_COMPUTE_32F``), the output rounded once to the input dtype;
float32/float64 through CuPy's ``matmul`` (cuBLAS s/dgemm, no TF32 unless the user sets CUPY_TF32=1).

Batch dimensions broadcast; every matmul is one strided-batched call.  A
bfloat16 GEMM on a device before compute capability 8.0 (no bfloat16 in
cuBLAS there) is widened to float32 instead: the same numbers, without tensor
cores.  Row-major ``C = A @ B`` is column-major ``C^T = B^T A^T``, so the
operands are passed swapped and nothing is transposed.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from ampcore import dtypes as dt

from .array import CuArray
from .convert import down, up
from .runtime import import_cupy

__all__ = ["matmul", "kernels", "CUDA_R", "CUBLAS_COMPUTE_32F"]

# library_types.h / cublas_api.h values (stable ABI); CuPy's cublas module needs libcublas to even import.
CUDA_R = {dt.float16: 2, dt.bfloat16: 14}
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_OP_N = 0
CUBLAS_POINTER_MODE_HOST = 0
_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)  # host alpha/beta (float, as the compute type)


def _has_bf16_gemm(device: int) -> bool:
    cupy = import_cupy()
    return int(cupy.cuda.Device(device).compute_capability) >= 80


def _batched(a: Any, b: Any) -> tuple[Any, Any, tuple[int, ...]]:
    """Both operands broadcast to one batch shape, contiguous, as (batch, m, k) and (batch, k, n)."""
    cupy = import_cupy()
    if a.ndim == 1:
        a = a[None, :]
    if b.ndim == 1:
        b = b[:, None]
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    a = cupy.ascontiguousarray(cupy.broadcast_to(a, batch + a.shape[-2:]))
    b = cupy.ascontiguousarray(cupy.broadcast_to(b, batch + b.shape[-2:]))
    count = math.prod(batch)
    return a.reshape((count,) + a.shape[-2:]), b.reshape((count,) + b.shape[-2:]), batch


def _gemm_ex(a: CuArray, b: CuArray) -> CuArray:
    """A 16-bit GEMM on tensor cores with float32 accumulation, output rounded once by cuBLAS."""
    from cupy.cuda import cublas, device

    cupy = import_cupy()
    a3, b3, batch = _batched(a.data, b.data)
    count, m, k = a3.shape
    n = b3.shape[2]
    out = cupy.empty((count, m, n), dtype=a.data.dtype)
    if out.size and k:
        handle = device.get_cublas_handle()
        cublas.setPointerMode(handle, CUBLAS_POINTER_MODE_HOST)
        kind = CUDA_R[a.dtype]
        cublas.gemmStridedBatchedEx(
            handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, _ONE.ctypes.data,
            b3.data.ptr, kind, n, n * k, a3.data.ptr, kind, k, m * k,
            _ZERO.ctypes.data, out.data.ptr, kind, n, m * n, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
    elif out.size:
        out[...] = 0  # k == 0: an empty sum
    return CuArray(out.reshape(_result_shape(a.shape, b.shape, batch)), a.dtype)


def _result_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...], batch: tuple[int, ...]) -> tuple[int, ...]:
    rows = () if len(a_shape) == 1 else (a_shape[-2],)
    cols = () if len(b_shape) == 1 else (b_shape[-1],)
    return batch + rows + cols


def matmul(a: CuArray, b: CuArray) -> CuArray:
    """``(..., m, k) @ (..., k, n)`` with broadcast batch dimensions; 16-bit inputs accumulate in float32."""
    cupy = import_cupy()
    with cupy.cuda.Device(a.device_index):
        if a.dtype in CUDA_R and (a.dtype == dt.float16 or _has_bf16_gemm(a.device_index)):
            return _gemm_ex(a, b)
        if a.dtype in CUDA_R:
            return down(cupy.matmul(up(a), up(b)), a.dtype)
        return CuArray(cupy.matmul(a.data, b.data), a.dtype)


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    return {"matmul": matmul}
