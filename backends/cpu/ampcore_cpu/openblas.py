"""Which kernels NumPy's OpenBLAS runs, for ``ampcore info`` and ``ampcore bench``: every float32 GEMM of the
backend (sgemm, and the widened 16-bit and float8 GEMMs) runs on them.

OpenBLAS picks its kernel set by CPU model when it loads, unless ``OPENBLAS_CORETYPE`` names one.  Some hosts
set that variable (older OpenBLAS builds crash or compute wrong results on some processors), and a set that
does not use the CPU's widest vectors costs GEMMs half their rate: on a 2-core AMD EPYC Zen 5 with
``OPENBLAS_CORETYPE=Haswell`` (AVX2), sgemm 1024x256x1024 ran at 244 GFLOP/s on 2 threads, against 439 on the
SkylakeX (AVX-512) kernels that NumPy 2.4's OpenBLAS picks there by itself.  The backend leaves the choice to
the host and says so where it costs: the line names the variable and what OpenBLAS would pick without it.
"""

from __future__ import annotations

import functools
import os

from threadpoolctl import threadpool_info

from . import mkl

__all__ = ["describe"]

AVX512_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})  # OpenBLAS's kernel sets using AVX-512
AVX512_FLAGS = frozenset({"avx512f", "avx512bw", "avx512dq", "avx512vl"})  # what those kernels use


@functools.cache
def describe() -> str:
    """``OpenBLAS 0.3.31, Haswell kernels (...)``: the kernel set OpenBLAS runs, and why where the host chose."""
    found = [lib for lib in threadpool_info() if lib.get("internal_api") == "openblas"]
    if not found:
        return "no OpenBLAS loaded"
    name = f"OpenBLAS {found[0].get('version') or ''}".strip()
    core = str(found[0].get("architecture") or "unknown")
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if not forced:
        return f"{name}, {core} kernels"
    if core.lower() in AVX512_CORES or not AVX512_FLAGS <= mkl.cpu_flags():
        return f"{name}, {core} kernels (OPENBLAS_CORETYPE={forced})"
    return (
        f"{name}, {core} kernels: OPENBLAS_CORETYPE={forced} is set, and this CPU has AVX-512, whose kernels "
        "OpenBLAS picks without it (sgemm 1.8x on an AMD EPYC Zen 5)"
    )
