"""The ``opencl`` backend: every OpenCL device pyopencl finds, as ``opencl:0`` .. ``opencl:N-1``.

Registered under the ``ampcore.backends`` entry point ``opencl``; uses only
ampcore's public API, like any third-party backend.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import numpy as np

import ampcore
from ampcore import dtypes as dt
from ampcore.plugins import hookimpl

from .array import CLArray
from .codegen import ctype

_RUNTIME_HINT = (
    "pip install 'ampcore-opencl[intel]' (Intel's OpenCL CPU runtime, any x86-64 CPU) or "
    "'ampcore-opencl[pocl]' (PoCL); no driver needed"
)


class OpenCLBackend(ampcore.Backend):
    """OpenCL through pyopencl: float32 everywhere, float16 stored in 2 bytes on every device (computed in
    half where the device really does half arithmetic), bfloat16 as 16-bit words."""

    name = "opencl"
    device_type = "opencl"

    @property
    def priority(self) -> int:  # type: ignore[override]  # the base class's plain attribute, computed here
        """150 (above cpu's 100) when the first usable device is a GPU or accelerator; 50 when it is a CPU
        device (PoCL or Intel's CPU runtime run on the cores NumPy already uses, so the cpu backend stays the
        default there)."""
        try:
            from .devices import device_list, is_cpu

            devices = device_list()
            usable = [d for i, d in enumerate(devices) if self.device_status(i).ok]
        except Exception:  # noqa: BLE001 - no pyopencl or no platform: unavailable anyway, and info must not crash
            return 50
        return 150 if usable and not is_cpu(usable[0]) else 50

    def availability(self) -> ampcore.Availability:
        """Available when at least one device has built and run a kernel.  The reason of an unavailable
        backend says why each device failed; an available one notes runtimes that could not be set up."""
        try:
            from . import runtimes
            from .devices import device_list

            devices = device_list()
        except ImportError as exc:
            return ampcore.Availability(False, f"pyopencl is not importable ({exc}): pip install ampcore-opencl")
        except Exception as exc:  # noqa: BLE001 - the ICD loader reports "no platforms" as an error
            problems = "".join(f"; {p}" for p in runtimes.problems())
            return ampcore.Availability(
                False, f"no OpenCL platform ({type(exc).__name__}: {exc}){problems}; {_RUNTIME_HINT}"
            )
        notes = runtimes.problems()
        if not devices:
            return ampcore.Availability(False, "; ".join(["OpenCL platforms have no devices", *notes, _RUNTIME_HINT]))
        statuses = [self.device_status(i) for i in range(len(devices))]
        if not any(statuses):
            return ampcore.Availability(
                False,
                "no OpenCL device can build kernels here: "
                + "; ".join([*(f"opencl:{i} {s.reason}" for i, s in enumerate(statuses)), *notes]),
            )
        return ampcore.Availability(True, "; ".join(notes))

    def device_count(self) -> int:
        from .devices import device_list

        return len(device_list())

    def device_status(self, index: int = 0) -> ampcore.Availability:
        """Usable once the device has built and run a kernel (tried once per process)."""
        from .devices import device_status

        return device_status(index)

    def _state(self, index: int) -> Any:
        from .devices import device_state

        return device_state(index)

    def capabilities(self, index: int = 0) -> ampcore.Capabilities:
        state = self._state(index)
        device = state.device
        storable = {dt.float32, dt.float16, dt.bfloat16, dt.int32, dt.int64, dt.bool_, *dt.FLOAT8_DTYPES}
        native = {dt.float32, dt.int32, dt.int64, dt.bool_}
        if state.fp64:
            storable.add(dt.float64)
            native.add(dt.float64)
        if state.half.native:
            native.add(dt.float16)
        return ampcore.Capabilities(
            device_name=device.name.strip(),
            storable=frozenset(storable),
            native=frozenset(native),
            emulated=frozenset(storable - native - set(dt.FLOAT8_DTYPES)),
            autocast_dtype=dt.float16,
            policy="cuda",  # an fp16 accelerator: torch's CUDA lists (matmul/conv in fp16, softmax/losses in fp32)
            memory_bytes=int(device.global_mem_size),
            extra={
                "platform": device.platform.name.strip(),
                "opencl": device.version.strip(),
                "driver": device.driver_version.strip(),
                "compute_units": int(device.max_compute_units),
                "float16": state.half.tier,
                "float16_probe": state.half.detail,
                "float16_path": state.half_convert.summary,
                "cl_khr_fp16": state.half.claimed,
                "correctly_rounded_div_sqrt": state.correctly_rounded_div_sqrt,
                "extensions": sorted(state.extensions),
            },
            float8="emulated",  # bytes, converted with integer arithmetic (ampcore.cgen.float8_conversions)
        )

    def kernel_functions(self) -> Mapping[str, Callable[..., Any]]:
        from .kernels import kernel_table

        return kernel_table()

    # --- array I/O -----------------------------------------------------
    def from_numpy(self, array: np.ndarray, dtype: Any, device_index: int = 0) -> CLArray:
        dtype = dt.as_dtype(dtype)
        state = self._state(device_index)
        if dtype == dt.float64 and not state.fp64:
            raise TypeError(
                f"device opencl:{device_index} ({state.device.name.strip()!r}) cannot store float64: "
                "it lacks cl_khr_fp64; use float32"
            )
        host = np.asarray(dt.convert(np.asarray(array), dtype), order="C").view(ctype(dtype).host)  # 0-d stays 0-d
        out = CLArray(state, host.shape, dtype)
        if out.size:
            # The copy runs later, in queue order; its event holds the host array until then (and
            # dropping the event would wait for it, so the array keeps it).
            out._keepalive = state.upload(out.buffer, host)
        return out

    def to_numpy(self, array: CLArray) -> np.ndarray:
        raw = np.empty(array.shape, dtype=ctype(array.dtype).host)
        if array.size:
            array.state.download(raw, array.buffer)
        return raw.view(array.dtype.numpy) if array.dtype != dt.bool_ else raw.astype(np.bool_)

    def dtype_of(self, array: CLArray) -> dt.DType:
        return array.dtype

    def shape_of(self, array: CLArray) -> tuple[int, ...]:
        return array.shape

    def nbytes(self, array: CLArray) -> int:
        return array.nbytes

    def synchronize(self, device_index: int = 0) -> None:
        self._state(device_index).synchronize()

    def empty_cache(self, device_index: int = 0) -> None:
        """Free the memory pool's blocks that no array holds (torch.cuda.empty_cache)."""
        self._state(device_index).pool.free_held()

    def peak_memory(self, fn: Callable[[], Any], device_index: int = 0) -> int:
        """The memory pool's growth while ``fn`` ran: its high-water mark, since it keeps freed blocks.

        Blocks are rounded up to the pool's size bins, so this is what the
        device had to provide, a little above the bytes in use at the peak.
        """
        pool = self._state(device_index).pool
        gc.collect()  # dropped arrays go back to the pool, which then returns them to the device
        pool.free_held()
        base = int(pool.managed_bytes)
        fn()
        self.synchronize(device_index)
        return max(int(pool.managed_bytes) - base, 0)

    # --- captured steps (ampcore.compile) -------------------------------
    def fused_kernel(self, program: Any, operand_dtypes: Any, result_dtype: Any) -> Any:
        """A fused chain as one OpenCL kernel (:mod:`.fusion`), operands of mixed dtypes and layouts."""
        from .fusion import fused_kernel

        return fused_kernel(program, operand_dtypes, result_dtype)

    def fused_gemm_kernel(
        self, gemm: str, program: Any, product_dtype: Any, operand_dtypes: Any, result_dtype: Any
    ) -> Any:
        """A captured matmul and the chain that alone reads its product as one kernel: the GEMM's float32 sums go
        through the chain instead of being stored (:mod:`.gemm_epilogue`), eager's bits."""
        from .gemm_epilogue import fused_gemm_kernel

        return fused_gemm_kernel(gemm, program, product_dtype, operand_dtypes, result_dtype)

    def capture_runner(self, program: Any) -> Any:
        """The program's enqueues recorded at its first replay and replayed from a prebuilt list
        (:mod:`.launch_list`); the core's reference runner where the list declines (random draws, host reads)."""
        from .launch_list import runner

        return runner(program)

    def capture_support(self) -> str:
        return (
            "each replay a prebuilt list of enqueues, recorded at the first, steps that draw a seed or a learning "
            "rate called afresh in it (programs whose kernels move data to or from the host replay kernel by kernel, "
            "the core's runner); elementwise chains fused "
            "into one OpenCL kernel each (mixed dtypes, broadcast operands, eager's 16-bit roundings kept), and a "
            "matmul's epilogue into its GEMM kernel"
        )

    def conformance_known_gaps(self) -> str | None:
        path = resources.files("ampcore_opencl") / "known_gaps.toml"
        return str(path) if path.is_file() else None


@hookimpl
def ampcore_backends() -> list[ampcore.Backend]:
    return [OpenCLBackend()]
