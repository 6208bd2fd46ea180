"""The cuda backend's elementwise primitives and casts on the CUDA simulator (or the GPU, where there is one),
where the conformance suite's checks alone would not point at the cause: 0-d arrays through CuPy 14's
``ascontiguousarray``, and the subnormal (flush-to-zero) behaviour real CuPy's own kernels have and this
backend's kernels must not."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from ampcore import dtypes as dt
from ampcore.kernels import KernelTable

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")
FLOATS = ["float32", "float64", "float16", "bfloat16"]


class _Backend:
    """The backend with ``kernel_functions()`` indexable by any kernel name, the programs' included (their
    kernels rendered by its elementwise primitive, as its kernel table does)."""

    def __init__(self, backend):
        self._backend = backend
        self._table = KernelTable(backend.name, backend.kernel_functions(), backend.name)

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def kernel_functions(self):
        table = self._table

        class Kernels:
            def __getitem__(self, name):
                return getattr(table, name)

        return Kernels()


@pytest.fixture
def backend(monkeypatch):
    monkeypatch.setenv("AMPCORE_CUDA_SIMULATOR", "h100")
    from ampcore_cuda.plugin import CUDABackend

    return _Backend(CUDABackend())


@pytest.mark.parametrize("dst", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("src", FLOATS)
def test_a_zero_dimensional_cast_stays_zero_dimensional(backend, src, dst):
    x = backend.from_numpy(np.asarray(2.5), getattr(dt, src))
    out = backend.kernel_functions()["cast"](x, getattr(dt, dst))
    assert backend.to_numpy(out).shape == ()
    assert float(backend.to_numpy(out)) == 2.5


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_full_reduction_of_16_bit_values_is_zero_dimensional(backend, dtype):
    x = backend.from_numpy(np.arange(6.0).reshape(2, 3), getattr(dt, dtype))
    for name in ("sum", "max"):
        out = backend.to_numpy(backend.kernel_functions()[name](x, (0, 1)))
        assert out.shape == () and float(out) == {"sum": 15.0, "max": 5.0}[name]


def test_contiguous_keeps_the_shape_where_cupy14s_ascontiguousarray_makes_0_d_1_d(backend):
    from ampcore_cuda.array import contiguous
    from ampcore_cuda.runtime import import_cupy

    cp = import_cupy()
    zero_d = cp.asarray(np.float32(3))
    assert cp.ascontiguousarray(zero_d).shape == (1,)  # the simulator does what CuPy 14 does
    assert contiguous(zero_d).shape == () and contiguous(zero_d, dtype=np.float64).dtype == np.float64
    strided = cp.asarray(np.arange(12.0).reshape(3, 4))[:, ::2]
    assert contiguous(strided).flags.c_contiguous and contiguous(strided).shape == (3, 2)


# --------------------------------------------------------------------------- flush to zero
SUB32 = np.array([1e-45, -1e-45, 1e-39, -1.1754942e-38], dtype=np.float32)  # float32 subnormals


def test_the_simulators_cupy_flushes_float32_subnormals_as_cupys_ftz_kernels_do(backend):
    from ampcore_cuda.runtime import import_cupy, simulated

    if not simulated():
        pytest.skip("a real GPU runs CuPy: nothing simulated to check")
    cp = import_cupy()
    x = cp.asarray(SUB32)
    zeros = np.copysign(np.zeros(4, np.float32), SUB32)
    for flushed in (x * 1, x.astype(np.float64).astype(np.float32)):
        assert flushed.get().tobytes() == zeros.tobytes()  # a zero of the subnormal's sign
    assert not cp.add(x, 0).get().any() and not cp.sqrt(cp.abs(x)).get().any()
    assert not (x != 0).get().any()  # comparisons read subnormals as zero too
    assert float(cp.sum(x)) == 0.0
    assert cp.matmul(x[None, :1], cp.ones((1, 1), np.float32)).get()[0, 0] == SUB32[0]  # cuBLAS does not flush
    assert x.get().tobytes() == SUB32.tobytes()  # the inputs themselves are left alone


@pytest.mark.parametrize("op", ["neg", "abs", "sqrt", "sign"])
def test_unary_float32_kernels_keep_subnormals(backend, op):
    x = backend.from_numpy(np.abs(SUB32) if op == "sqrt" else SUB32, dt.float32)
    got = backend.to_numpy(backend.kernel_functions()[op](x))
    ref = {"neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "sign": np.sign}[op](
        np.abs(SUB32) if op == "sqrt" else SUB32
    )
    assert got.tobytes() == ref.astype(np.float32).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_binary_kernels_and_comparisons_keep_subnormals(backend, dtype):
    k = backend.kernel_functions()
    values = SUB32.astype(np.float64) if dtype == "float32" else np.array([9.2e-41, -9.2e-41, 1e-39, -1.1e-38])
    host = np.asarray(dt.convert(values, getattr(dt, dtype)))
    x = backend.from_numpy(host.astype(np.float64), getattr(dt, dtype))
    assert backend.to_numpy(k["add"](x, 0.0)).tobytes() == host.tobytes()
    assert backend.to_numpy(k["mul"](x, backend.from_numpy(np.ones(4), getattr(dt, dtype)))).tobytes() == host.tobytes()
    assert backend.to_numpy(k["ne"](x, 0.0)).all()
    assert backend.to_numpy(k["lt"](x, 0.0)).tolist() == (host.astype(np.float64) < 0).tolist()
    assert backend.to_numpy(k["cast"](x, dt.bool_)).all()


@pytest.mark.parametrize(
    "src, dst", [("float32", "float64"), ("float64", "float32"), ("bfloat16", "float64"), ("float64", "bfloat16")]
)
def test_casts_between_floats_keep_subnormals(backend, src, dst):
    values = SUB32.astype(np.float64) if "bfloat16" not in (src, dst) else np.array([9.183549615799121e-41, -1e-39])
    x = backend.from_numpy(values, getattr(dt, src))
    got = backend.to_numpy(backend.kernel_functions()["cast"](x, getattr(dt, dst)))
    want = np.asarray(dt.convert(np.asarray(dt.convert(values, getattr(dt, src))).astype(np.float64), getattr(dt, dst)))
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", FLOATS)
def test_where_keeps_the_sign_of_a_negative_zero_scalar(backend, dtype):
    cond = backend.from_numpy(np.array([True, False, True]), dt.bool_)
    x = backend.from_numpy(np.array([1.0, 2.0, 3.0]), getattr(dt, dtype))
    got = backend.to_numpy(backend.kernel_functions()["where"](cond, x, -0.0)).astype(np.float64)
    assert got.tolist() == [1.0, 0.0, 3.0] and np.signbit(got[1])
    got = backend.to_numpy(backend.kernel_functions()["where"](cond, -0.0, x)).astype(np.float64)
    assert np.signbit(got[0]) and got[1] == 2.0


def test_log_of_a_negative_subnormal_is_nan_and_pow_one_is_exact(backend):
    k = backend.kernel_functions()
    tiny = np.array([-5e-324, -2.2250738585072e-308, 5e-324, 1.1151910142100803e-308])
    x = backend.from_numpy(tiny, dt.float64)
    assert np.isnan(backend.to_numpy(k["log"](x))[:2]).all()
    assert (
        backend.to_numpy(k["pow"](backend.from_numpy(np.abs(tiny), dt.float64), 1.0)).tobytes()
        == np.abs(tiny).tobytes()
    )
