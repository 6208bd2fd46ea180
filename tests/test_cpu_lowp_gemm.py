"""ampcore_cpu.mkl and .lowp_gemm: oneMKL's 16-bit and float8 GEMMs through ctypes, the probe that picks a path
per dtype, and what ``ampcore info`` says about it.  Products are checked against float64 with the bound of
``gemm_bound`` (one float32 dot product over K per element, rounded once); the oneMKL tests skip, with the
reason, where oneMKL is not loaded (not installed, not x86-64 Linux, or ``AMPCORE_CPU_GEMM=widened``)."""

from __future__ import annotations

import json
import os

import ml_dtypes
import numpy as np
import pytest
from gemm_bound import assert_one_float32_dot_rounded_once

import ampcore
from ampcore import dtypes as dt
from ampcore.ops.float8 import scaled_mm
from ampcore_cpu import float8, lowp_gemm, mkl
from ampcore_cpu import kernels as K

BF16, F16 = np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)
E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
needs_mkl = pytest.mark.skipif(not mkl.status().enabled, reason=mkl.status().reason)


def _normal(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32).astype(dtype)


# --------------------------------------------------------------------------- layouts
def test_layout_passes_transposed_views_as_trans_and_refuses_what_blas_cannot_read():
    x = np.zeros((4, 6), BF16)
    assert mkl.layout(x) == (mkl.NO_TRANS, 6)
    assert mkl.layout(x.T) == (mkl.TRANS, 6)  # a weight's .T: no copy
    assert mkl.layout(x[:, :3]) == (mkl.NO_TRANS, 6)  # a column slice keeps the row stride
    assert mkl.layout(x[:, :3].T) == (mkl.TRANS, 6)
    assert mkl.layout(np.zeros((5, 1), BF16)) == (mkl.NO_TRANS, 1)
    assert mkl.layout(np.zeros((1, 5), BF16)[:, ::1]) == (mkl.NO_TRANS, 5)
    assert mkl.layout(x[:, ::2]) is None  # no unit stride: copied first
    assert mkl.layout(x[::-1]) is None


# --------------------------------------------------------------------------- the oneMKL path, against float64
def _cases(dtype):
    """(label, a, b): 2-D, transposed views, batches broadcast and folded, a long K, a single row."""
    n = lambda shape, seed: _normal(shape, dtype, seed)  # noqa: E731
    yield "2-D", n((37, 53), 1), n((53, 29), 2)
    yield "a transposed view", n((53, 37), 3).T, n((53, 29), 4)
    yield "b transposed view (a linear's weight)", n((37, 53), 5), n((29, 53), 6).T
    yield "both transposed", n((53, 37), 7).T, n((29, 53), 8).T
    yield "batched, broadcast", n((2, 1, 3, 4), 9), n((5, 4, 2), 10)
    yield "batched transposed views", n((6, 40, 12), 11).transpose(0, 2, 1), n((6, 40, 9), 12)
    yield "folded batch times a weight view", n((4, 16, 64), 13), n((48, 64), 14).T
    yield "batched times one matrix, strided", n((3, 8, 64), 15)[:, :, ::2], n((32, 5), 16)
    yield "long k", n((3, 1500), 17), n((1500, 4), 18)
    yield "one row", n((1, 9), 19), n((9, 1), 20)


@needs_mkl
@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_mkl_products_round_a_float32_dot_product_once(dtype):
    for label, a, b in _cases(dtype):
        got = K.mkl_matmul(a, b)
        assert got.dtype == dtype, label
        assert_one_float32_dot_rounded_once(got, a, b, f"{label} in {dtype}")


@needs_mkl
@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize(
    ("sa", "sb"), [((3, 0), (0, 4)), ((0, 5), (5, 2)), ((2, 0, 3), (3, 4)), ((2, 3, 0), (2, 0, 4))]
)
def test_mkl_products_of_empty_operands_are_empty_or_zero(dtype, sa, sb):
    a, b = np.ones(sa, dtype), np.ones(sb, dtype)
    got = K.mkl_matmul(a, b)
    want = np.matmul(a.astype(np.float32), b.astype(np.float32))
    assert got.shape == want.shape and np.array_equal(got.astype(np.float32), want)


