"""The simulator's cuBLASLt stand-in (ampcore_cuda.sim.cublaslt) and the cuda backend's native float8 GEMMs on it.

The stand-in refuses what the cuBLAS documentation says cuBLASLt refuses for float8 (types, compute and scale
types, the TN layout before sm_100, 16-byte alignment, the scale modes per architecture and version, bias
types) and computes the documented formula; the backend sends a call to cuBLASLt exactly where the device
and the call qualify (tensor-wise scales from sm_89, row-wise as outer vectors on sm_90, MXFP8 blocks on
sm_100) and takes its widened-float16 (or float32) path everywhere else, with the same numbers within the
kernel contract's tolerance.  In-process, like tests/test_cuda_sim_cublas.py: the backend object only.
"""

from __future__ import annotations

import shutil
from types import SimpleNamespace
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from ampcore import dtypes as dt
from ampcore_cuda import cublaslt, runtime
from ampcore_cuda.sim import PROFILES, cupy_module
from ampcore_cuda.sim import cublaslt as stand_in

E4M3, E5M2 = dt.float8_e4m3fn, dt.float8_e5m2
NOT_SUPPORTED, INVALID = 15, 7


@pytest.fixture
def on(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``on(profile)``: (the cuda backend on that simulated device, its cuBLASLt stand-in with its calls)."""
    if shutil.which("g++") is None:
        pytest.skip("the CUDA simulator needs g++ on PATH")
    monkeypatch.delenv(cublaslt.ENV_OFF, raising=False)
    cublaslt.support.cache_clear()
    made: list[Any] = []

    def use(profile: str) -> tuple[Any, Any]:
        monkeypatch.setenv("AMPCORE_CUDA_SIMULATOR", profile)
        cublaslt.support.cache_clear()
        lt = stand_in.make_cublaslt(PROFILES[profile])
        monkeypatch.setattr(lt, "version", stand_in.VERSION)
        lt.calls.clear()
        made.append(lt)
        from ampcore_cuda.plugin import CUDABackend

        return CUDABackend(), lt

    yield use
    cublaslt.support.cache_clear()


# --------------------------------------------------------------------------- the stand-in, called directly
def _f8(rng: np.random.Generator, shape: tuple[int, ...], d: dt.DType, spread: float = 4.0) -> np.ndarray:
    return (rng.standard_normal(shape) * spread).astype(np.float32).astype(d.numpy)


class Problem:
    """One float8 matmul set up on the stand-in the way the backend sets it up (TN, row-major in and out)."""

    def __init__(self, profile: str, m: int, n: int, k: int, **change: Any) -> None:
        self.lt = stand_in.make_cublaslt(PROFILES[profile])
        self.cp = cupy_module(PROFILES[profile])
        self.m, self.n, self.k = m, n, k
        self.change = {
            "types": (E4M3, E4M3),
            "out": dt.bfloat16,
            "trans": (stand_in.CUBLAS_OP_T, stand_in.CUBLAS_OP_N),
            "compute": stand_in.CUBLAS_COMPUTE_32F,
            "modes": None,
            "c_type": None,
            "ld_pad": 0,
            "offset": 0,
            "bias": None,
        } | change
        rng = np.random.default_rng(k)
        ta, tb = self.change["types"]
        self.a, self.bt = _f8(rng, (m, k), ta), _f8(rng, (n, k), tb)

    def _dev(self, host: np.ndarray, offset: int = 0) -> Any:
        raw = np.zeros(host.nbytes + 64, np.uint8)
        raw[offset : offset + host.nbytes] = host.reshape(-1).view(np.uint8)
        buf = self.cp.asarray(raw)
        return buf, buf.data.ptr + offset

    def run(
        self, scales: tuple[np.ndarray, np.ndarray] = (np.float32(0.5), np.float32(2.0)), forge_algo: bool = False
    ) -> np.ndarray:
        lt, c = self.lt, self.change
        m, n, k, pad = self.m, self.n, self.k, c["ld_pad"]
        attr = lt.MatmulDescAttribute
        desc = lt.matmul_desc_create(c["compute"], 0)

        def put(a: Any, value: int) -> None:
            buf = np.array(value, dtype=lt.get_matmul_desc_attribute_dtype(a))
            lt.matmul_desc_set_attribute(desc, a, buf.ctypes.data, buf.itemsize)

        put(attr.TRANSA, c["trans"][0])
        put(attr.TRANSB, c["trans"][1])
        if c["modes"] is not None:
            put(attr.A_SCALE_MODE, c["modes"][0])
            put(attr.B_SCALE_MODE, c["modes"][1])
        keep = []
        for which, s in ((attr.A_SCALE_POINTER, scales[1]), (attr.B_SCALE_POINTER, scales[0])):
            buf, ptr = self._dev(np.ascontiguousarray(s))
            keep.append(buf)
            put(which, ptr)
        if c["bias"] is not None:
            bias_host, bias_type = c["bias"]
            buf, ptr = self._dev(bias_host)
            keep.append(buf)
            put(attr.EPILOGUE, 4)
            put(attr.BIAS_DATA_TYPE, cublaslt.CUDA_R[bias_type])
            put(attr.BIAS_POINTER, ptr)
        a_stored = np.zeros((n, k + pad), self.bt.dtype)  # cuBLASLt's A: our b^T, K-major with ld k + pad
        a_stored[:, :k] = self.bt
        b_stored = np.zeros((m, k + pad), self.a.dtype)
        b_stored[:, :k] = self.a
        a_buf, a_ptr = self._dev(a_stored, c["offset"])
        b_buf, b_ptr = self._dev(b_stored)
        out_code = cublaslt.CUDA_R[c["out"]]
        layouts = (
            lt.matrix_layout_create(cublaslt.CUDA_R[self.change["types"][1]], k, n, k + pad),
            lt.matrix_layout_create(cublaslt.CUDA_R[self.change["types"][0]], k, m, k + pad),
            lt.matrix_layout_create(c["c_type"] if c["c_type"] is not None else out_code, n, m, n),
            lt.matrix_layout_create(out_code, n, m, n),
        )
        pref = lt.matmul_preference_create()
        result, found = lt.MatmulHeuristicResult(1), np.zeros(1, np.int32)
        lt.matmul_algo_get_heuristic(lt.create(), desc, *layouts, pref, 1, result.ptr, found.ctypes.data)
        assert found[0] == 1
        if forge_algo:
            result = lt.MatmulHeuristicResult(1)  # zeros: no algo the heuristic gave
        d_buf = self.cp.zeros(m * n * 4 + 64, dtype=np.uint8)
        one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
        lt.matmul(
            lt.create(), desc, one.ctypes.data, a_ptr, layouts[0], b_ptr, layouts[1], zero.ctypes.data, b_ptr,
            layouts[2], d_buf.data.ptr, layouts[3], result.ptr, 0, 0, 0,
        )  # fmt: skip
        size = {dt.bfloat16: 2, dt.float16: 2, dt.float32: 4}[c["out"]]
        words = np.asarray(d_buf)[: m * n * size].view({2: np.uint16, 4: np.float32}[size]).reshape(m, n)
        if c["out"] == dt.bfloat16:
            return words.view(ml_dtypes.bfloat16).astype(np.float64)
        return words.view(np.float16 if size == 2 else np.float32).astype(np.float64)


def _refused(status: int, match: str, profile: str, m: int = 8, n: int = 16, k: int = 32, **change: Any) -> None:
    with pytest.raises(stand_in.cuBLASLtError, match=match) as info:
        Problem(profile, m, n, k, **change).run()
    assert info.value.status == status


@pytest.mark.parametrize(
    "profile, change, status, match",
    [
        ("t4", {}, NOT_SUPPORTED, "compute capability 8.9"),
        ("h100", {"types": (E5M2, E5M2)}, NOT_SUPPORTED, "both CUDA_R_8F_E5M2"),
        ("h100", {"compute": 77}, NOT_SUPPORTED, "CUBLAS_COMPUTE_32F"),
        ("h100", {"trans": (0, 0)}, NOT_SUPPORTED, "TN"),
        ("l4", {"trans": (1, 1)}, NOT_SUPPORTED, "TN"),
        ("h100", {"ld_pad": 4}, NOT_SUPPORTED, "multiple of 16 bytes"),
        ("h100", {"offset": 8}, INVALID, "16-byte aligned"),
        ("h100", {"c_type": 0}, NOT_SUPPORTED, "C type 0 and D type 14"),
        ("h100", {"bias": (np.zeros(16, np.float16), dt.float16)}, NOT_SUPPORTED, "must be of type 14"),
        ("l4", {"modes": (3, 3)}, NOT_SUPPORTED, "outer-vector scaling needs compute capability 9.x"),
        ("b200", {"modes": (3, 3)}, NOT_SUPPORTED, "outer-vector scaling needs compute capability 9.x"),
        ("h100", {"modes": (2, 2)}, NOT_SUPPORTED, "block scaling needs sm_100"),
    ],
)
def test_the_stand_in_refuses_what_cublaslt_refuses(profile, change, status, match):
    _refused(status, match, profile, **change)


def test_dimensions_must_span_16_bytes():
    _refused(NOT_SUPPORTED, "K = 24", "h100", k=24, ld_pad=8)  # ld 32: only K itself is off
    _refused(NOT_SUPPORTED, "ldC = 12 is not a multiple of 16 bytes", "h100", n=12, out=dt.float16)  # 24 bytes
    Problem("h100", 8, 12, 32, out=dt.float32).run()  # 48 bytes: fine


def test_the_version_gates_the_scale_modes(monkeypatch):
    lt = stand_in.make_cublaslt(PROFILES["h100"])
    monkeypatch.setattr(lt, "version", 120800)
    _refused(NOT_SUPPORTED, "cuBLASLt 12.9", "h100", modes=(3, 3))
    monkeypatch.setattr(lt, "version", 120700)
    _refused(INVALID, "no scale-mode attributes", "h100", modes=(0, 0))


def test_mx_block_scaling_needs_k_a_multiple_of_32():
    _refused(NOT_SUPPORTED, "K a multiple of 32", "b200", k=48, modes=(2, 2))


def test_an_algo_the_heuristic_did_not_return_is_refused():
    with pytest.raises(stand_in.cuBLASLtError, match="not returned by cublasLtMatmulAlgoGetHeuristic"):
        Problem("h100", 8, 16, 32).run(forge_algo=True)


@pytest.mark.parametrize("out", [dt.bfloat16, dt.float16, dt.float32])
@pytest.mark.parametrize("types", [(E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3)])
def test_the_stand_in_computes_the_documented_tensorwise_formula(out, types):
    p = Problem("h100", 8, 16, 64, types=types, out=out)
    got = p.run((np.float32(0.375), np.float32(3.0)))
    a64, b64 = p.a.astype(np.float64) * 0.375, p.bt.astype(np.float64).T * 3.0
    _within(got, a64 @ b64, np.abs(a64) @ np.abs(b64), 64, out)


def test_outer_vector_scales_are_per_row_of_a_and_per_column_of_b():
    p = Problem("h100", 8, 16, 32, modes=(3, 3))
    rng = np.random.default_rng(1)
    sa, sb = rng.uniform(0.1, 4, 8).astype(np.float32), rng.uniform(0.1, 4, 16).astype(np.float32)
    got = p.run((sa, sb))
    a64, b64 = p.a.astype(np.float64) * sa[:, None], p.bt.astype(np.float64).T * sb[None, :]
    _within(got, a64 @ b64, np.abs(a64) @ np.abs(b64), 32, dt.bfloat16)


def _within(got: np.ndarray, want: np.ndarray, magnitude: np.ndarray, k: int, out: dt.DType) -> None:
    tol = dt.finfo(out).eps / 2 * np.abs(want) + (k + 2) * 2.0**-24 * magnitude
    assert np.all(np.abs(got - want) <= tol), np.max(np.abs(got - want) - tol)


# --------------------------------------------------------------------------- the backend's routing
def _arrays(backend: Any, m: int, k: int, n: int, types=(E4M3, E4M3), seed: int = 0) -> tuple[Any, ...]:
    """a (M, K) row-major and b (K, N) as Float8Linear passes a weight: the transpose of an (N, K) array."""
    from ampcore_cuda.array import CuArray

    rng = np.random.default_rng(seed)
    a, bt = _f8(rng, (m, k), types[0]), _f8(rng, (n, k), types[1])
    b_dev = backend.from_numpy(bt, types[1].name)
    return a, bt, backend.from_numpy(a, types[0].name), CuArray(b_dev.data.T, types[1])


def _scale(backend: Any, values: Any) -> Any:
    return backend.from_numpy(np.asarray(values, np.float32), "float32")


def _contract(got: np.ndarray, a64: np.ndarray, b64: np.ndarray, out: dt.DType, bias: Any = 0.0) -> None:
    """The kernel contract: one rounding to ``out`` plus float32 accumulation (scales on the accumulator)."""
    k = a64.shape[1]
    want = a64 @ b64 + bias
    tol = dt.finfo(out).eps / 2 * np.abs(want) + (k + 2) * 2.0**-24 * (np.abs(a64) @ np.abs(b64) + np.abs(bias))
    assert np.all(np.abs(got.astype(np.float64) - want) <= tol)


@pytest.mark.parametrize("types", [(E4M3, E4M3), (E5M2, E4M3), (E4M3, E5M2)])
@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
def test_h100_runs_tensorwise_and_rowwise_scaled_mm_on_cublaslt(on, rowwise, types):
    backend, lt = on("h100")
    from ampcore_cuda.float8 import scaled_mm

    m, k, n = 24, 48, 32
    a, bt, a_dev, b_dev = _arrays(backend, m, k, n, types)
    rng = np.random.default_rng(2)
    sa = rng.uniform(0.05, 2, (m, 1) if rowwise else ()).astype(np.float32)
    sb = rng.uniform(0.05, 2, (1, n) if rowwise else ()).astype(np.float32)
    got = scaled_mm(a_dev, b_dev, _scale(backend, sa), _scale(backend, sb), dt.bfloat16, None, False)
    assert [c["modes"] for c in lt.calls] == [(3, 3) if rowwise else (0, 0)]
    _contract(backend.to_numpy(got), a.astype(np.float64) * sa, bt.T.astype(np.float64) * sb, dt.bfloat16)


def test_a_row_major_b_is_copied_k_major_first(on):
    backend, lt = on("h100")
    from ampcore_cuda.float8 import scaled_mm

    rng = np.random.default_rng(3)
    a, b = _f8(rng, (16, 32), E4M3), _f8(rng, (32, 16), E4M3)
    one = _scale(backend, 1.0)
    got = scaled_mm(backend.from_numpy(a, "float8_e4m3fn"), backend.from_numpy(b, "float8_e4m3fn"), one, one,
                    dt.float32, None, False)  # fmt: skip
    assert len(lt.calls) == 1
    _contract(backend.to_numpy(got), a.astype(np.float64), b.astype(np.float64), dt.float32)


@pytest.mark.parametrize(
    "profile, m, k, n, types, rowwise, why",
    [
        ("h100", 8, 40, 16, (E4M3, E4M3), False, "K not a multiple of 16"),
        ("h100", 8, 32, 6, (E4M3, E4M3), False, "D's rows 12 bytes"),
        ("h100", 8, 32, 16, (E5M2, E5M2), False, "e5m2 x e5m2"),
        ("l4", 8, 32, 16, (E4M3, E4M3), True, "no outer vectors on sm_89"),
        ("b200", 8, 32, 16, (E4M3, E4M3), True, "no outer vectors on sm_100"),
    ],
)
def test_calls_cublaslt_would_refuse_take_the_widened_float16_path(on, profile, m, k, n, types, rowwise, why):
    backend, lt = on(profile)
    from ampcore_cuda.float8 import scaled_mm

    a, bt, a_dev, b_dev = _arrays(backend, m, k, n, types)
    sa = np.full((m, 1) if rowwise else (), 0.5, np.float32)
    sb = np.full((1, n) if rowwise else (), 0.25, np.float32)
    got = scaled_mm(a_dev, b_dev, _scale(backend, sa), _scale(backend, sb), dt.float32, None, False)
    assert lt.calls == [], why
    _contract(backend.to_numpy(got), a.astype(np.float64) * sa, bt.T.astype(np.float64) * sb, dt.float32)


def test_the_environment_variable_turns_cublaslt_off(on, monkeypatch):
    backend, lt = on("h100")
    monkeypatch.setenv(cublaslt.ENV_OFF, "1")
    cublaslt.support.cache_clear()
    from ampcore_cuda.float8 import scaled_mm

    a, bt, a_dev, b_dev = _arrays(backend, 16, 32, 16)
    one = _scale(backend, 1.0)
    scaled_mm(a_dev, b_dev, one, one, dt.bfloat16, None, False)
    assert lt.calls == [] and cublaslt.ENV_OFF in cublaslt.support(0).summary
    assert backend.capabilities(0).float8 == "emulated"


@pytest.mark.parametrize(
    "out, bias_dtype, epilogue",
    [(dt.bfloat16, dt.bfloat16, True), (dt.float16, dt.float16, True), (dt.float32, dt.bfloat16, True),
     (dt.bfloat16, dt.float32, False), (dt.float32, dt.float32, False)],
)  # fmt: skip
def test_a_bias_goes_in_the_epilogue_or_after_a_float32_product(on, out, bias_dtype, epilogue):
    backend, lt = on("h100")
    from ampcore_cuda.float8 import scaled_mm

    m, k, n = 8, 32, 16
    a, bt, a_dev, b_dev = _arrays(backend, m, k, n)
    bias = np.asarray(dt.convert(np.linspace(-3, 3, n), bias_dtype)).astype(np.float64)
    got = scaled_mm(a_dev, b_dev, _scale(backend, 0.5), _scale(backend, 2.0), out,
                    backend.from_numpy(bias, bias_dtype.name), False)  # fmt: skip
    ((call,),) = [lt.calls]
    assert call["types"][2] == cublaslt.CUDA_R[out if epilogue else dt.float32]
    _contract(backend.to_numpy(got), a.astype(np.float64) * 0.5, bt.T.astype(np.float64) * 2.0, out, bias)


def _mx_operands(backend: Any, m: int, k: int, n: int) -> tuple[Any, ...]:
    from ampcore_cuda.array import CuArray

    rng = np.random.default_rng(4)
    a, bt = _f8(rng, (m, k), E4M3), _f8(rng, (n, k), E4M3)
    sa = (2.0 ** rng.integers(-30, 30, (m, k // 32))).astype(np.float32)
    sbt = (2.0 ** rng.integers(-30, 30, (n, k // 32))).astype(np.float32)
    sa[0, 0], sbt[-1, -1] = 2.0**-127, 2.0**-60  # e8m0's least is a float32 subnormal: byte 0
    b_dev = backend.from_numpy(bt, "float8_e4m3fn")
    sb_dev = backend.from_numpy(sbt, "float32")
    args = (
        backend.from_numpy(a, "float8_e4m3fn"),
        CuArray(b_dev.data.T, E4M3),
        backend.from_numpy(sa, "float32"),
        CuArray(sb_dev.data.T, dt.float32),
    )
    a64 = a.astype(np.float64) * sa.astype(np.float64).repeat(32, 1)
    b64 = (bt.astype(np.float64) * sbt.astype(np.float64).repeat(32, 1)).T
    return args, a64, b64


@pytest.mark.parametrize("m, n", [(8, 16), (130, 24)])  # 130 rows: a second tile of 128 in the scale layout
def test_b200_runs_mxfp8_on_cublaslt_with_tiled_e8m0_scales(on, m, n):
    backend, lt = on("b200")
    from ampcore_cuda.float8 import scaled_mm_mx

    k = 160  # 5 blocks: the inner scale dimension padded to 8
    args, a64, b64 = _mx_operands(backend, m, k, n)
    got = scaled_mm_mx(*args, dt.float32, None, False)
    assert [c["modes"] for c in lt.calls] == [(2, 2)]
    _contract(backend.to_numpy(got), a64, b64, dt.float32)


def test_mxfp8_elsewhere_dequantizes_the_blocks_into_one_float32_gemm(on):
    backend, lt = on("h100")
    from ampcore_cuda.float8 import scaled_mm_mx

    args, a64, b64 = _mx_operands(backend, 8, 64, 16)
    got = scaled_mm_mx(*args, dt.bfloat16, None, False)
    assert lt.calls == []
    _contract(backend.to_numpy(got), a64, b64, dt.bfloat16)


@pytest.mark.parametrize(
    "profile, float8, words",
    [
        ("h100", "native", ["GEMMs: tensorwise, rowwise;", "mxfp8 (needs sm_100"]),
        ("l4", "native", ["GEMMs: tensorwise;", "rowwise (needs sm_90"]),
        ("b200", "native", ["GEMMs: tensorwise, mxfp8;", "rowwise (needs sm_90"]),
    ],
)
def test_capabilities_say_which_float8_gemms_run_natively(on, profile, float8, words):
    backend, _ = on(profile)
    caps = backend.capabilities(0)
    assert caps.float8 == float8 and all(w in caps.float8_reason for w in words), caps.float8_reason


def test_without_nvmath_a_real_gpu_falls_back_and_says_how_to_install_it(monkeypatch):
    """Not simulated: the import of nvmath.bindings.cublasLt fails, and the summary names the extra."""
    monkeypatch.delenv("AMPCORE_CUDA_SIMULATOR", raising=False)
    monkeypatch.delenv(cublaslt.ENV_OFF, raising=False)
    h100 = SimpleNamespace(compute_capability="90")
    fake_cupy = SimpleNamespace(cuda=SimpleNamespace(Device=lambda index: h100))
    monkeypatch.setattr(cublaslt, "import_cupy", lambda: fake_cupy)
    monkeypatch.setattr(cublaslt, "simulated", lambda: False)

    def missing(name: str) -> Any:
        raise ModuleNotFoundError(f"No module named {name!r}", name="nvmath")

    monkeypatch.setattr(cublaslt.importlib, "import_module", missing)
    cublaslt.support.cache_clear()
    try:
        s = cublaslt.support(0)
    finally:
        cublaslt.support.cache_clear()
    assert not s.tensorwise and "nvmath-python is not installed" in s.summary and "ampcore-cuda[float8]" in s.summary
    assert runtime.FLOAT8_CC == (8, 9)


def test_the_stand_in_speaks_nvmaths_cublaslt():
    """Where nvmath-python is installed (it installs and imports without a GPU), the stand-in's enum values,
    attribute types and heuristic-result layout are nvmath's, so the backend's calls mean the same to both."""
    nvmath_lt = pytest.importorskip("nvmath.bindings.cublasLt", reason="nvmath-python is not installed (an extra)")
    for name in ("MatmulDescAttribute", "MatmulMatrixScale", "MatmulPreferenceAttribute", "Epilogue", "PointerMode"):
        ours, theirs = getattr(stand_in, name), getattr(nvmath_lt, name)
        for member in ours:
            assert int(theirs[member.name]) == int(member), (name, member.name)
    for attr in stand_in.MatmulDescAttribute:
        want = nvmath_lt.get_matmul_desc_attribute_dtype(nvmath_lt.MatmulDescAttribute[attr.name])
        assert np.dtype(stand_in.get_matmul_desc_attribute_dtype(attr)) == np.dtype(want), attr.name
    assert stand_in.matmul_heuristic_result_dtype == nvmath_lt.matmul_heuristic_result_dtype
    assert nvmath_lt.MatmulHeuristicResult(1).ptr  # the buffer the backend passes (its first member: the algo)
    import nvmath

    names = {
        "float8_e4m3fn": "8F_E4M3",
        "float8_e5m2": "8F_E5M2",
        "float32": "32F",
        "float16": "16F",
        "bfloat16": "16BF",
    }
    for dtype, code in cublaslt.CUDA_R.items():
        assert int(nvmath.CudaDataType[f"CUDA_R_{names[dtype.name]}"]) == code, dtype.name
