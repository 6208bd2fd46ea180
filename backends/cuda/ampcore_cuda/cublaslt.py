"""Native float8 GEMMs through cuBLASLt, with NVIDIA's nvmath-python raw bindings (``nvmath.bindings.cublasLt``)
and device pointers; the simulator's stand-in (``ampcore_cuda.sim.cublaslt``) where the simulator runs.

CuPy has no cuBLASLt.  nvmath-python's high-level ``matmul`` maps dtypes through NumPy names, which have no
float8, so this calls the bindings directly, the way torch's ``scaled_gemm`` calls cuBLASLt: row-major
``C = A @ B`` is column-major ``C^T = B^T A^T``, so cuBLASLt's A is our ``b`` (stored (N, K), K-major:
CUBLAS_OP_T) and its B is our ``a`` ((M, K), K-major: CUBLAS_OP_N), the "TN" layout Ada and Hopper require;
D is (M, N) row-major.  C is never read (beta 0); as torch does, a dummy C pointer (``a``) goes with a C
layout of D's type.

What runs natively, per the cuBLAS documentation ("Narrow Precision Data Types Usage"):

- tensor-wise scales (``SCALAR_32F``): compute capability 8.9+;
- row-wise scales (``OUTER_VEC_32F``: one per row of ``a``, one per column of ``b``): compute capability 9.x
  with cuBLASLt 12.9+ (torch's rule too; Blackwell has no outer-vector mode);
- MXFP8 (``VEC32_UE8M0``: one e8m0 scale per 32 values along K, in cuBLASLt's tiled layout): compute
  capability 10.0+ with cuBLASLt 12.8+.

:func:`support` says which, per device, and why not; the backend's ``scaled_mm`` / ``scaled_mm_mx`` use the
widened-float16 path (or a float32 GEMM) for anything else.  ``AMPCORE_CUDA_NO_CUBLASLT=1`` turns this path off
(the fallback then runs everywhere, as on a machine without nvmath-python).
"""

from __future__ import annotations

import functools
import importlib
import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CuArray
from .codegen import ctype
from .runtime import import_cupy, simulated

__all__ = [
    "ENV_OFF",
    "INSTALL_HINT",
    "Support",
    "support",
    "import_cublaslt",
    "gemm",
    "swizzle_offsets",
    "SCALAR",
    "OUTER",
    "MX",
]

ENV_OFF = "AMPCORE_CUDA_NO_CUBLASLT"
INSTALL_HINT = "pip install 'ampcore-cuda[float8]' (NVIDIA's nvmath-python, for cuBLASLt)"
SCALAR, OUTER, MX = 0, 3, 2  # cublasLtMatmulMatrixScale_t: SCALAR_32F, OUTER_VEC_32F, VEC32_UE8M0
CUDA_R = {dt.float8_e4m3fn: 28, dt.float8_e5m2: 29, dt.float32: 0, dt.float16: 2, dt.bfloat16: 14}
BIAS_TYPE = {dt.bfloat16: dt.bfloat16, dt.float32: dt.bfloat16, dt.float16: dt.float16}  # D type -> bias type
_COMPUTE_32F, _OP_N, _OP_T, _EPILOGUE_BIAS = 68, 0, 1, 4
_WORKSPACE = 32 * 2**20  # torch's cuBLASLt workspace on Hopper
_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)  # host alpha and beta


@dataclass(frozen=True)
class Support:
    """What cuBLASLt runs natively on one device: per-tensor, row-wise (outer vector) and MX scales."""

    tensorwise: bool
    rowwise: bool
    mx: bool
    summary: str  # one line for ``ampcore info``


def import_cublaslt() -> Any:
    """``nvmath.bindings.cublasLt``, or the simulator's stand-in (never nvmath) when the simulator runs."""
    if simulated():
        from . import sim

        return sim.cublaslt_module()
    return importlib.import_module("nvmath.bindings.cublasLt")


def _off(summary: str) -> Support:
    return Support(False, False, False, summary)