@needs_mkl
@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_mkl_products_propagate_inf_and_nan(dtype):
    a, b = _normal((6, 40), dtype, 1), _normal((40, 5), dtype, 2)
    a[0, 3], a[1, 7], b[9, 2] = np.inf, np.nan, -np.inf
    b[3, 4] = 0  # inf * 0 in row 0, column 4: NaN
    assert_one_float32_dot_rounded_once(K.mkl_matmul(a, b), a, b, f"inf/NaN in {dtype}")


def test_the_bound_catches_a_kernel_that_rounds_a_partial_sum():
    """The check can fail: half of K summed and rounded to float16, then the other half, gives errors of a
    float16 rounding of the partial sums, beyond one rounding of the whole."""
    a, b = _normal((64, 256), F16, 1), _normal((256, 64), F16, 2)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    halves = (a32[:, :128] @ b32[:128]).astype(F16).astype(np.float32) + a32[:, 128:] @ b32[128:]
    with pytest.raises(AssertionError, match="beyond one rounding"):
        assert_one_float32_dot_rounded_once(halves.astype(F16), a, b, "split K")


# --------------------------------------------------------------------------- float8 scaled_mm on the oneMKL path
def test_every_float8_code_widens_to_bfloat16_exactly():
    for dtype in (E4M3, E5M2):
        codes = np.arange(256, dtype=np.uint8).view(dtype)
        wide = lowp_gemm._as_bf16(codes).astype(np.float32)
        want = codes.astype(np.float32)
        assert np.array_equal(wide, want, equal_nan=True), dtype


@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=str)
def test_scaled_float32_is_the_cast_times_the_scale_bit_for_bit(dtype):
    """The widened path's table lookup: every code (NaN and inf too) times per-tensor scales (0, a subnormal,
    inf, NaN among them) and per-row / per-column scales, in a transposed view too, as cast-then-multiply."""
    codes = np.arange(256, dtype=np.uint8).view(dtype).reshape(16, 16)
    rng = np.random.default_rng(0)
    scales = [np.float32(v) for v in (1.0, 0.37, 3e4, 1e-41, 0.0, np.inf, np.nan)]
    scales += [rng.uniform(0.01, 2, (16, 1)).astype(np.float32), rng.uniform(0.01, 2, (1, 16)).astype(np.float32)]
    with np.errstate(all="ignore"):
        for x in (codes, codes.T):
            for scale in scales:
                scale = np.asarray(scale)
                want = np.multiply(x.astype(np.float32), scale, dtype=np.float32)
                got = float8.scaled_float32(x, scale)
                assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32)), scale


@pytest.fixture
def float8_on_mkl(monkeypatch):
    monkeypatch.setitem(lowp_gemm._chosen, lowp_gemm.key("float8"), lowp_gemm.GemmChoice("float8", True, "this test"))


def _f8(x):
    return ampcore.from_numpy(x)


@needs_mkl
@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
@pytest.mark.parametrize(("da", "db"), [(E4M3, E4M3), (E5M2, E5M2), (E4M3, E5M2)], ids=str)
@pytest.mark.parametrize("out_dtype", [dt.float32, dt.bfloat16], ids=lambda d: d.name)
def test_mkl_scaled_mm_is_within_the_contracts_float32_rounding(float8_on_mkl, rowwise, da, db, out_dtype):
    """The contract's algorithm scales the operands first; oneMKL's path scales the exact sums.  Both are
    within the conformance suite's bound: one rounding of the output plus (k + 2) float32 roundings of the
    magnitude.  b is a transposed view (column-major), as torch._scaled_mm wants it."""
    m, k, n = 23, 70, 17
    a = (_normal((m, k), np.float32, 1) * 3).astype(da)
    b = np.ascontiguousarray((_normal((k, n), np.float32, 2) * 3).astype(db).T).T
    rng = np.random.default_rng(3)
    sa = rng.uniform(0.01, 2, (m, 1) if rowwise else ()).astype(np.float32)
    sb = rng.uniform(0.01, 2, (1, n) if rowwise else ()).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    got = scaled_mm(_f8(a), _f8(b), ampcore.tensor(sa), ampcore.tensor(sb), out_dtype, ampcore.tensor(bias))
    a64, b64 = a.astype(np.float64) * sa, b.astype(np.float64) * sb
    want = a64 @ b64 + bias
    magnitude = np.abs(a64) @ np.abs(b64) + np.abs(bias)
    tol = (dt.finfo(out_dtype).eps / 2) * np.abs(want) + (k + 2) * 2.0**-24 * magnitude
    assert np.all(np.abs(got.float().numpy().astype(np.float64) - want) <= tol)


