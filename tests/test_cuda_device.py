"""The cuda backend on a real GPU: fused kernels against float64 references, the AMP kernels' exact
contracts, tensor cores really used by 16-bit GEMMs, and one host sync per training step.

Everything here needs CuPy and a CUDA device, or the CUDA simulator: with ``AMPCORE_CUDA_SIMULATOR=h100`` the
file runs on it (the speed checks skip there); that is how its gelu references were found wrong (a cancelling
tanh form, float16 underflow, float64 erfc).  Without a GPU the test command runs it that way, in a fresh
interpreter, from tests/test_cuda_simulator.py (CI has no GPU), and does not collect it itself (conftest.py);
run alone without either, it skips with the reason.  The primitives are also checked by the conformance
suite, which runs on every available backend.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from training_steps import mlp_step

import ampcore
from ampcore import dtypes as dt
from ampcore_cuda.plugin import CUDABackend

_status = CUDABackend().availability()
pytestmark = pytest.mark.skipif(not _status.ok, reason=f"no usable CUDA device: {_status.reason}")

BACKEND = CUDABackend()
LOW_EPS = {dt.float16: 2.0**-10, dt.bfloat16: 2.0**-7, dt.float32: 2.0**-23, dt.float64: 2.0**-52}
FLOATS = [dt.float32, dt.float16, dt.bfloat16, dt.float64]


def _kernels():
    from ampcore_cuda.kernels import kernel_table

    return kernel_table()


def _dev(x: np.ndarray, dtype: dt.DType):
    return BACKEND.from_numpy(x, dtype)


def _host(a) -> np.ndarray:
    return BACKEND.to_numpy(a).astype(np.float64)


def _rtol(dtype: dt.DType, n: int) -> float:
    """One rounding of the output, plus float32 accumulation error over ``n`` terms."""
    return LOW_EPS[dtype] + n * (LOW_EPS[dt.float64] if dtype == dt.float64 else 2.0**-24)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("axis", [0, 1])
def test_softmax_and_log_softmax_match_float64(dtype, axis):
    k = _kernels()
    x = np.random.default_rng(0).standard_normal((37, 300)) * 4
    xq = dt.convert(x, dtype).astype(np.float64)  # the values the device really holds
    m = xq.max(axis=axis, keepdims=True)
    e = np.exp(xq - m)
    want_sm, want_lsm = e / e.sum(axis=axis, keepdims=True), (xq - m) - np.log(e.sum(axis=axis, keepdims=True))
    n = x.shape[axis]
    got_sm = _host(k["softmax"](_dev(x, dtype), axis))
    got_lsm = _host(k["log_softmax"](_dev(x, dtype), axis))
    np.testing.assert_allclose(got_sm, want_sm, rtol=_rtol(dtype, n), atol=LOW_EPS[dtype] * 1e-3)
    np.testing.assert_allclose(got_lsm, want_lsm, rtol=_rtol(dtype, n), atol=_rtol(dtype, n) * 8)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_is_correctly_rounded_from_float64_up_to_one_ulp(dtype, approximate):
    from math import erfc

    x = np.linspace(-8, 8, 4001)
    xq = dt.convert(x, dtype).astype(np.float64)
    if approximate == "none":
        want = np.array([0.5 * v * erfc(-v / 2**0.5) for v in xq])
    else:  # x * sigmoid(2y), not x * (1 + tanh y) / 2, which cancels to -0 where gelu(x) ~ -3e-21
        y2 = 1.5957691216057308 * (xq + 0.044715 * xq**3)
        want = xq / (1 + np.exp(-y2))
    got = _host(_kernels()["gelu"](_dev(x, dtype), approximate))
    # Down to float16's subnormal spacing absolutely: gelu(-8) ~ -5e-15 is -0 in float16, correctly rounded.
    atol = 2.0**-24 if dtype == dt.float16 else np.finfo(np.float32).tiny
    # A float64 result cannot be correctly rounded: erfc's argument is rounded (x / sqrt 2), and erfc(z)
    # amplifies that relative error by its condition number, about 2 z^2 (64 at |x| = 8), plus CUDA's
    # documented 5 ulps for double erfc/exp.
    rtol = LOW_EPS[dtype] * (2 * 8.0**2 / 2 + 5) if dtype == dt.float64 else LOW_EPS[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_unscale_and_check_scales_every_dtype_in_place_and_flags_an_overflow():
    k = _kernels()
    rng = np.random.default_rng(1)
    grads = [
        _dev(rng.standard_normal(n) * 1024, d)
        for n, d in [(5, dt.float32), (3000, dt.float16), (1, dt.bfloat16), (70_000, dt.float32)]
    ]
    before = [_host(g) for g in grads]
    inv, found = _dev(np.array([0.125]), dt.float32), _dev(np.zeros(1), dt.float32)
    out, found = k["unscale_and_check"](grads, inv, found)
    for g, b in zip(out, before):
        np.testing.assert_array_equal(_host(g), b * 0.125)  # a power of two: exact
    assert _host(found)[0] == 0.0
    big = _dev(np.array([60000.0]), dt.float16)
    k["unscale_and_check"]([big], _dev(np.array([2.0]), dt.float32), found)  # 120000 overflows float16
    assert _host(found)[0] == 1.0
    k["unscale_and_check"]([_dev(np.ones(4), dt.float32)], inv, found)
    assert _host(found)[0] == 1.0  # never cleared


@pytest.mark.parametrize(
    "found_inf, tracker, want", [(1.0, 5, (32768.0, 0)), (0.0, 1, (131072.0, 0)), (0.0, 0, (65536.0, 1))]
)
def test_update_scale_follows_torchs_rule(found_inf, tracker, want):
    scale, tr = _kernels()["update_scale"](
        _dev(np.array([65536.0]), dt.float32),
        _dev(np.array([tracker]), dt.int32),
        _dev(np.array([found_inf]), dt.float32),
        2.0,
        0.5,
        2,
    )
    assert (_host(scale)[0], int(_host(tr)[0])) == want


def test_adamw_step_gives_the_cpu_backends_bits():
    from ampcore_cpu.plugin import CPUBackend

    cpu_k = CPUBackend().kernel_functions()
    rng = np.random.default_rng(2)
    shapes = [(7,), (3000,), (33, 65)]
    host = {name: [rng.standard_normal(s).astype(np.float32) for s in shapes] for name in "pgmv"}
    host["v"] = [np.abs(v) for v in host["v"]]
    hyper = dict(step=3, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, decoupled=True)
    dev = {name: [_dev(a, dt.float32) for a in arrays] for name, arrays in host.items()}
    _kernels()["adamw_step"](dev["p"], dev["g"], dev["m"], dev["v"], **hyper)
    cpu = {name: [a.copy() for a in arrays] for name, arrays in host.items()}
    cpu_k["adamw_step"](cpu["p"], cpu["g"], cpu["m"], cpu["v"], **hyper)
    for name in "pmv":
        for got, want in zip(dev[name], cpu[name]):
            np.testing.assert_array_equal(BACKEND.to_numpy(got), want)


def _fp32_core_peak_flops() -> float:
    """FP32 (non-tensor) peak: SMs x FP32 lanes per SM x 2 (fma) x clock."""
    from ampcore_cuda import runtime

    props = runtime.properties(0)
    cc = (int(props["major"]), int(props["minor"]))
    lanes = 64 if cc in ((6, 0), (7, 0), (7, 2), (7, 5), (8, 0)) else 128
    # CUDA 13 dropped cudaDeviceProp::clockRate (so CuPy's cuda13 properties lack it); the attribute remains.
    cuda_rt = runtime.import_cupy().cuda.runtime
    clock_khz = cuda_rt.deviceGetAttribute(cuda_rt.cudaDevAttrClockRate, 0)
    return int(props["multiProcessorCount"]) * lanes * 2 * int(clock_khz) * 1e3


@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16], ids=lambda d: d.name)
def test_16_bit_gemms_run_on_tensor_cores_far_above_the_fp32_peak(dtype):
    caps = BACKEND.capabilities(0)
    if caps.extra.get("simulated"):
        pytest.skip(f"a speed check: the CUDA simulator ({caps.extra['simulated']}) cannot show speed")
    if dtype.name not in caps.extra["tensor_cores"]:
        pytest.skip(
            f"{caps.device_name} has no {dtype.name} tensor cores (compute capability "
            f"{caps.extra['compute_capability']})"
        )
    n = 8192
    rng = np.random.default_rng(3)
    a, b = _dev(rng.standard_normal((n, n)), dtype), _dev(rng.standard_normal((n, n)), dtype)
    matmul = _kernels()["matmul"]
    matmul(a, b)
    BACKEND.synchronize()
    reps = 10
    start = time.perf_counter()
    for _ in range(reps):
        out = matmul(a, b)
    BACKEND.synchronize()
    tflops = 2 * n**3 * reps / (time.perf_counter() - start)
    peak = _fp32_core_peak_flops()
    assert tflops > 2 * peak, f"{tflops / 1e12:.1f} TFLOP/s is not above twice the FP32 peak {peak / 1e12:.1f}"
    # float32 accumulation: a row of ones times a column of ones sums n exactly (float16 would stop at 2048)
    ones = _dev(np.ones((1, n)), dtype), _dev(np.ones((n, 1)), dtype)
    assert _host(matmul(*ones))[0, 0] == n
    assert out is not None


@pytest.mark.parametrize("amp", [False, True], ids=["float32", "amp"])
def test_training_steps_sync_once_per_step(amp):
    step = mlp_step("cuda:0", amp)
    losses = [step(1e-2).item()]
    with ampcore.count_host_syncs() as syncs:
        kept = [step(lr) for lr in (9e-3, 8e-3, 7e-3)]
    # One read per step: the GradScaler's skip decision, or cross_entropy's deferred class-index check.
    assert syncs.count == 3, syncs.by_reason
    losses += [t.item() for t in kept]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise", "mxfp8"])
def test_float8_gemms_run_where_the_capabilities_say_and_keep_the_contract(scaling):
    """On a device whose capabilities say ``float8: native`` (cuBLASLt through nvmath-python), each scaling
    the summary lists runs on cuBLASLt; every scaling keeps the kernel contract (float32 accumulation, one
    rounding) at a shape float8 tensor cores take (every dimension a multiple of 32)."""
    from ampcore_cuda import cublaslt
    from ampcore_cuda.array import CuArray
    from ampcore_cuda.float8 import scaled_mm, scaled_mm_mx

    caps = BACKEND.capabilities(0)
    if caps.float8 == "none":
        pytest.skip(f"{caps.device_name}: {caps.float8_reason}")
    support = cublaslt.support(0)
    native = {"tensorwise": support.tensorwise, "rowwise": support.rowwise, "mxfp8": support.mx}[scaling]
    natively = caps.float8_reason.split(";")[0]  # "cuBLASLt 12.9.1 float8 GEMMs: tensorwise, rowwise"
    assert (caps.float8 == "native") == support.tensorwise and (scaling in natively) == native, caps.float8_reason
    m, k, n = 256, 512, 384
    rng = np.random.default_rng(7)
    e4m3 = dt.float8_e4m3fn
    a = (rng.standard_normal((m, k)) * 8).astype(np.float32).astype(e4m3.numpy)
    bt = (rng.standard_normal((n, k)) * 8).astype(np.float32).astype(e4m3.numpy)
    w = BACKEND.from_numpy(bt, e4m3)
    b = CuArray(w.data.T, e4m3)  # (K, N) as a Float8Linear weight: K-major
    if scaling == "mxfp8":
        sa = (2.0 ** rng.integers(-8, 8, (m, k // 32))).astype(np.float32)
        sbt = (2.0 ** rng.integers(-8, 8, (n, k // 32))).astype(np.float32)
        sb_dev = BACKEND.from_numpy(sbt, dt.float32)
        got = scaled_mm_mx(
            BACKEND.from_numpy(a, e4m3), b, _dev(sa, dt.float32), CuArray(sb_dev.data.T, dt.float32),
            dt.bfloat16, None, False,
        )  # fmt: skip
        a64 = a.astype(np.float64) * sa.repeat(32, 1)
        b64 = (bt.astype(np.float64) * sbt.repeat(32, 1)).T
    else:
        sa = rng.uniform(0.01, 1, (m, 1) if scaling == "rowwise" else ()).astype(np.float32)
        sb = rng.uniform(0.01, 1, (1, n) if scaling == "rowwise" else ()).astype(np.float32)
        got = scaled_mm(BACKEND.from_numpy(a, e4m3), b, _dev(sa, dt.float32), _dev(sb, dt.float32), dt.bfloat16,
                        None, False)  # fmt: skip
        a64, b64 = a.astype(np.float64) * sa, bt.T.astype(np.float64) * sb
    want = a64 @ b64
    tol = 2.0**-8 * np.abs(want) + (k + 2) * 2.0**-24 * (np.abs(a64) @ np.abs(b64))
    err = np.abs(_host(got) - want)
    assert np.all(err <= tol), f"{scaling} ({'cuBLASLt' if native else 'fallback'}): worst {np.max(err - tol)}"