@functools.cache
def support(device_index: int) -> Support:
    """Which float8 GEMMs run on cuBLASLt on device ``device_index``, and a one-line summary saying why."""
    cupy = import_cupy()
    cc_text = cupy.cuda.Device(device_index).compute_capability
    cc = (int(cc_text[:-1]), int(cc_text[-1]))
    widened = "float8 GEMMs on float16 tensor cores (the float8 values widened exactly)"
    if os.environ.get(ENV_OFF, "").strip() not in ("", "0"):
        return _off(f"{widened}: {ENV_OFF} is set")
    if cc < (8, 9):
        return _off(f"no float8 tensor cores before compute capability 8.9 (this is {cc[0]}.{cc[1]})")
    try:
        lt = import_cublaslt()
        version = int(lt.get_version())
    except ModuleNotFoundError as exc:
        return _off(f"{widened}: nvmath-python is not installed ({exc.name}): {INSTALL_HINT}")
    except Exception as exc:  # noqa: BLE001 - a missing libcublasLt, a driver too old: fall back, say why
        return _off(f"{widened}: cuBLASLt cannot load ({type(exc).__name__}: {exc}): {INSTALL_HINT}")
    rowwise = cc[0] == 9 and version >= 120900
    mx = cc >= (10, 0) and version >= 120800
    text = f"{version // 10000}.{version // 100 % 100}.{version % 100}"
    modes = ["tensorwise"] + (["rowwise"] if rowwise else []) + (["mxfp8"] if mx else [])
    missing = ([] if rowwise else ["rowwise (needs sm_90, cuBLASLt 12.9+)"]) + (
        [] if mx else ["mxfp8 (needs sm_100, cuBLASLt 12.8+)"]
    )
    summary = f"cuBLASLt {text} float8 GEMMs: {', '.join(modes)}"
    if missing:
        summary += f"; widened to float16 or float32: {', '.join(missing)}"
    return Support(True, rowwise, mx, summary)