@needs_mkl
def test_mkl_scaled_mm_propagates_nan_and_inf(float8_on_mkl):
    a = np.ones((3, 4), np.float32).astype(E5M2)
    b = np.ones((4, 3), np.float32).astype(E5M2)
    a[0, 1], b[2, 1], b[0, 2] = np.nan, np.inf, np.inf
    b[1, 2] = 0  # a's NaN meets b's 0 too: NaN either way
    one = ampcore.tensor(np.float32(1))
    got = scaled_mm(_f8(a), _f8(b), one, one, dt.float32).numpy()
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.array_equal(got, want.astype(np.float32), equal_nan=True)


@needs_mkl
def test_a_non_finite_scale_takes_the_widened_path(float8_on_mkl):
    """inf * 0 must make NaN in the scaled operand, as the contract's algorithm does; scaling the sums cannot."""
    a, b = _normal((4, 8), E4M3, 1), _normal((8, 3), E4M3, 2)
    a[1, :] = 0
    sa, sb = np.asarray(np.inf, np.float32), np.asarray(1.0, np.float32)
    with np.errstate(invalid="ignore"):  # the kernel table's wrapper quiets these; the bare function does not
        got = float8.scaled_product(a, b, sa, sb, True)
        assert np.array_equal(got, float8.scaled_product(a, b, sa, sb, False), equal_nan=True)
    assert np.isnan(got[1]).all()


# --------------------------------------------------------------------------- the probe
@pytest.fixture
def fresh_choices(monkeypatch):
    monkeypatch.setattr(lowp_gemm, "_chosen", {})


def _slow():
    sum(range(20000))


AVX512_PATH = "Intel(R) Advanced Vector Extensions 512 (Intel(R) AVX-512) with Intel(R) AMX"  # an Intel CPU's


def test_auto_times_both_paths_and_keeps_the_faster(monkeypatch, fresh_choices):
    monkeypatch.delenv(mkl.ENV_GEMM, raising=False)
    monkeypatch.setattr(mkl, "status", lambda: mkl.MKLStatus(True, version="test", code_path=AVX512_PATH))
    fast = lambda: None  # noqa: E731
    choice = lowp_gemm.choose("bfloat16", lambda: (fast, _slow))
    assert choice.mkl and choice.speedup > 1 and "oneMKL (AMX kernels), " in choice.describe()
    assert "x widened sgemm (256x512x512" in choice.describe()
    choice = lowp_gemm.choose("float16", lambda: (_slow, fast))
    assert not choice.mkl and choice.describe().startswith("widened sgemm (faster here: oneMKL's AMX kernels 0.")
    assert lowp_gemm.choose("float16", lambda: pytest.fail("probed twice")) is choice  # once per thread count
    monkeypatch.setattr(lowp_gemm.threads, "wanted", lambda: 7)
    assert lowp_gemm.choose("float16", lambda: (fast, _slow)).mkl  # another thread count: probed again


