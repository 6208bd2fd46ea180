"""``cupy.cuda.cublas`` of the simulator: ``gemmStridedBatchedEx`` computed as cuBLAS does with
``CUBLAS_COMPUTE_32F`` (16-bit inputs widened exactly, float32 products accumulated in float32, ``alpha`` and
``beta`` applied in float32, one rounding to the output type: a 16-bit C of the inputs' type, or none for a
``CUDA_R_32F`` C), over column-major operands with every transpose, leading dimension and batch stride
honoured.  A combination it does not implement raises
:class:`CublasSimError`, as would a cuBLAS status the backend never expects.
"""

from __future__ import annotations

import ctypes
import itertools
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from . import capture

__all__ = [
    "CublasSimError",
    "gemmStridedBatchedEx",
    "setPointerMode",
    "get_cublas_handle",
    "CUBLAS_OP_N",
    "CUBLAS_OP_T",
    "CUDA_R_16F",
    "CUDA_R_16BF",
    "CUDA_R_32F",
    "CUBLAS_COMPUTE_32F",
]

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F = 2, 14, 0
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1
_POINTER_MODE_HOST = 0
_HANDLE = 1
_STORAGE = {CUDA_R_16F: np.dtype(np.float16), CUDA_R_16BF: np.dtype(np.uint16), CUDA_R_32F: np.dtype(np.float32)}
_pointer_mode = {_HANDLE: _POINTER_MODE_HOST}


class CublasSimError(RuntimeError):
    """A cuBLAS call the simulator does not implement, or one cuBLAS itself would reject."""


def _refuse_in_capture() -> None:
    if capture.active() is not None:  # CuPy's cublas module does exactly this
        raise NotImplementedError("calling cuBLAS API during stream capture is currently unsupported")


def get_cublas_handle() -> int:
    """``cupy.cuda.device.get_cublas_handle()``: the one handle of the simulated device."""
    return _HANDLE


def setPointerMode(handle: int, mode: int) -> None:  # noqa: N802 - cuBLAS's name
    _refuse_in_capture()
    if mode != _POINTER_MODE_HOST:
        raise CublasSimError(
            f"cublasSetPointerMode({mode}): the simulator implements only "
            f"CUBLAS_POINTER_MODE_HOST ({_POINTER_MODE_HOST})"
        )
    _pointer_mode[handle] = mode


def _host_float(ptr: int) -> np.float32:
    return np.float32(ctypes.c_float.from_address(ptr).value)


def _matrices(
    ptr: int, kind: int, op: int, rows: int, cols: int, ld: int, stride: int, batch: int, what: str
) -> np.ndarray:
    """``op(X)`` for each batch entry as a (batch, rows, cols) float32 array, ``X`` column-major at ``ptr``."""
    stored_rows, stored_cols = (rows, cols) if op == CUBLAS_OP_N else (cols, rows)
    if ld < max(1, stored_rows):
        raise CublasSimError(
            f"gemmStridedBatchedEx: ld{what} = {ld} < {max(1, stored_rows)} (CUBLAS_STATUS_INVALID_VALUE)"
        )
    item = _STORAGE[kind].itemsize
    span = (batch - 1) * stride + (stored_cols - 1) * ld + stored_rows if rows and cols and batch else 0
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * (span * item)).from_address(ptr)) if span else np.zeros(0, np.uint8)
    flat = raw.view(_STORAGE[kind])
    stored = np.lib.stride_tricks.as_strided(
        flat, (batch, stored_rows, stored_cols), (stride * item, item, ld * item), writeable=False
    )
    mats = stored if op == CUBLAS_OP_N else stored.transpose(0, 2, 1)
    if kind == CUDA_R_16BF:
        return (mats.astype(np.uint32) << 16).view(np.float32)
    return mats.astype(np.float32)


