"""The ``cuda`` backend: every device CuPy sees, as ``cuda:0`` .. ``cuda:N-1``.

Registered under the ``ampcore.backends`` entry point ``cuda``; uses only
ampcore's public API.  Nothing here imports CuPy at import time.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import ampcore
from ampcore import dtypes as dt
from ampcore.plugins import hookimpl

from . import runtime
from .array import CuArray
from .codegen import ctype


class CUDABackend(ampcore.Backend):
    """NVIDIA GPUs through CuPy: cuBLAS GEMMs with float32 accumulation, fused AMP kernels as CUDA C."""

    name = "cuda"
    device_type = "cuda"
    # Above opencl's 150: on an NVIDIA GPU this is the faster path.  On the simulator, below cpu's 100: it is
    # never the default device, only the one asked for by name.
    GPU_PRIORITY, SIMULATOR_PRIORITY = 200, 10

    @property
    def priority(self) -> int:  # type: ignore[override]
        return self.SIMULATOR_PRIORITY if runtime.simulated() else self.GPU_PRIORITY

    def availability(self) -> ampcore.Availability:
        return runtime.probe()

    def device_count(self) -> int:
        return runtime.device_count()

    def capabilities(self, index: int = 0) -> ampcore.Capabilities:
        from .cublaslt import support

        cupy = runtime.import_cupy()
        props = runtime.properties(index)
        float8_gemm = support(index) if (int(props["major"]), int(props["minor"])) >= runtime.FLOAT8_CC else None
        return runtime.capabilities_from_properties(props, cupy.cuda.runtime.runtimeGetVersion(), float8_gemm)

    def kernel_functions(self) -> Mapping[str, Callable[..., Any]]:
        from .kernels import kernel_table

        return kernel_table()

    # --- captured steps (ampcore.compile) -------------------------------
    def fused_kernel(self, program: Any, operand_dtypes: Any, result_dtype: Any) -> Any:
        """A fused chain as one CUDA kernel (:mod:`.fusion`), operands of mixed dtypes, compiled with
        ``--ftz=false``."""
        from .fusion import fused_kernel

        return fused_kernel(program, operand_dtypes, result_dtype)

    def capture_runner(self, program: Any) -> Any:
        """The program as one CUDA-graph launch per replay (:mod:`.graph_runner`), or None where it cannot be
        graphed (random draws, no CUDA graphs here): the core's reference runner replays it then."""
        from .graph_runner import runner

        return runner(program)

    def capture_support(self) -> str:
        from .graph_runner import support

        return support()

    # --- array I/O -----------------------------------------------------
    def from_numpy(self, array: np.ndarray, dtype: Any, device_index: int = 0) -> CuArray:
        cupy = runtime.import_cupy()
        dtype = dt.as_dtype(dtype)
        c = ctype(dtype)
        # rounded once, here; np.asarray, not np.ascontiguousarray, which makes a 0-d array 1-d
        host = np.asarray(dt.convert(np.asarray(array), dtype), order="C").view(c.cupy_dtype)
        with cupy.cuda.Device(device_index):
            return CuArray(cupy.asarray(host), dtype)

    def to_numpy(self, array: CuArray) -> np.ndarray:
        raw = array.data.get()
        return raw.view(array.dtype.numpy) if array.dtype == dt.bfloat16 or array.dtype in dt.FLOAT8_DTYPES else raw

    def dtype_of(self, array: CuArray) -> dt.DType:
        return array.dtype

    def shape_of(self, array: CuArray) -> tuple[int, ...]:
        return array.shape

    def nbytes(self, array: CuArray) -> int:
        return array.nbytes

    def synchronize(self, device_index: int = 0) -> None:
        runtime.import_cupy().cuda.Device(device_index).synchronize()

    def empty_cache(self, device_index: int = 0) -> None:
        """Free CuPy's pooled blocks that no array holds (torch.cuda.empty_cache)."""
        cupy = runtime.import_cupy()
        with cupy.cuda.Device(device_index):
            cupy.get_default_memory_pool().free_all_blocks()

    # --- measurement ---------------------------------------------------
    def peak_memory(self, fn: Callable[[], Any], device_index: int = 0) -> int:
        """The growth of CuPy's default memory pool while ``fn`` ran: its high-water mark, since the pool keeps
        freed blocks instead of returning them to the device.

        Blocks are rounded up to the pool's 512-byte bins, so this is what the
        device had to provide, a little above the bytes in use at the peak.
        Memory CuPy allocates outside the pool (cuBLAS workspaces, compiled
        kernels) is not counted.
        """
        cupy = runtime.import_cupy()
        with cupy.cuda.Device(device_index):
            pool = cupy.get_default_memory_pool()
            gc.collect()  # dropped arrays go back to the pool, which then returns them to the device
            pool.free_all_blocks()
            base = int(pool.total_bytes())
            fn()
            cupy.cuda.Device(device_index).synchronize()
            return max(int(pool.total_bytes()) - base, 0)


@hookimpl
def ampcore_backends() -> list[ampcore.Backend]:
    return [CUDABackend()]
