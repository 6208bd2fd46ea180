"""The simulator's ``gemmStridedBatchedEx`` against a float64 reference for every transpose, leading dimension
and batch stride, its refusals, and the cuda backend's matmul passing transposed and broadcast operands to it
as CUBLAS_OP_T and batch stride 0 (no copy) with the right numbers."""

from __future__ import annotations

import itertools
import shutil
from typing import Any

import numpy as np
import pytest

from ampcore import dtypes as dt
from ampcore.conformance.tolerance import assert_accumulated
from ampcore_cuda.sim import PROFILES, cublas, cupy_module

cp = cupy_module(PROFILES["h100"])
KINDS = {"float16": cublas.CUDA_R_16F, "bfloat16": cublas.CUDA_R_16BF}


def _store(values: np.ndarray, dtype: str) -> np.ndarray:
    """Host values rounded to ``dtype`` and their 16-bit storage (bfloat16 as uint16 words)."""
    rounded = np.asarray(dt.convert(values, dt.as_dtype(dtype)))
    return rounded, rounded.view(np.uint16) if dtype == "bfloat16" else rounded


def _within(got: np.ndarray, ref: np.ndarray, abs_products: np.ndarray, k: int, dtype: str) -> None:
    """The accumulation rule (ampcore.conformance.tolerance): float32 accumulation of k products, one rounding."""
    assert_accumulated(np.asarray(got, np.float64), ref, abs_products, dtype, k, what=f"gemmEx in {dtype}")


def _column_major(mats: np.ndarray, op: int, ld: int, stride: int) -> np.ndarray:
    """``mats`` (batch, rows, cols) = op(X) laid out column-major with leading dimension ``ld`` and batch stride
    ``stride`` (0: one matrix shared by the batch), as a flat buffer with NaN-free padding."""
    stored = mats if op == cublas.CUBLAS_OP_N else mats.transpose(0, 2, 1)
    batch, rows, cols = stored.shape
    flat = np.full(max(stride * (batch - 1), 0) + ld * cols, 0, dtype=mats.dtype)
    for b in range(1 if stride == 0 else batch):
        for j in range(cols):
            flat[b * stride + j * ld : b * stride + j * ld + rows] = stored[b, :, j]
    return flat