def swizzle_offsets(outer: int, inner: int) -> tuple[np.ndarray, int]:
    """Where cuBLASLt's ``VEC32_UE8M0`` layout keeps the scale of (outer index, block along K), for an
    ``(outer, inner)`` grid (outer: rows of op(A) or columns of op(B); inner: K / 32): the offsets, row-major
    over the grid, and the buffer's size (outer padded to 128, inner to 4; the padding zero).

    The cuBLAS documentation's "1D Block Scaling Factors Layout": 128 x 4 tiles laid row-major over the grid
    of tiles (``(sf_inner + sf_outer * sf_inner_dim) * 128`` for the tile at block row ``sf_outer`` and column
    ``sf_inner``), inside a tile ``(outer % 32) * 16 + (outer / 32) * 4 + inner``.
    """
    inner_padded = -(-inner // 4) * 4
    o = np.arange(outer, dtype=np.int64)[:, None]
    i = np.arange(inner, dtype=np.int64)[None, :]
    tile = (i // 4) * 4 + (o // 128) * inner_padded
    return (tile * 128 + (o % 32) * 16 + (o % 128 // 32) * 4 + i % 4).reshape(-1), -(-outer // 128) * 128 * inner_padded


@dataclass
class _Plan:
    """A matmul descriptor, its four layouts and the algorithm cuBLASLt's heuristic chose for one problem."""

    desc: int
    layouts: tuple[int, int, int, int]
    result: Any  # the MatmulHeuristicResult buffer: its algo is the first member of element 0
    lock: threading.Lock


@dataclass
class _Device:
    """One device's cuBLASLt handle, workspace and plans (per cuBLASLt module: the simulator has one per
    profile)."""

    handle: int
    workspace: Any
    plans: dict[tuple[Any, ...], _Plan]


_devices: dict[tuple[int, int], _Device] = {}
_create = threading.Lock()


def _set(lt: Any, desc: int, attr: Any, value: int) -> None:
    buf = np.array(value, dtype=lt.get_matmul_desc_attribute_dtype(attr))
    lt.matmul_desc_set_attribute(desc, attr, buf.ctypes.data, buf.itemsize)


def _device(lt: Any, index: int) -> _Device:
    with _create:
        key = (id(lt), index)
        if key not in _devices:
            _devices[key] = _Device(int(lt.create()), import_cupy().empty(_WORKSPACE, dtype=np.uint8), {})
        return _devices[key]


def _plan(lt: Any, key: tuple[Any, ...], device: _Device) -> _Plan:
    with _create:
        plan = device.plans.get(key)
    if plan is not None:
        return plan
    m, n, k, a_type, b_type, out_type, mode, bias_type, fast = key
    attr = lt.MatmulDescAttribute
    desc = int(lt.matmul_desc_create(_COMPUTE_32F, CUDA_R[dt.float32]))
    _set(lt, desc, attr.TRANSA, _OP_T)
    _set(lt, desc, attr.TRANSB, _OP_N)
    _set(lt, desc, attr.FAST_ACCUM, int(fast))
    if mode != SCALAR:  # the scale-mode attributes exist from cuBLASLt 12.8; the default is SCALAR_32F
        _set(lt, desc, attr.A_SCALE_MODE, mode)
        _set(lt, desc, attr.B_SCALE_MODE, mode)
    if bias_type is not None:
        _set(lt, desc, attr.EPILOGUE, _EPILOGUE_BIAS)
        _set(lt, desc, attr.BIAS_DATA_TYPE, CUDA_R[bias_type])
    # cuBLASLt's A = our b^T (K x N column-major, used transposed), B = our a^T (K x M), C and D N x M.
    layouts = (
        int(lt.matrix_layout_create(CUDA_R[b_type], k, n, k)),
        int(lt.matrix_layout_create(CUDA_R[a_type], k, m, k)),
        int(lt.matrix_layout_create(CUDA_R[out_type], n, m, n)),
        int(lt.matrix_layout_create(CUDA_R[out_type], n, m, n)),
    )
    pref = int(lt.matmul_preference_create())
    max_bytes = lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES
    limit = np.array(_WORKSPACE, dtype=lt.get_matmul_preference_attribute_dtype(max_bytes))
    lt.matmul_preference_set_attribute(pref, max_bytes, limit.ctypes.data, limit.itemsize)
    # The heuristic looks at which scale pointers are set, not at their values: the workspace stands in.
    scratch = device.workspace.data.ptr
    _set(lt, desc, attr.A_SCALE_POINTER, scratch)
    _set(lt, desc, attr.B_SCALE_POINTER, scratch)
    if bias_type is not None:
        _set(lt, desc, attr.BIAS_POINTER, scratch)
    result = lt.MatmulHeuristicResult(1)
    found = np.zeros(1, np.int32)
    try:
        lt.matmul_algo_get_heuristic(device.handle, desc, *layouts, pref, 1, result.ptr, found.ctypes.data)
    finally:
        lt.matmul_preference_destroy(pref)
    if found[0] < 1:
        raise lt.cuBLASLtError(15)  # CUBLAS_STATUS_NOT_SUPPORTED, as torch reports an empty heuristic
    plan = _Plan(desc, layouts, result, threading.Lock())
    with _create:
        return device.plans.setdefault(key, plan)


def gemm(
    a: Any,
    bt: Any,
    scale_a: Any,
    scale_b: Any,
    mode: int,
    out_dtype: dt.DType,
    bias: CuArray | None,
    use_fast_accum: bool,
    types: tuple[dt.DType, dt.DType],
) -> CuArray:
    """``D (M, N) = a (M, K) @ bt (N, K)^T`` on cuBLASLt, scaled per ``mode``: float32 accumulation, the scales
    on the accumulator, the bias (None, or of :data:`BIAS_TYPE` ``[out_dtype]``) added in float32, one rounding.

    ``a`` and ``bt`` are C-contiguous uint8 CuPy arrays of float8 ``types``, 16-byte aligned, K a multiple of
    16, N rows of D spanning a multiple of 16 bytes (the caller checks: see ``ampcore_cuda.float8``).
    ``use_fast_accum`` sets cuBLASLt's FAST_ACCUM (Hopper then accumulates with less than float32's
    precision); it is not set for MX blocks.
    ``scale_a`` / ``scale_b`` are device arrays: 0-d float32 (SCALAR), (M,) and (N,) float32 (OUTER), or the
    e8m0 bytes in cuBLASLt's tiled layout (MX).
    """
    lt = import_cublaslt()
    cupy = import_cupy()
    device = _device(lt, int(a.device.id))
    (m, k), n = a.shape, bt.shape[0]
    bias_type = None if bias is None else bias.dtype
    fast = bool(use_fast_accum) and mode != MX  # block-scaled MMA accumulates in float32: no fast mode to ask for
    plan = _plan(lt, (m, n, k, types[0], types[1], out_dtype, mode, bias_type, fast), device)
    out = cupy.empty((m, n), dtype=ctype(out_dtype).cupy_dtype)
    attr = lt.MatmulDescAttribute
    with plan.lock:  # the descriptor carries this call's pointers until the call is enqueued
        _set(lt, plan.desc, attr.A_SCALE_POINTER, scale_b.data.ptr)
        _set(lt, plan.desc, attr.B_SCALE_POINTER, scale_a.data.ptr)
        if bias is not None:
            _set(lt, plan.desc, attr.BIAS_POINTER, bias.data.data.ptr)
        lt.matmul(
            device.handle,
            plan.desc,
            _ONE.ctypes.data,
            bt.data.ptr,
            plan.layouts[0],
            a.data.ptr,
            plan.layouts[1],
            _ZERO.ctypes.data,
            a.data.ptr,  # C: never read (beta 0); not D, not null (torch's dummy)
            plan.layouts[2],
            out.data.ptr,
            plan.layouts[3],
            plan.result.ptr,  # cublasLtMatmulHeuristicResult_t begins with its cublasLtMatmulAlgo_t
            device.workspace.data.ptr,
            _WORKSPACE,
            cupy.cuda.get_current_stream().ptr,
        )
    return CuArray(out, out_dtype)