def gemmStridedBatchedEx(  # noqa: N802 - cuBLAS's name
    handle: int,
    transa: int,
    transb: int,
    m: int,
    n: int,
    k: int,
    alpha: int,
    a: int,
    atype: int,
    lda: int,
    stride_a: int,
    b: int,
    btype: int,
    ldb: int,
    stride_b: int,
    beta: int,
    c: int,
    ctype: int,
    ldc: int,
    stride_c: int,
    batch: int,
    compute_type: int,
    algo: int,
) -> None:
    """``C[i] = alpha * op(A[i]) @ op(B[i]) + beta * C[i]`` for ``i < batch``, column-major (cuBLAS's contract);
    NotImplementedError inside a stream capture, as CuPy's wrapper raises."""
    _refuse_in_capture()
    _gemm(
        handle, transa, transb, m, n, k, alpha, a, atype, lda, stride_a, b, btype, ldb, stride_b, beta, c, ctype,
        ldc, stride_c, batch, compute_type, algo,
    )  # fmt: skip


def _gemm(
    handle: int,
    transa: int,
    transb: int,
    m: int,
    n: int,
    k: int,
    alpha: int,
    a: int,
    atype: int,
    lda: int,
    stride_a: int,
    b: int,
    btype: int,
    ldb: int,
    stride_b: int,
    beta: int,
    c: int,
    ctype: int,
    ldc: int,
    stride_c: int,
    batch: int,
    compute_type: int,
    algo: int,
) -> None:
    for name, op in (("transa", transa), ("transb", transb)):
        if op not in (CUBLAS_OP_N, CUBLAS_OP_T):
            raise CublasSimError(
                f"gemmStridedBatchedEx: {name} = {op}; the simulator implements CUBLAS_OP_N (0) and CUBLAS_OP_T (1)"
            )
    if compute_type != CUBLAS_COMPUTE_32F or algo != CUBLAS_GEMM_DEFAULT:
        raise CublasSimError(
            f"gemmStridedBatchedEx: computeType {compute_type}, algo {algo}; the simulator "
            f"implements CUBLAS_COMPUTE_32F ({CUBLAS_COMPUTE_32F}) with CUBLAS_GEMM_DEFAULT (-1)"
        )
    if atype != btype or atype not in (CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F) or ctype not in (atype, CUDA_R_32F):
        raise CublasSimError(
            f"gemmStridedBatchedEx: types A={atype}, B={btype}, C={ctype}; the simulator implements A and B "
            f"both CUDA_R_16F ({CUDA_R_16F}), both CUDA_R_16BF ({CUDA_R_16BF}) or both CUDA_R_32F "
            f"({CUDA_R_32F}), with C of their type or CUDA_R_32F"
        )
    if _pointer_mode.get(handle) != _POINTER_MODE_HOST:
        raise CublasSimError(f"gemmStridedBatchedEx: unknown handle {handle!r}")
    if min(m, n, k, batch) < 0:
        raise CublasSimError(f"gemmStridedBatchedEx: negative size m={m}, n={n}, k={k}, batch={batch}")
    if ldc < max(1, m):
        raise CublasSimError(f"gemmStridedBatchedEx: ldc = {ldc} < {max(1, m)} (CUBLAS_STATUS_INVALID_VALUE)")
    if batch > 1 and stride_c < ldc * n:
        raise CublasSimError(
            f"gemmStridedBatchedEx: strideC = {stride_c} < ldc * n = {ldc * n}: output matrices would overlap"
        )
    if not (m and n and batch):
        return
    with np.errstate(all="ignore"):  # a GPU raises no floating-point warnings: inf/NaN are values here
        _compute(
            transa,
            transb,
            m,
            n,
            k,
            _host_float(alpha),
            a,
            atype,
            lda,
            stride_a,
            b,
            ldb,
            stride_b,
            _host_float(beta),
            c,
            ctype,
            ldc,
            stride_c,
            batch,
        )