@pytest.mark.parametrize("dtype", KINDS)
@pytest.mark.parametrize("transa, transb", list(itertools.product((0, 1), repeat=2)))
@pytest.mark.parametrize("pad, shared_b", [(0, False), (3, False), (2, True)])
def test_every_transpose_ld_and_stride_matches_a_float64_reference(dtype, transa, transb, pad, shared_b):
    rng = np.random.default_rng(transa * 4 + transb * 2 + pad)
    batch, m, n, k = 3, 5, 4, 33
    a_vals, a_store = _store(rng.standard_normal((batch, m, k)), dtype)
    b_vals, b_store = _store(rng.standard_normal((1 if shared_b else batch, k, n)), dtype)
    lda = (m if transa == 0 else k) + pad
    ldb = (k if transb == 0 else n) + pad
    stride_a, stride_b = lda * (k if transa == 0 else m) + 1, 0 if shared_b else ldb * (n if transb == 0 else k) + 2
    a_buf = cp.asarray(_column_major(a_store, transa, lda, stride_a))
    b_buf = cp.asarray(_column_major(b_store, transb, ldb, stride_b))
    ldc, stride_c = m + pad, (m + pad) * n + 5
    c_buf = cp.zeros(stride_c * batch, dtype=a_buf.dtype)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    cublas.gemmStridedBatchedEx(
        cublas.get_cublas_handle(),
        transa,
        transb,
        m,
        n,
        k,
        one.ctypes.data,
        a_buf.data.ptr,
        KINDS[dtype],
        lda,
        stride_a,
        b_buf.data.ptr,
        KINDS[dtype],
        ldb,
        stride_b,
        zero.ctypes.data,
        c_buf.data.ptr,
        KINDS[dtype],
        ldc,
        stride_c,
        batch,
        cublas.CUBLAS_COMPUTE_32F,
        cublas.CUBLAS_GEMM_DEFAULT,
    )
    host = c_buf.get().view(np.uint16) if dtype == "bfloat16" else c_buf.get()
    raw = np.lib.stride_tricks.as_strided(host, (batch, m, n), (stride_c * 2, 2, ldc * 2))
    got = (raw.astype(np.uint32) << 16).view(np.float32) if dtype == "bfloat16" else raw.astype(np.float32)
    a64, b64 = a_vals.astype(np.float64), np.broadcast_to(b_vals.astype(np.float64), (batch, k, n))
    ref = a64 @ b64
    _within(got, ref, np.abs(a64) @ np.abs(b64), k, dtype)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(transa=2), "transa = 2; the simulator implements CUBLAS_OP_N \\(0\\) and CUBLAS_OP_T \\(1\\)"),
        (dict(btype=cublas.CUDA_R_16BF), "types A=2, B=14, C=2"),
        (dict(compute_type=64), "computeType 64"),
        (dict(lda=3), "lda = 3 < 4"),
        (dict(stride_c=4), "output matrices would overlap"),
    ],
)
def test_a_combination_the_simulator_does_not_implement_raises(change, match):
    buf = cp.zeros(64, dtype=np.float16)
    args = dict(
        handle=cublas.get_cublas_handle(),
        transa=0,
        transb=0,
        m=4,
        n=2,
        k=2,
        alpha=np.ones(1, np.float32).ctypes.data,
        a=buf.data.ptr,
        atype=2,
        lda=4,
        stride_a=8,
        b=buf.data.ptr,
        btype=2,
        ldb=2,
        stride_b=4,
        beta=np.zeros(1, np.float32).ctypes.data,
        c=buf.data.ptr,
        ctype=2,
        ldc=4,
        stride_c=8,
        batch=2,
        compute_type=68,
        algo=-1,
    )
    args.update(change)
    with pytest.raises(cublas.CublasSimError, match=match):
        cublas.gemmStridedBatchedEx(**args)


@pytest.mark.parametrize("dtype", KINDS)
def test_16_bit_inputs_with_a_float32_output_are_the_float32_accumulator(dtype):
    """A = B = CUDA_R_16F (or 16BF), C = CUDA_R_32F: exact products, float32 sums, no rounding of C."""
    rng = np.random.default_rng(7)
    m, n, k = 4, 3, 64
    a_vals, a_store = _store(rng.standard_normal((1, m, k)), dtype)
    b_vals, b_store = _store(rng.standard_normal((1, k, n)), dtype)
    a_buf = cp.asarray(_column_major(a_store, 0, m, 0))
    b_buf = cp.asarray(_column_major(b_store, 0, k, 0))
    c_buf = cp.zeros(m * n, dtype=np.float32)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    kind = KINDS[dtype]
    h = cublas.get_cublas_handle()
    args = (one.ctypes.data, a_buf.data.ptr, kind, m, 0, b_buf.data.ptr, kind, k, 0, zero.ctypes.data)
    cublas.gemmStridedBatchedEx(h, 0, 0, m, n, k, *args, c_buf.data.ptr, cublas.CUDA_R_32F, m, m * n, 1, 68, -1)
    got = c_buf.get().reshape(n, m).T.astype(np.float64)
    a64, b64 = a_vals[0].astype(np.float64), b_vals[0].astype(np.float64)
    ref = a64 @ b64
    assert np.all(np.abs(got - ref) <= k * 2.0**-24 * (np.abs(a64) @ np.abs(b64)))
    # ... and C is not rounded to the inputs' 16-bit type: most sums are no 16-bit value.
    rounded = np.asarray(dt.convert(got.astype(np.float32), dt.as_dtype(dtype))).astype(np.float64)
    assert np.count_nonzero(rounded != got) >= got.size - 1


