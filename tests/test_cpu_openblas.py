"""ampcore info names the kernel set NumPy's OpenBLAS runs, and says so where the host's OPENBLAS_CORETYPE keeps
it off the CPU's AVX-512 kernels (ampcore_cpu.openblas)."""

from __future__ import annotations

import pytest

from ampcore_cpu import openblas

AVX512 = frozenset({"avx2", "avx512f", "avx512bw", "avx512dq", "avx512vl"})


@pytest.mark.parametrize(
    ("core", "forced", "flags", "says"),
    [
        ("SkylakeX", None, AVX512, "OpenBLAS 0.3.31, SkylakeX kernels"),
        ("Haswell", "Haswell", AVX512, "OPENBLAS_CORETYPE=Haswell is set, and this CPU has AVX-512"),
        ("Haswell", "Haswell", frozenset({"avx2"}), "OpenBLAS 0.3.31, Haswell kernels (OPENBLAS_CORETYPE=Haswell)"),
        ("SkylakeX", "SkylakeX", AVX512, "OpenBLAS 0.3.31, SkylakeX kernels (OPENBLAS_CORETYPE=SkylakeX)"),
    ],
)
def test_the_line_names_the_kernels_and_a_host_setting_that_costs_avx512(monkeypatch, core, forced, flags, says):
    libs = [{"internal_api": "openblas", "version": "0.3.31", "architecture": core}]
    monkeypatch.setattr(openblas, "threadpool_info", lambda: libs)
    monkeypatch.setattr(openblas.mkl, "cpu_flags", lambda: flags)
    if forced is None:
        monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_CORETYPE", forced)
    openblas.describe.cache_clear()
    try:
        assert says in openblas.describe()
        assert ("AVX-512" in openblas.describe()) == (forced == "Haswell" and "avx512f" in flags)
    finally:
        openblas.describe.cache_clear()


def test_the_line_in_this_process_names_the_library_numpy_loaded():
    assert openblas.describe().startswith(("OpenBLAS", "no OpenBLAS loaded"))
