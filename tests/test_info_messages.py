"""What ``ampcore info`` says about float16 on OpenCL and about a missing CuPy reads as one clear line (issue 27)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

POCL_FAILURE = (
    "clBuildProgram failed: BUILD_PROGRAM_FAILURE - clBuildProgram failed: BUILD_PROGRAM_FAILURE - "
    "clBuildProgram failed: BUILD_PROGRAM_FAILURE\n\nBuild on <pyopencl.Device 'cpu-x86-64' on 'Portable "
    "Computing Language'>:\n\nerror: /root/.cache/pocl/kcache/tempfile_31OSAQ.cl:6:10: declaring variable of "
    "type '__private half' is not allowed\n1 error generated.\n(options: -I /x)\n(source saved as /tmp/y.cl)"
)


def test_a_failed_half_probe_is_summarised_without_the_compilers_temp_file() -> None:
    probe = pytest.importorskip("ampcore_opencl.probe")
    line = probe.diagnostic(RuntimeError(POCL_FAILURE))
    assert line == "declaring variable of type '__private half' is not allowed"
    assert len(probe.diagnostic(RuntimeError("error: " + "x" * 500))) == 100


def test_a_device_without_half_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = pytest.importorskip("ampcore_opencl.probe")

    class FailingProgram:
        def __init__(self, *args: object) -> None:
            raise RuntimeError(POCL_FAILURE)

    monkeypatch.setitem(sys.modules, "pyopencl", SimpleNamespace(Program=FailingProgram, CompilerWarning=Warning))
    monkeypatch.delenv("AMPCORE_OPENCL_HALF", raising=False)
    support = probe.probe_native_half(SimpleNamespace(extensions="cl_khr_fp64", context=None))
    assert not support.native
    assert support.detail == (
        "no cl_khr_fp16, and the probe kernel did not build or run: "
        "declaring variable of type '__private half' is not allowed"
    )


def test_the_float16_path_labels_both_measured_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = pytest.importorskip("ampcore_opencl.probe")
    seconds = {"half": 0.54e-3, "integer": 0.56e-3}
    scale = probe.CONVERT_TIMED_ITEMS / (1 << 20)
    monkeypatch.setattr(
        probe, "_measure_convert", lambda state: ({k: v * scale for k, v in seconds.items()}, {"half": 0, "integer": 0})
    )
    monkeypatch.delenv(probe.CONVERT_ENV, raising=False)
    chosen = probe.choose_half_convert(SimpleNamespace(extensions="cl_khr_fp16"))
    assert chosen.summary == "integer arithmetic (measured: half 0.54 ms vs integer 0.56 ms per M values)"


def test_cuda_without_cupy_names_the_download_and_the_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = pytest.importorskip("ampcore_cuda.plugin")
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.delenv("AMPCORE_CUDA_SIMULATOR", raising=False)
    reason = plugin.CUDABackend().availability().reason
    assert "about 10 large NVIDIA packages" in reason
    assert "AMPCORE_CUDA_SIMULATOR=h100 (or t4)" in reason