@pytest.mark.parametrize(
    "types",
    [(2, 2, 14), (14, 14, 2), (0, 0, 2), (2, 14, 0)],
    ids=["16F->16BF", "16BF->16F", "32F->16F", "mixed inputs"],
)
def test_the_float32_output_does_not_open_other_type_combinations(types):
    buf = cp.zeros(64, dtype=np.float32)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    a, b, c = types
    with pytest.raises(cublas.CublasSimError, match=f"types A={a}, B={b}, C={c}; the simulator implements"):
        cublas.gemmStridedBatchedEx(
            cublas.get_cublas_handle(),
            *(0, 0, 2, 2, 2, one.ctypes.data, buf.data.ptr, a, 2, 4, buf.data.ptr, b, 2, 4, zero.ctypes.data),
            *(buf.data.ptr, c, 2, 4, 1, 68, -1),
        )


def test_float32_operands_accumulate_in_float32_within_the_bound_of_k_roundings():
    """A and B both CUDA_R_32F (what ampcore_cuda.graphs uses for float32 GEMMs inside a graph, CuPy's matmul
    being unusable there): C = A @ B with CUBLAS_COMPUTE_32F, within Higham's k * u * sum|a||b| of float64."""
    rng = np.random.default_rng(3)
    m, n, k = 5, 7, 300
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    da, db, dc = cp.asarray(a), cp.asarray(b), cp.zeros((m, n), dtype=np.float32)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    cublas.gemmStridedBatchedEx(  # row-major C = A B is column-major C^T = B^T A^T
        cublas.get_cublas_handle(),
        *(0, 0, n, m, k, one.ctypes.data, db.data.ptr, 0, n, k * n, da.data.ptr, 0, k, m * k, zero.ctypes.data),
        *(dc.data.ptr, 0, n, m * n, 1, 68, -1),
    )
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = k * 2.0**-24 * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    err = np.abs(dc.get().astype(np.float64) - exact)
    assert (err <= bound).all() and err.max() > 0  # rounded in float32 (not float64), within the bound


@pytest.fixture
def simulated(monkeypatch, request):
    """The cuda backend on the h100 profile, with every gemmStridedBatchedEx call's (transa, transb, strides);
    cuBLASLt off, so float8 takes the widened-float16 path these tests pin (tests/test_cuda_sim_cublaslt.py
    has the native one).

    Only the backend object, never ampcore's registry: it caches availability for the rest of the process."""
    if shutil.which("g++") is None:
        pytest.skip("the CUDA simulator needs g++ on PATH")
    from ampcore_cuda import cublaslt

    monkeypatch.setenv("AMPCORE_CUDA_SIMULATOR", "h100")
    monkeypatch.setenv(cublaslt.ENV_OFF, "1")
    cublaslt.support.cache_clear()
    request.addfinalizer(cublaslt.support.cache_clear)
    calls = []
    real = cublas.gemmStridedBatchedEx

    def spy(*args):
        calls.append(
            {
                "transa": args[1],
                "transb": args[2],
                "stride_a": args[10],
                "stride_b": args[14],
                "types": (args[8], args[12], args[17]),
            }
        )
        return real(*args)

    monkeypatch.setattr(cublas, "gemmStridedBatchedEx", spy)
    from ampcore_cuda.plugin import CUDABackend

    return CUDABackend(), calls


CASES = {  # name: (a of the product, b of the product) built from host arrays; cuBLAS sees (B, A) swapped
    "plain": (lambda a: a, lambda b: b),
    "a transposed": (lambda a: a.T, lambda b: b),
    "b transposed": (lambda a: a, lambda b: b.T),
    "both transposed": (lambda a: a.T, lambda b: b.T),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES)