def _compute(
    transa: int,
    transb: int,
    m: int,
    n: int,
    k: int,
    alpha32: np.float32,
    a: int,
    atype: int,
    lda: int,
    stride_a: int,
    b: int,
    ldb: int,
    stride_b: int,
    beta32: np.float32,
    c: int,
    ctype: int,
    ldc: int,
    stride_c: int,
    batch: int,
) -> None:
    btype = atype
    acc = np.zeros((batch, m, n), np.float32)
    if k:
        op_a = _matrices(a, atype, transa, m, k, lda, stride_a, batch, "a")
        op_b = _matrices(b, btype, transb, k, n, ldb, stride_b, batch, "b")
        acc = np.matmul(op_a, op_b)  # float32 BLAS: float32 products and sums, as CUBLAS_COMPUTE_32F
    out = _output(c, ctype, m, n, ldc, stride_c, batch)
    result = alpha32 * acc
    if beta32 != 0:  # cuBLAS reads C only when beta != 0 (C may be uninitialised)
        result = result + beta32 * (_widen(out, ctype))
    out[...] = _round(result.astype(np.float32), ctype)


def _output(ptr: int, kind: int, m: int, n: int, ldc: int, stride: int, batch: int) -> np.ndarray:
    item = _STORAGE[kind].itemsize
    span = (batch - 1) * stride + (n - 1) * ldc + m
    flat = np.ctypeslib.as_array((ctypes.c_uint8 * (span * item)).from_address(ptr)).view(_STORAGE[kind])
    return np.lib.stride_tricks.as_strided(flat, (batch, m, n), (stride * item, item, ldc * item))


def _widen(x: np.ndarray, kind: int) -> np.ndarray:
    return (x.astype(np.uint32) << 16).view(np.float32) if kind == CUDA_R_16BF else x.astype(np.float32)


def _round(x: np.ndarray, kind: int) -> np.ndarray:
    """float32 to the output type, to nearest even (ampcore's exact conversions); float32 as it is."""
    if kind == CUDA_R_32F:
        return x
    if kind == CUDA_R_16BF:
        return np.asarray(dt.convert(x, dt.bfloat16)).view(np.uint16)
    return x.astype(np.float16)


class NvmathCublas:
    """``nvmath.bindings.cublas`` of the simulator: a handle of the caller's own, usable inside a stream capture
    (what CuPy's wrapper refuses), with the same ``gemm_strided_batched_ex`` as ``gemmStridedBatchedEx``."""

    CUBLASError = CublasSimError

    def __init__(self) -> None:
        self._ids = itertools.count(100)
        self._handles: dict[int, dict[str, Any]] = {}

    def get_version(self) -> int:
        return 120804

    def create(self) -> int:
        capture.refuse("cublasCreate")
        handle = next(self._ids)
        self._handles[handle] = {"stream": 0, "workspace": (0, 0)}
        _pointer_mode[handle] = _POINTER_MODE_HOST
        return handle

    def _state(self, handle: int) -> dict[str, Any]:
        if handle not in self._handles:
            raise CublasSimError(f"unknown cuBLAS handle {handle!r} (CUBLAS_STATUS_NOT_INITIALIZED)")
        return self._handles[handle]

    def destroy(self, handle: int) -> None:
        self._handles.pop(handle, None)

    def set_stream(self, handle: int, stream: int) -> None:
        self._state(handle)["stream"] = int(stream)

    def set_workspace(self, handle: int, workspace: int, size: int) -> None:
        self._state(handle)["workspace"] = (int(workspace), int(size))

    def set_pointer_mode(self, handle: int, mode: int) -> None:
        self._state(handle)
        if mode != _POINTER_MODE_HOST:
            raise CublasSimError(f"cublasSetPointerMode({mode}): the simulator implements only host mode (0)")
        _pointer_mode[handle] = mode

    def set_math_mode(self, handle: int, mode: int) -> None:
        self._state(handle)

    def gemm_strided_batched_ex(self, handle: int, *args: Any) -> None:
        """Recorded inside a capture; alpha and beta (host pointers) are read now, as cuBLAS reads them when the
        call is captured."""
        self._state(handle)
        values = list(args)
        kept = [np.array([_host_float(values[i])], np.float32) for i in (5, 14)]  # alpha, beta
        values[5], values[14] = kept[0].ctypes.data, kept[1].ctypes.data
        capture.run(lambda: _gemm(handle, *values) if kept else None, (), {}, writes=True)  # kept: alive with it


NVMATH_CUBLAS = NvmathCublas()