def test_auto_keeps_the_widened_path_where_mkl_runs_its_generic_kernels(monkeypatch, fresh_choices):
    """oneMKL on a CPU it has no tuned kernels for (an AMD EPYC Zen 5): the probe did not predict a training step
    there, so auto does not time it; AMPCORE_CPU_GEMM=mkl still runs it."""
    monkeypatch.delenv(mkl.ENV_GEMM, raising=False)
    generic = mkl.MKLStatus(True, version="test", code_path="Intel(R) Architecture processors")
    monkeypatch.setattr(mkl, "status", lambda: generic)
    choice = lowp_gemm.choose("bfloat16", lambda: pytest.fail("timed the generic kernels"))
    assert not choice.mkl and choice.describe() == f"widened sgemm ({lowp_gemm.GENERIC})"
    monkeypatch.setenv(mkl.ENV_GEMM, "mkl")
    assert lowp_gemm.choose("float16", lambda: pytest.fail("timed a forced path")).mkl


def test_forced_paths_skip_the_timing(monkeypatch, fresh_choices):
    monkeypatch.setattr(mkl, "status", lambda: mkl.MKLStatus(True, version="test"))
    monkeypatch.setenv(mkl.ENV_GEMM, "mkl")
    choice = lowp_gemm.choose("bfloat16", lambda: pytest.fail("timed a forced path"))
    assert choice.mkl and choice.speedup is None and "AMPCORE_CPU_GEMM=mkl is set" in choice.describe()
    monkeypatch.setenv(mkl.ENV_GEMM, "widened")
    choice = lowp_gemm.choose("float16", lambda: pytest.fail("timed a forced path"))
    assert choice.describe() == "widened sgemm (AMPCORE_CPU_GEMM=widened is set)"


def test_a_bad_gemm_mode_names_the_value_and_the_choices():
    with pytest.raises(
        ValueError, match=r"AMPCORE_CPU_GEMM='fast' is not a GEMM path; set it to one of auto, mkl, widened"
    ):
        mkl.gemm_mode({mkl.ENV_GEMM: "fast"})
    assert mkl.gemm_mode({}) == "auto" and mkl.gemm_mode({mkl.ENV_GEMM: " MKL "}) == "mkl"


@pytest.mark.parametrize(
    ("vendor", "flags", "says", "tip"),
    [
        (
            "GenuineIntel",
            {"avx512_bf16", "amx_bf16"},
            "has amx_bf16 and avx512_bf16, which oneMKL's bfloat16 GEMM would use",
            True,
        ),
        ("AuthenticAMD", {"avx512_bf16"}, "but oneMKL ran its generic kernels on a non-Intel CPU", False),
        ("GenuineIntel", {"avx2"}, "this CPU has no bfloat16 dot-product units, so oneMKL would gain little", False),
    ],
)
def test_without_mkl_the_widened_path_runs_and_says_what_mkl_would_buy(
    monkeypatch, fresh_choices, vendor, flags, says, tip
):
    monkeypatch.delenv(mkl.ENV_GEMM, raising=False)
    monkeypatch.setattr(mkl, "_library_path", lambda: None)
    monkeypatch.setattr(mkl, "_cpuinfo", lambda: (vendor, frozenset(flags)))
    missing = mkl._load({})
    if not missing.enabled and "x86-64 Linux only" in missing.reason:
        pytest.skip(missing.reason)
    assert missing == mkl.MKLStatus(False, "oneMKL is not installed: pip install 'ampcore-cpu[mkl]'")
    monkeypatch.setattr(mkl, "status", lambda: missing)
    choice = lowp_gemm.choose("bfloat16", lambda: pytest.fail("timed without oneMKL"))
    assert not choice.mkl and says in choice.describe() and "pip install 'ampcore-cpu[mkl]'" in choice.describe()
    line = lowp_gemm.install_tip()
    assert (line is not None) is tip
    if tip:
        assert line.startswith("pip install 'ampcore-cpu[mkl]': this CPU has amx_bf16 and avx512_bf16")