def test_matmul_passes_transposed_views_as_op_t_without_copying(simulated, case, dtype):
    backend, calls = simulated
    rng = np.random.default_rng(1)
    make_a, make_b = CASES[case]
    a_host = rng.standard_normal((6, 40) if case in ("plain", "b transposed") else (40, 6))
    b_host = rng.standard_normal((40, 3) if case in ("plain", "a transposed") else (3, 40))
    a_arr, b_arr = backend.from_numpy(a_host, dtype), backend.from_numpy(b_host, dtype)
    from ampcore_cuda.array import CuArray
    from ampcore_cuda.gemm import matmul

    a_view, b_view = CuArray(make_a(a_arr.data), a_arr.dtype), CuArray(make_b(b_arr.data), b_arr.dtype)
    got = backend.to_numpy(matmul(a_view, b_view)).astype(np.float64)
    a64 = make_a(backend.to_numpy(a_arr).astype(np.float64))
    b64 = make_b(backend.to_numpy(b_arr).astype(np.float64))
    ref = a64 @ b64
    _within(got, ref, np.abs(a64) @ np.abs(b64), 40, dtype)
    (call,) = calls
    assert (call["transb"], call["transa"]) == (
        int("a transposed" in case or "both" in case),
        int("b transposed" in case or "both" in case),
    )


def test_a_broadcast_batch_goes_as_stride_zero(simulated):
    backend, calls = simulated
    from ampcore_cuda.gemm import matmul

    rng = np.random.default_rng(2)
    a, w = (
        backend.from_numpy(rng.standard_normal((4, 5, 8)), "float16"),
        backend.from_numpy(rng.standard_normal((8, 3)), "float16"),
    )
    got = backend.to_numpy(matmul(a, w)).astype(np.float64)
    a64, w64 = backend.to_numpy(a).astype(np.float64), backend.to_numpy(w).astype(np.float64)
    ref = a64 @ w64
    _within(got, ref, np.abs(a64) @ np.abs(w64), 8, "float16")
    assert calls[-1]["stride_a"] == 0  # cuBLAS's A is w, shared by the batch


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_widens_to_float16_exactly_for_every_bit_pattern(simulated, fmt):
    backend, _ = simulated
    from ampcore_cuda.float8 import _widen

    d = dt.as_dtype(fmt)
    every = np.arange(256, dtype=np.uint8).view(d.numpy)
    got = backend.to_numpy(_widen(backend.from_numpy(every, fmt))).view(np.uint16)
    want = every.astype(np.float16).view(np.uint16)
    nan = np.isnan(every.astype(np.float32))
    assert np.array_equal(got[~nan], want[~nan]), "a finite or infinite float8 value changed on widening"
    wide = got.view(np.float16)
    assert np.isnan(wide[nan]).all() and np.array_equal(np.signbit(wide[nan]), np.signbit(every[nan]))


def _assert_scaled_product(got: np.ndarray, a64: np.ndarray, b64: np.ndarray, out: str, bias: Any = 0.0) -> None:
    """``got`` is the float64 ``a64 @ b64 + bias`` (the scaled operands) within the accumulation rule: float32
    accumulation over K and the two scalings (K + 2 roundings), one rounding to ``out``."""
    k = a64.shape[-1]
    want = a64 @ b64 + bias
    size = np.abs(a64) @ np.abs(b64) + np.abs(bias)
    assert_accumulated(np.asarray(got, np.float64), want, size, out, k + 2, what=f"scaled_mm to {out}")


