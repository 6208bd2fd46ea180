"""How the cuda backend compiles its kernels (ampcore_cuda.compiler): NVRTC directly with ``--ftz=false`` and the
device's architecture, never through ``cupy.RawKernel`` (which adds ``-ftz=true``), and a cache of compiled
images on disk.  Runs on the CUDA simulator, whose NVRTC takes the same calls and refuses flush-to-zero."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from ampcore_cuda import compiler, launch

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")

COPY = r"""
extern "C" __global__ void copy(const float *x, float *out, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * 1.0f;  /* a multiply: a flushing build would zero the subnormals */
}
"""


@pytest.mark.parametrize(
    "cc, archs, want",
    [
        (90, (75, 80, 86, 89, 90, 100, 120), ("-arch=sm_90", "cubin")),
        (75, (75, 80, 90), ("-arch=sm_75", "cubin")),
        (89, (75, 80, 86, 90), ("-arch=sm_86", "cubin")),  # SASS of 8.6 runs on 8.9
        (121, (75, 90, 100, 120), ("-arch=sm_120", "cubin")),
        (130, (75, 90, 100, 120), ("-arch=compute_120", "ptx")),  # newer than NVRTC: PTX, the driver compiles it
        (90, (), ("-arch=sm_90", "cubin")),  # an NVRTC that cannot list its targets: try the device's own
    ],
)
def test_the_target_is_the_devices_architecture_capped_at_what_nvrtc_supports(cc, archs, want):
    assert compiler.target(cc, archs) == want


@pytest.fixture
def sim(monkeypatch, tmp_path):
    """CuPy: the simulator's (h100), or the real one on a machine with a GPU (then these run on it)."""
    monkeypatch.setenv("AMPCORE_CUDA_SIMULATOR", "h100")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from ampcore_cuda.runtime import import_cupy

    return import_cupy()


@needs_gxx
def test_a_kernel_compiles_once_per_machine_and_keeps_float32_subnormals(sim, tmp_path, monkeypatch):
    kernel = compiler.load(COPY, "copy", launch.OPTIONS)
    tiny = np.array([1e-45, -1e-40, 1.0], dtype=np.float32)
    x, out = sim.asarray(tiny), sim.zeros(3, dtype=np.float32)
    kernel((1,), (32,), (x, out, np.int64(3)))
    assert out.get().tobytes() == tiny.tobytes()
    cached = list((tmp_path / "ampcore" / "cuda").glob("copy-*.cubin"))
    assert len(cached) == 1
    compiles = []
    monkeypatch.setattr(sim.cuda.nvrtc, "compileProgram", lambda *a: compiles.append(a))
    compiler.load(COPY, "copy", launch.OPTIONS)  # as a second process would: from the cache, no compile
    assert compiles == []


@needs_gxx
def test_every_backend_option_reaches_nvrtc_with_the_devices_arch(sim, monkeypatch):
    seen = []
    real = sim.cuda.nvrtc.compileProgram
    monkeypatch.setattr(
        sim.cuda.nvrtc, "compileProgram", lambda prog, options: (seen.append(tuple(options)), real(prog, options))[1]
    )
    compiler.load(COPY.replace("1.0f", "2.0f"), "copy", launch.OPTIONS)
    cc = int(sim.cuda.Device().compute_capability)  # 90 on the simulator's h100
    arch = compiler.target(cc, sim.cuda.nvrtc.getSupportedArchs())[0]
    assert seen == [(*launch.OPTIONS, arch)] and "--ftz=false" in launch.OPTIONS
    assert cc != 90 or arch == "-arch=sm_90"


@needs_gxx
def test_a_compile_error_names_the_kernel_and_carries_nvrtcs_log(sim):
    with pytest.raises(compiler.KernelCompileError, match=r"(?s)kernel 'copy' .*\n.*__no_such_intrinsic"):
        compiler.load(COPY.replace("x[i]", "__no_such_intrinsic(x + i)"), "copy", launch.OPTIONS)


@needs_gxx
def test_the_simulator_refuses_flush_to_zero_builds_and_cupys_raw_kernel(sim):
    from ampcore_cuda.runtime import simulated
    from ampcore_cuda.sim.build import SimulatorBuildError

    if not simulated():
        pytest.skip("a real GPU runs these kernels: nothing simulated to check")
    with pytest.raises(compiler.KernelCompileError, match="cannot run a kernel built with -ftz=true"):
        compiler.load(COPY, "copy", ("--std=c++17", "-ftz=true"))
    with pytest.raises(SimulatorBuildError, match="-ftz=true"):
        sim.RawKernel(COPY, "copy")
