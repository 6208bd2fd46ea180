"""The opencl matmul kernel: edge tiles, broadcast batches, empty dims, long k, rounding once, integer
wrap-around and no recompiles, on both its paths (packed register-blocked GEMM and the direct kernel).

Products are judged by the accumulation rule (:func:`~ampcore.conformance.tolerance.assert_accumulated`: the
float32 accumulator's worst case over k terms, from sum |a_i b_i|, plus one rounding to the dtype)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyopencl")

from opencl_devices import device, get, put
from opencl_devices import state as gemm_state

from ampcore import dtypes as dt
from ampcore.conformance import EPS
from ampcore.conformance.tolerance import assert_accumulated
from ampcore_opencl import gemm

pytestmark = pytest.mark.usefixtures("opencl_device")  # every test on every OpenCL device
FLOATS = ["float32", "float16", "bfloat16", "float64"]
ODD = [1, 3, 17, 65, 129]


@pytest.fixture(params=["packed", "direct"])
def path(request: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Force one of the two paths whatever the size."""
    monkeypatch.setattr(gemm, "DIRECT_MAX_WORK", -1 if request.param == "packed" else 1 << 62)
    return request.param


def _require(dtype: str) -> None:
    if dtype == "float64" and not gemm_state().fp64:
        pytest.skip("the device has no cl_khr_fp64")


def _run(a: np.ndarray, b: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(opencl result, float64 reference on the values actually stored, the sums of the products' magnitudes)."""
    da, db = put(a, dtype), put(b, dtype)
    a64, b64 = get(da).astype(np.float64), get(db).astype(np.float64)
    return get(gemm.matmul(da, db)), np.matmul(a64, b64), np.matmul(np.abs(a64), np.abs(b64))


@pytest.mark.parametrize("dtype", FLOATS)
def test_odd_sizes_match_float64(path, dtype):
    """Every m, k, n in ODD (edge tiles in rows and columns, k shorter and longer than a block)."""
    _require(dtype)
    rng = np.random.default_rng(1)
    for m in ODD:
        for k in ODD:
            for n in ODD:
                out, ref, size = _run(rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n)), dtype)
                assert out.dtype == dt.as_dtype(dtype).numpy
                assert_accumulated(out, ref, size, dtype, k, what=f"{path} ({m}, {k}) @ ({k}, {n}) in {dtype}")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_empty_k_gives_zeros(path, dtype):
    rng = np.random.default_rng(2)
    for sa, sb in [((3, 0), (0, 4)), ((2, 13, 0), (0, 35)), ((7, 0), (3, 0, 20))]:
        out, _, _ = _run(rng.uniform(-1, 1, sa), rng.uniform(-1, 1, sb), dtype)
        assert out.shape == np.matmul(np.zeros(sa), np.zeros(sb)).shape
        assert np.array_equal(out.astype(np.float64), np.zeros(out.shape)), f"{path} {sa} @ {sb}"


def test_empty_m_n_and_batch_give_empty_results(path):
    rng = np.random.default_rng(3)
    for sa, sb in [((0, 5), (5, 2)), ((4, 5), (5, 0)), ((0, 4, 5), (5, 2)), ((2, 0, 4, 5), (1, 5, 3))]:
        out, ref, _ = _run(rng.uniform(-1, 1, sa), rng.uniform(-1, 1, sb), "float32")
        assert out.shape == ref.shape and out.size == 0