@pytest.mark.parametrize("out", ["float32", "bfloat16"])
@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
def test_scaled_mm_is_one_float16_gemm_into_float32_with_the_scales_on_the_accumulator(simulated, rowwise, out):
    """One gemmStridedBatchedEx with A, B CUDA_R_16F and C CUDA_R_32F; the result within the contract's
    tolerance of the float64 product of the scaled operands (e5m2 subnormals and maxima included)."""
    backend, calls = simulated
    from ampcore_cuda.float8 import scaled_mm

    rng = np.random.default_rng(3)
    m, k, n = 5, 40, 6
    a = (rng.standard_normal((m, k)) * 4).astype(dt.float8_e4m3fn.numpy)
    b = (rng.standard_normal((k, n)) * 2.0 ** rng.integers(-16, 15, (k, n))).astype(dt.float8_e5m2.numpy)
    b[0, :] = dt.finfo(dt.float8_e5m2).max
    a[:, 0] = dt.finfo(dt.float8_e4m3fn).max
    sa = rng.uniform(0.01, 3, (m, 1) if rowwise else ()).astype(np.float32)
    sb = rng.uniform(0.01, 3, (1, n) if rowwise else ()).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    got = scaled_mm(
        backend.from_numpy(a, "float8_e4m3fn"),
        backend.from_numpy(b, "float8_e5m2"),
        backend.from_numpy(sa, "float32"),
        backend.from_numpy(sb, "float32"),
        dt.as_dtype(out),
        backend.from_numpy(bias, "float32"),
        False,
    )
    assert [c["types"] for c in calls] == [(cublas.CUDA_R_16F, cublas.CUDA_R_16F, cublas.CUDA_R_32F)]
    _assert_scaled_product(backend.to_numpy(got), a.astype(np.float64) * sa, b.astype(np.float64) * sb, out, bias)


def test_a_scale_varying_along_k_falls_back_to_scaled_float32_operands(simulated):
    """scale_a per column of a (along K) does not factor out of the sum: no float16 GEMM, the right numbers."""
    backend, calls = simulated
    from ampcore_cuda.float8 import scaled_mm

    rng = np.random.default_rng(4)
    m, k, n = 3, 8, 4
    a = (rng.standard_normal((m, k)) * 4).astype(dt.float8_e4m3fn.numpy)
    b = (rng.standard_normal((k, n)) * 4).astype(dt.float8_e4m3fn.numpy)
    sa = rng.uniform(0.5, 2, (1, k)).astype(np.float32)
    sb = np.float32(0.25)
    got = scaled_mm(
        backend.from_numpy(a, "float8_e4m3fn"),
        backend.from_numpy(b, "float8_e4m3fn"),
        backend.from_numpy(sa, "float32"),
        backend.from_numpy(np.asarray(sb), "float32"),
        dt.float32,
        None,
        False,
    )
    assert all(c["types"][2] != cublas.CUDA_R_32F for c in calls)
    _assert_scaled_product(backend.to_numpy(got), a.astype(np.float64) * sa, b.astype(np.float64) * sb, "float32")


def test_scaled_mm_passes_a_transposed_float8_operand_as_op_t(simulated):
    """Float8Linear's ``weight.t()``: widened over its own storage and given to cuBLAS as CUBLAS_OP_T."""
    backend, calls = simulated
    from ampcore_cuda.array import CuArray
    from ampcore_cuda.float8 import scaled_mm

    rng = np.random.default_rng(5)
    m, k, n = 4, 24, 3
    a = (rng.standard_normal((m, k)) * 4).astype(dt.float8_e4m3fn.numpy)
    w = (rng.standard_normal((n, k)) * 4).astype(dt.float8_e4m3fn.numpy)  # stored (N, K), used as (K, N)
    w_arr = backend.from_numpy(w, "float8_e4m3fn")
    one = backend.from_numpy(np.asarray(np.float32(0.5)), "float32")
    a_arr = backend.from_numpy(a, "float8_e4m3fn")
    got = scaled_mm(a_arr, CuArray(w_arr.data.T, w_arr.dtype), one, one, dt.float32, None, False)
    (call,) = calls
    assert call["transa"] == cublas.CUBLAS_OP_T and call["transb"] == cublas.CUBLAS_OP_N
    _assert_scaled_product(backend.to_numpy(got), a.astype(np.float64) * 0.5, w.T.astype(np.float64) * 0.5, "float32")