def test_train_prints_the_backends_tip(monkeypatch, capsys):
    """``ampcore train`` (the quick start) prints the cpu backend's line on what the mkl extra would buy."""
    from ampcore.cli import main
    from ampcore.plugins import capabilities

    backend = ampcore.get_backend("cpu")
    caps = backend.capabilities(0)
    tipped = type(caps)(**{**caps.__dict__, "extra": {**caps.extra, "tip": "pip install 'ampcore-cpu[mkl]': test"}})
    monkeypatch.setitem(capabilities._caps_cache, ("cpu", 0), tipped)
    assert main(["train", "--device", "cpu", "--epochs", "1", "--no-amp"]) == 0
    assert "tip: pip install 'ampcore-cpu[mkl]': test" in capsys.readouterr().out


def test_mkl_is_loaded_on_x86_64_linux_only(monkeypatch):
    monkeypatch.setattr(mkl.platform, "machine", lambda: "aarch64")
    assert "x86-64 Linux only" in mkl._load({}).reason


# --------------------------------------------------------------------------- whole processes
def test_widened_mode_never_loads_mkl(run_python):
    """``AMPCORE_CPU_GEMM=widened`` (the fallback pass of .ci/run): the products run, libmkl_rt stays unloaded."""
    code = """
import json, numpy as np, ml_dtypes, ampcore
from ampcore_cpu import kernels, float8
a = np.ones((8, 8), ml_dtypes.bfloat16)
kernels.matmul(a, a)
kernels.matmul(a.astype(np.float16), a.astype(np.float16))
q = np.ones((8, 8), ml_dtypes.float8_e4m3fn); one = np.asarray(1.0, np.float32)
float8.scaled_mm(q, q, one, one, ampcore.bfloat16, None, False)
caps = ampcore.get_backend("cpu").capabilities().as_dict()
print(json.dumps({k: caps[k] for k in ("bf16_gemm", "f16_gemm", "float8_gemm")}))
print("libmkl_rt" in open("/proc/self/maps").read())
"""
    out = run_python(code, env={mkl.ENV_GEMM: "widened"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert set(json.loads(lines[0]).values()) == {"widened sgemm (AMPCORE_CPU_GEMM=widened is set)"}
    assert lines[1] == "False"


@needs_mkl
def test_mkl_threads_follow_ampcore_set_num_threads(run_python):
    """Set before oneMKL loads, and changed after: threadpoolctl sees MKL's count follow."""
    code = """
import numpy as np, ml_dtypes, ampcore, threadpoolctl
ampcore.set_num_threads(1)
from ampcore_cpu import kernels
a = np.ones((64, 64), ml_dtypes.bfloat16)
kernels.matmul(a, a)
mkl_threads = lambda: [l["num_threads"] for l in threadpoolctl.threadpool_info() if l["internal_api"] == "mkl"]
print(mkl_threads())
ampcore.set_num_threads(2)
print(mkl_threads())
"""
    out = run_python(code, env={mkl.ENV_GEMM: "mkl"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[1]", "[2]"]


@needs_mkl
def test_info_shows_each_dtypes_gemm_path(run_python):
    out = run_python("from ampcore.cli import main; main(['info', '--json'])", env={mkl.ENV_GEMM: "mkl"})
    assert out.returncode == 0, out.stderr
    cpu = next(b for b in json.loads(out.stdout)["backends"] if b["name"] == "cpu")["devices"][0]
    for key in ("bf16_gemm", "f16_gemm", "float8_gemm"):
        assert cpu[key].startswith("oneMKL (") and cpu[key].endswith("; AMPCORE_CPU_GEMM=mkl is set)"), cpu[key]


@needs_mkl
@pytest.mark.skipif(os.environ.get(mkl.ENV_GEMM) == "widened", reason="this pass runs the widened path")
def test_the_cpu_conformance_suite_passes_with_every_gemm_on_mkl(run_python):
    """Whatever the probe chose here, the suite passes with oneMKL running every 16-bit and float8 GEMM."""
    code = "import sys, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--pyargs', "
    code += "'ampcore.conformance', '--ampcore-backend', 'cpu']))"
    out = run_python(code, env={mkl.ENV_GEMM: "mkl"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "ampcore conformance: cpu passes" in out.stdout