BATCHES = [
    ((2, 1, 13, 9), (5, 9, 35)),
    ((3, 13, 9), (9, 35)),
    ((13, 9), (4, 9, 35)),
    ((1, 3, 7, 20), (2, 1, 20, 17)),
    ((2, 3, 4, 7, 11), (3, 1, 11, 19)),
    ((6, 8, 70), (6, 70, 40)),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_broadcast_batch_dims(path, dtype):
    """Batch dims broadcast like NumPy's, either operand's, over several dims (one launch, strided batches)."""
    rng = np.random.default_rng(4)
    for sa, sb in BATCHES:
        out, ref, size = _run(rng.uniform(-1, 1, sa), rng.uniform(-1, 1, sb), dtype)
        assert_accumulated(out, ref, size, dtype, sa[-1], what=f"{path} {sa} @ {sb} in {dtype}")


def test_one_dimensional_operands_follow_numpy():
    rng = np.random.default_rng(5)
    for sa, sb in [((40,), (40, 50)), ((40, 50), (50,)), ((33,), (33,)), ((2, 40, 50), (50,))]:
        out, ref, size = _run(rng.uniform(-1, 1, sa), rng.uniform(-1, 1, sb), "float32")
        assert_accumulated(out, ref, size, "float32", sa[-1], what=f"{sa} @ {sb}")


def _float16_accumulated(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b with every partial sum rounded to float16 (exact products): what a float16 accumulator gives."""
    total = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for k in range(a.shape[1]):
        total = (total.astype(np.float32) + a[:, k : k + 1].astype(np.float32) * b[k].astype(np.float32)).astype(
            np.float16
        )
    return total


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("low", [-1.0, 0.5])
def test_long_k_stays_within_the_float32_accumulation_bound(path, dtype, low):
    """k = 20000 of random signs, and of one sign, where sum |a_i b_i| = |a b|: there the rule allows n 2**-24 of
    the result, and a float16 accumulator (which stalls once the partial sum outgrows the products) fails it,
    as the negative control shows.  With random signs the worst case sum |a_i b_i| = 5000 x sqrt(k)-sized results
    is wide enough to let a float16 accumulator through (error 2.9 on results up to 94, sum |a_i b_i| up to 5060)."""
    _require(dtype)
    rng = np.random.default_rng(6)
    k = 20000
    out, ref, size = _run(rng.uniform(low, 1, (7, k)), rng.uniform(low, 1, (k, 9)), dtype)
    assert_accumulated(out, ref, size, dtype, k, what=f"{path} k={k} in {dtype}")
    if dtype == "float16" and low > 0:
        a, b = (rng.uniform(low, 1, shape).astype(np.float16) for shape in ((7, k), (k, 9)))
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        with pytest.raises(AssertionError, match="outside the accumulation rule"):
            assert_accumulated(_float16_accumulated(a, b), a64 @ b64, a64 @ b64, dtype, k, what="float16 accumulator")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_is_the_float32_result_rounded_once(path, dtype):
    """Same as the CPU backend's float32 BLAS result rounded once, up to summation order: every element
    within one ulp of it (an accumulator in the low dtype is far off for k = 512), nearly all bit-equal."""
    from ampcore_cpu.kernels import matmul as cpu_matmul

    rng = np.random.default_rng(7)
    da, db = put(rng.uniform(-1, 1, (3, 45, 512)), dtype), put(rng.uniform(0, 1, (512, 70)), dtype)
    ours = get(gemm.matmul(da, db)).astype(np.float64)
    cpu = cpu_matmul(get(da), get(db)).astype(np.float64)
    eps = EPS[dt.as_dtype(dtype)]
    assert np.all(np.abs(ours - cpu) <= eps * np.abs(cpu)), f"{path} {dtype}: more than one ulp from float32 BLAS"
    assert np.mean(ours == cpu) >= 0.99, f"{path} {dtype}: only {np.mean(ours == cpu):.3f} bit-equal to the CPU"


def test_packing_converts_every_float16_value_exactly(monkeypatch):
    """x @ 1 and 1 @ x on the packed path give back all 65536 float16 values (subnormals, inf, NaN; -0 becomes
    +0, as the accumulator starts at +0 and as NumPy's BLAS gives)."""
    monkeypatch.setattr(gemm, "DIRECT_MAX_WORK", -1)
    values = np.arange(2**16, dtype=np.uint16).view(np.float16)
    with np.errstate(invalid="ignore"):  # signalling NaN patterns
        expected = (np.float32(0) + values.astype(np.float32)).astype(np.float16)
    one = put(np.ones((1, 1)), "float16")
    x = put(values.reshape(-1, 1), "float16")
    for out in (gemm.matmul(x, one), gemm.matmul(one, x.reshaped((1, values.size)))):
        got, nan = get(out).reshape(-1), np.isnan(values)
        assert np.array_equal(np.isnan(got), nan)
        assert np.array_equal(got[~nan].view(np.uint16), expected[~nan].view(np.uint16))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integers_wrap_like_numpy(dtype):
    rng = np.random.default_rng(8)
    high = 2**20 if dtype == "int32" else 2**40
    a = rng.integers(-high, high, (2, 9, 64), dtype=np.int64).astype(dtype)
    b = rng.integers(-high, high, (64, 11), dtype=np.int64).astype(dtype)
    out = get(gemm.matmul(put(a, dtype), put(b, dtype)))
    assert out.dtype == np.dtype(dtype) and np.array_equal(out, np.matmul(a, b))  # overflows, and wraps


def test_new_shapes_and_batches_do_not_recompile(monkeypatch):
    """Sizes, batch layouts and paths' inputs are kernel arguments: after the first call nothing builds."""
    state = gemm_state()
    rng = np.random.default_rng(9)
    _run(rng.uniform(-1, 1, (40, 50)), rng.uniform(-1, 1, (50, 60)), "float32")
    _run(rng.uniform(-1, 1, (2, 5)), rng.uniform(-1, 1, (5, 3)), "float32")
    builds: list[str] = []
    original = state.build
    monkeypatch.setattr(state, "build", lambda source: builds.append(source) or original(source))
    for sa, sb in [((41, 51), (51, 61)), ((3, 1, 20, 30), (2, 30, 70)), ((3, 4), (4, 5)), ((9, 0), (0, 9))]:
        _run(rng.uniform(-1, 1, sa), rng.uniform(-1, 1, sb), "float32")
    assert not builds, f"{len(builds)} kernel(s) rebuilt for new shapes"


def test_bad_operands_are_refused_with_the_fix():
    f32 = put(np.ones((2, 3)), "float32")
    with pytest.raises(TypeError, match="one dtype"):
        gemm.matmul(f32, put(np.ones((3, 2)), "float16"))
    with pytest.raises(TypeError, match="bool"):
        gemm.matmul(put(np.ones((2, 3)), "bool"), put(np.ones((3, 2)), "bool"))
    with pytest.raises(ValueError, match="3 != 4"):
        gemm.matmul(f32, put(np.ones((4, 2)), "float32"))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        gemm.matmul(put(np.ones((2, 2, 3)), "float32"), put(np.ones((3, 3, 2)), "float32"))


def test_benchmark_prints_the_table_and_the_target_lines(tmp_path):
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_opencl_gemm.py"
    out = tmp_path / "gemm.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(script),
            "--device",
            device(),
            "--sizes",
            "37",
            "--dtypes",
            "float32,float16",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "GFLOP/s opencl" in proc.stdout and "n=37 float32 opencl/numpy:" in proc.stdout
    assert f"{device()} {gemm_state().device.name.strip()!r}" in proc.stdout
    assert "n=37 float16/float32 opencl time:" in proc.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [(r["n"], r["dtype"]) for r in rows] == [(37, "float32"), (37, "float16")]
    assert all(r["gflops"]["opencl"] > 0 and r["gflops"]["numpy"] > 0 for r in rows)


_POCL_SHAPES = """
import sys
import numpy as np
from ampcore_opencl.plugin import OpenCLBackend
from ampcore_opencl import gemm
be, index = OpenCLBackend(), int(sys.argv[1])
for m, k, n in [(5, 7, 3), (6, 7, 3), (13, 17, 19), (100, 200, 300), (137, 211, 333), (2, 3000, 5)]:
    gemm.matmul(be.from_numpy(np.ones((m, k)), "float32", index), be.from_numpy(np.ones((k, n)), "float32", index))
be.synchronize(index)
"""


def test_new_shapes_do_not_make_pocl_compile_new_work_group_sizes(tmp_path, opencl_device):
    """PoCL compiles a kernel once per work-group size it runs with; every launch names a fixed one, so
    the shapes above (both paths) leave one compiled variant per kernel in a fresh PoCL cache (beside the
    kernels the device ran when it was set up: the smoke test, the probes)."""
    platform = gemm_state().device.platform.name.strip()
    if "Portable Computing Language" not in platform:
        pytest.skip(f"checks PoCL's kernel cache; {device()} is not a PoCL device ({platform})")
    env = {**os.environ, "POCL_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", _POCL_SHAPES, str(opencl_device)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    variants: dict[str, list[str]] = {}
    for so in tmp_path.rglob("*.so"):
        variants.setdefault(so.parent.parent.name, []).append(so.parent.name)
    gemm_kernels = {"pack_a", "pack_b", "gemm", "direct"}
    assert gemm_kernels <= set(variants), variants
    assert all(len(variants[name]) == 1 for name in gemm_kernels), variants
