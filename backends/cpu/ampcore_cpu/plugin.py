"""The ``cpu`` backend: NumPy, with bfloat16/float16 emulated exactly.

Registered under the ``ampcore.backends`` entry point ``cpu``; uses only
ampcore's public API, like any third-party backend.
"""

from __future__ import annotations

import os
import platform
import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

import ampcore
from ampcore import dtypes as dt
from ampcore.plugins import hookimpl

from . import compiled, float8, fusion, lowp_gemm, mkl, openblas, threads
from .elementwise import elementwise
from .kernels import BF16, F16, gemm_choice, primitive_table
from .malloc import tune_malloc


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class _Extra(Mapping[str, Any]):
    """Capability entries, some computed on first read: which GEMM path runs each low-precision dtype is
    chosen by timing both (:mod:`.lowp_gemm`), which only a process that reads it or multiplies pays for."""

    def __init__(self, static: Mapping[str, Any], lazy: Mapping[str, Callable[[], Any]]) -> None:
        self._static, self._lazy = dict(static), dict(lazy)

    def __getitem__(self, key: str) -> Any:
        if key in self._static:
            return self._static[key]
        return self._lazy[key]()

    def __iter__(self) -> Iterator[str]:
        return iter([*self._static, *self._lazy])

    def __len__(self) -> int:
        return len(self._static) + len(self._lazy)


# ``ampcore info``'s lines for oneMKL and the GEMM paths (:mod:`.lowp_gemm`).
GEMM_PATHS: dict[str, Callable[[], str]] = {
    "onemkl": mkl.describe,
    "bf16_gemm": lambda: gemm_choice(BF16).describe(),
    "f16_gemm": lambda: gemm_choice(F16).describe(),
    "float8_gemm": lambda: float8.gemm_choice().describe(),
    "f32_gemm": openblas.describe,
}


class CPUBackend(ampcore.Backend):
    """NumPy arrays in host memory; BLAS for matmul."""

    name = "cpu"
    priority = 100

    def __init__(self) -> None:
        self.malloc_tuned = tune_malloc()

    def capabilities(self, index: int = 0) -> ampcore.Capabilities:
        tip = lowp_gemm.install_tip()  # "tip": a line `ampcore train` prints (oneMKL not installed, would help)
        return ampcore.Capabilities(
            device_name=_cpu_name(),
            storable=frozenset(dt.ALL_DTYPES + dt.FLOAT8_DTYPES),
            native=frozenset({dt.float64, dt.float32, dt.int64, dt.int32, dt.bool_}),
            emulated=frozenset({dt.float16, dt.bfloat16}),
            autocast_dtype=dt.bfloat16,
            policy="cpu",
            memory_bytes=_memory_bytes(),
            extra=_Extra(
                {
                    "numpy": np.__version__,
                    "cores": os.cpu_count(),
                    "malloc_tuned": self.malloc_tuned,
                    "compiled": compiled.status().enabled,  # ampcore bench's "compiled" column
                    "kernel_path": compiled.status().describe(),
                    **({"tip": tip} if tip else {}),
                },
                GEMM_PATHS,
            ),
            float8="emulated",
        )

    def kernel_functions(self) -> Mapping[str, Callable[..., Any]]:
        from .fused import fused_table

        return {**primitive_table(), "elementwise": elementwise, **fused_table()}

    def from_numpy(self, array: np.ndarray, dtype: Any, device_index: int = 0) -> np.ndarray:
        return dt.convert(array, dtype)  # a new array, rounded once (float64 -> bfloat16 too)

    def warm_up(self, device_index: int = 0) -> None:
        """numba's first compiled call in a process initialises its target (~0.2 s here: its registries, its
        typed containers), whichever loop it is; then each loop is read from numba's on-disk cache, and the GEMM
        paths are probed.  ``ampcore train --compare`` charged all of it to its first run, the AMP one: 0.54 s
        against the float32 run's 0.23, or 0.35 against 0.38 with float32 first (AMD EPYC Zen 5)."""
        compiled.warm()
        for describe in GEMM_PATHS.values():
            describe()

    def peak_memory(self, fn: Callable[[], Any], device_index: int = 0) -> int:
        """Peak bytes allocated while ``fn`` ran, from tracemalloc (NumPy reports its buffers to it).

        Python objects allocated by ``fn`` (graph nodes, tensors) count too; they
        are small beside the arrays.  Tracing slows Python while it is on, so
        it is on only for this call (unless the caller had started it).  The
        compiled loops are loaded first (:func:`.compiled.warm`): numba's one-time
        compilation is the process's memory, not ``fn``'s.  So are the GEMM paths
        chosen (:mod:`.lowp_gemm`): timed under tracemalloc, the widened path's
        allocations made it look 1.2-1.5x slower than oneMKL's, the reverse of
        the untraced ratio on an AMD EPYC Zen 5.
        """
        self.warm_up(device_index)  # the GEMM paths chosen untraced too: tracing slows the widened one
        started = not tracemalloc.is_tracing()
        if started:
            tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            fn()
            return max(tracemalloc.get_traced_memory()[1] - base, 0)
        finally:
            if started:
                tracemalloc.stop()

    def set_num_threads(self, n: int) -> None:
        """BLAS (threadpoolctl) and numba's parallel loops on ``n`` threads (``ampcore.set_num_threads``)."""
        threads.set_threads(n)

    def thread_counts(self) -> Mapping[str, int]:
        return threads.counts()

    def fused_kernel(self, program: Any, operand_dtypes: Any, result_dtype: Any) -> Any:
        """A captured step's fused elementwise chain as one numba pass (:mod:`.fusion`), eager's bits."""
        return fusion.fused_kernel(program, operand_dtypes, result_dtype)

    def fused_gemm_kernel(
        self, gemm: str, program: Any, product_dtype: Any, operand_dtypes: Any, result_dtype: Any
    ) -> Any:
        """A captured matmul or scaled_mm and the chain that reads its result as one kernel: the GEMM's float32
        result straight into the chain's numba pass (:func:`.fusion.fused_gemm_kernel`), eager's bits."""
        return fusion.fused_gemm_kernel(gemm, program, product_dtype, operand_dtypes, result_dtype)

    def capture_runner(self, program: Any) -> Any:
        """The core's runner on ``program`` with its float16 and bfloat16 values kept widened where all their
        kernels take them so (:mod:`.widen`), and its float8 casts' dequantized operands handed to the GEMMs that
        read them (:mod:`.dequantize`); None (the core's runner on ``program`` itself) where neither applies."""
        from ampcore.capture import reference_runner

        from .dequantize import dequantize_float8
        from .widen import widen_16bit

        widened = widen_16bit(program) or program
        rewritten = dequantize_float8(widened) or widened  # after widening, which compiles epilogues anew
        return None if rewritten is program else reference_runner(rewritten)

    def capture_support(self) -> str:
        if compiled.status().enabled:
            return (
                "kernels called back to back (the core's runner); elementwise chains fused into numba loops, "
                "and a GEMM's epilogue into its product's; inner 16-bit values kept widened in float32"
            )
        return "kernels called back to back (the core's runner); fused chains evaluated with NumPy (no numba)"

    def to_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, copy=True)


@hookimpl
def ampcore_backends() -> list[ampcore.Backend]:
    return [CPUBackend()]
