"""The CUDA simulator's RawKernel: CUDA C run on the CPU with CUDA's semantics where the backend relies on them
(block barriers, warp shuffles, per-block shared memory, argument types against the C signature), and a clear
error for what it cannot run.  Needs only g++; skips, saying so, without it."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from ampcore_cuda.sim import PROFILES, cupy_module
from ampcore_cuda.sim.build import SimulatorBuildError, build
from ampcore_cuda.sim.kernel import LaunchError, RawKernel

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")
cp = cupy_module(PROFILES["h100"])

REVERSE = r"""
extern "C" __global__ void __launch_bounds__(256) reverse(const float *x, float *out, int n) {
    __shared__ float tile[256];
    tile[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();  /* without a real barrier, thread 0 would read slots not yet written */
    out[blockIdx.x * blockDim.x + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}
"""

SHUFFLES = r"""
extern "C" __global__ void shuffles(const int *x, int *down, int *xr, int *up, int *any) {
    const int v = x[threadIdx.x];
    down[threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 3);
    xr[threadIdx.x] = __shfl_xor_sync(0xffffffffu, v, 5);
    up[threadIdx.x] = __shfl_up_sync(0xffffffffu, v, 2);
    any[threadIdx.x] = __syncthreads_or(v == 77);
}
"""


def test_syncthreads_is_a_real_barrier_across_the_block_and_shared_memory_is_per_block():
    x = cp.asarray(np.arange(512, dtype=np.float32))
    out = cp.empty(512, dtype=np.float32)
    RawKernel(REVERSE, "reverse")((2,), (256,), (x, out, np.int32(512)))
    expected = np.concatenate([np.arange(255, -1, -1), np.arange(511, 255, -1)]).astype(np.float32)
    assert np.array_equal(out.get(), expected)


def test_warp_shuffles_read_the_right_lane_and_keep_their_own_value_out_of_range():
    host = np.arange(64, dtype=np.int32) * 10
    outs = [cp.empty(64, dtype=np.int32) for _ in range(4)]
    RawKernel(SHUFFLES, "shuffles")((1,), (64,), (cp.asarray(host), *outs))
    lane, warp = np.arange(64) % 32, np.arange(64) // 32 * 32
    down = np.where(lane + 3 < 32, host[warp + np.minimum(lane + 3, 31)], host)
    up = np.where(lane >= 2, host[warp + np.maximum(lane - 2, 0)], host)
    assert np.array_equal(outs[0].get(), down)
    assert np.array_equal(outs[1].get(), host[warp + (lane ^ 5)])
    assert np.array_equal(outs[2].get(), up)
    assert not outs[3].get().any()
    host[40] = 77
    RawKernel(SHUFFLES, "shuffles")((1,), (64,), (cp.asarray(host), *outs))
    assert outs[3].get().all(), "__syncthreads_or is the OR over the whole block"


def test_a_barrier_that_exited_threads_never_reach_is_an_error_not_a_hang():
    source = r"""
extern "C" __global__ void early_exit(float *x) {
    if (threadIdx.x == 3) return;
    __syncthreads();
    x[threadIdx.x] = 1.0f;
}
"""
    with pytest.raises(LaunchError, match="__syncthreads waits for threads that have exited"):
        RawKernel(source, "early_exit")((1,), (32,), (cp.zeros(32, dtype=np.float32),))


def test_a_failed_launch_leaves_the_kernel_runnable():
    """Fibers abandoned mid-kernel by a failure start afresh at the next launch of the same kernel."""
    source = r"""
extern "C" __global__ void maybe_exit(float *x, int bad) {
    if (bad && threadIdx.x == 3) return;
    __syncthreads();
    x[threadIdx.x] = (float)threadIdx.x;
}
"""
    kernel, x = RawKernel(source, "maybe_exit"), cp.zeros(64, dtype=np.float32)
    with pytest.raises(LaunchError, match="exited"):
        kernel((1,), (64,), (x, np.int32(1)))
    kernel((2,), (64,), (x, np.int32(0)))
    assert np.array_equal(x.get(), np.arange(64, dtype=np.float32))


def test_threads_waiting_at_different_barriers_deadlock_with_a_message():
    source = r"""
extern "C" __global__ void split(int *x) {
    if (threadIdx.x < 32) { x[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1, 1); }
    else { __syncthreads(); }
}
"""
    with pytest.raises(LaunchError, match="deadlock|exited"):
        RawKernel(source, "split")((1,), (64,), (cp.zeros(64, dtype=np.int32),))


@pytest.mark.parametrize(
    "args, match",
    [
        ((np.zeros(4, np.float32), np.int32(4)), "argument 0 \\(x: float \\*\\) needs a device array, got ndarray"),
        (("device int32", np.int32(4)), "argument 0 \\(x: float \\*\\) got a int32 array"),
        (("device float32", 4.0), "argument 1 \\(n: int\\) got .*4.0.*float64.*np.int32"),
        (("device float32", np.int64(4)), "argument 1 \\(n: int\\) got .*pass np.int32"),
        (("device float32",), "takes 2 arguments \\(x, n\\), got 1"),
    ],
)
def test_arguments_are_checked_against_the_c_signature(args, match):
    source = 'extern "C" __global__ void fill(float *x, int n) { if (threadIdx.x < n) x[threadIdx.x] = 1.0f; }'
    arrays = {"device int32": cp.zeros(4, dtype=np.int32), "device float32": cp.zeros(4, dtype=np.float32)}
    with pytest.raises(LaunchError, match=match):
        RawKernel(source, "fill")((1,), (4,), tuple(arrays.get(a, a) if isinstance(a, str) else a for a in args))


def test_a_block_above_the_launch_bound_is_refused_as_the_gpu_refuses_it():
    with pytest.raises(LaunchError, match="512 threads exceeds its launch bound of 256"):
        RawKernel(REVERSE, "reverse")(
            (1,), (512,), (cp.zeros(512, dtype=np.float32), cp.zeros(512, dtype=np.float32), np.int32(512))
        )


@pytest.mark.parametrize(
    "body, construct",
    [
        ("x[0] = __ldg(x);", "'__ldg'"),
        ('asm volatile("membar.gl;");', "inline PTX asm"),
        ("x[0] = __hadd(x[0], x[0]);", "'__hadd'"),
        ("x[0] = not_in_the_shim(x[0]);", "'not_in_the_shim'"),
    ],
)
def test_an_unsupported_construct_fails_the_build_naming_it(body, construct):
    source = f'extern "C" __global__ void k(float *x) {{ {body} }}'
    with pytest.raises(SimulatorBuildError, match=f"does not support {construct}"):
        RawKernel(source, "k")((1,), (1,), (cp.zeros(1, dtype=np.float32),))


def test_an_include_is_refused_unless_the_shim_provides_the_header():
    with pytest.raises(SimulatorBuildError, match="#include of a header other than cuda_fp16.h and cuda_bf16.h"):
        build('#include <cooperative_groups.h>\nextern "C" __global__ void k(float *x) {}', "k")


def test_a_built_kernel_is_cached_by_source_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("AMPCORE_CUDA_SIM_CACHE", str(tmp_path))
    first = build(REVERSE, "reverse")
    mtime = first.stat().st_mtime_ns
    assert build(REVERSE, "reverse") == first and first.stat().st_mtime_ns == mtime
    other = build(REVERSE.replace("blockDim.x - 1", "blockDim.x - 2"), "reverse")
    assert other != first and len(list(tmp_path.glob("reverse-*.so"))) == 2


def test_device_arrays_refuse_host_arrays_as_cupy_does():
    with pytest.raises(TypeError, match="host \\(NumPy\\) array"):
        cp.add(cp.zeros(3, dtype=np.float32), np.ones(3, np.float32))
    assert cp.ascontiguousarray(cp.asarray(np.float32(2))).shape == (1,)  # CuPy 14 follows NumPy (13 kept ())
    assert cp.zeros((2, 3), dtype=np.float32)[1, 2].shape == ()  # a 0-d array, never a NumPy scalar


def _two_sums_source(last_barrier: bool) -> str:
    from ampcore_cuda.rows import reduce_helpers

    helpers = reduce_helpers("float")
    if not last_barrier:
        helpers = helpers.replace("__syncthreads();  /* partial is reused by the next reduction */", "")
        assert "partial is reused" not in helpers
    return (
        helpers
        + r"""
extern "C" __global__ void two_sums(const float *x, float *out) {
    const float a = block_reduce(x[threadIdx.x], false);
    const float b = block_reduce(2.0f * x[threadIdx.x], false);
    out[threadIdx.x] = a + 1000.0f * b;
}
"""
    )


def test_warps_run_independently_between_barriers_so_a_missing_barrier_shows():
    """The row kernels' block_reduce ends with a barrier because the next reduction reuses its shared slots.
    Warps here run ahead of each other as on a GPU: with the barrier every thread gets both sums, without it
    a later warp reads a slot the first warp already overwrote."""
    host = np.arange(1, 129, dtype=np.float32)
    x, out = cp.asarray(host), cp.empty(128, dtype=np.float32)
    expected = host.sum() + 1000.0 * 2 * host.sum()
    RawKernel(_two_sums_source(True), "two_sums")((1,), (128,), (x, out))
    assert np.all(out.get() == expected)
    RawKernel(_two_sums_source(False), "two_sums")((1,), (128,), (x, out))
    assert not np.all(out.get() == expected)


HALF_INTRINSICS = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void convert_all(const float *x, const unsigned short *bits, unsigned short *h, float *hf,
                                       unsigned short *b, float *bf, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        h[i] = __half_as_ushort(__float2half_rn(x[i]));
        b[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
        hf[i] = __half2float(__ushort_as_half(bits[i]));
        bf[i] = __bfloat162float(__ushort_as_bfloat16(bits[i]));
    }
}
"""


def _conversion_inputs() -> np.ndarray:
    """float32 values where rounding to 16 bits is decided: every tie between adjacent float16 and bfloat16
    values (and one float32 ulp either side), the overflow boundaries, subnormals, inf, NaN, and random bits."""
    h = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    import ml_dtypes

    b = np.arange(0x7F80, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    ties = np.concatenate([(h[:-1] + h[1:]) / 2, (b[:-1] + b[1:]) / 2, [65504.0, 65519.99, 65520.0, 1e-8]])
    ties32 = ties.astype(np.float32)
    near = np.concatenate([ties32, np.nextafter(ties32, np.float32(np.inf)), np.nextafter(ties32, np.float32(0))])
    special = np.array([np.inf, np.nan, 0.0, np.finfo(np.float32).max, np.finfo(np.float32).tiny], np.float32)
    rand = np.random.default_rng(0).integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([near, special, rand]).astype(np.float32)
    return np.concatenate([x, -x])


def test_half_and_bfloat16_intrinsics_round_to_nearest_even_bit_for_bit():
    import ml_dtypes

    x = _conversion_inputs()
    bits = np.resize(np.arange(1 << 16, dtype=np.uint16), x.size)  # every 16-bit pattern, widened
    n = x.size
    outs = [
        cp.empty(n, dtype=np.uint16),
        cp.empty(n, dtype=np.float32),
        cp.empty(n, dtype=np.uint16),
        cp.empty(n, dtype=np.float32),
    ]
    RawKernel(HALF_INTRINSICS, "convert_all")((1024,), (256,), (cp.asarray(x), cp.asarray(bits), *outs, np.int64(n)))
    h, hf, b, bf = (o.get() for o in outs)
    nan = np.isnan(x)
    with np.errstate(all="ignore"):
        want_h, want_b = x.astype(np.float16).view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert np.array_equal(h[~nan], want_h[~nan]) and np.array_equal(b[~nan], want_b[~nan])
    assert np.isnan(h[nan].view(np.float16)).all()
    assert np.isnan(b[nan].view(ml_dtypes.bfloat16).astype(np.float32)).all()
    want_hf, want_bf = bits.view(np.float16).astype(np.float32), bits.view(ml_dtypes.bfloat16).astype(np.float32)

    def same(a, e):
        nan_a, nan_e = np.isnan(a), np.isnan(e)
        return np.array_equal(nan_a, nan_e) and np.array_equal(a[~nan_a].view(np.uint32), e[~nan_e].view(np.uint32))

    assert same(hf, want_hf) and same(bf, want_bf)
