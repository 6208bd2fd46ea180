"""OpenCL devices in a stable order, each with its context, queue, memory pool and program cache.

``opencl:N`` is the N-th device of :func:`device_list`: GPUs and accelerators
first, then CPUs, each group by platform name and the platform's own order, so
an index names the same device from run to run (the ICD loader's platform
order is not stable).  Everything about a device is created on first use.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

from .probe import HalfSupport, probe_native_half

_lock = threading.Lock()
_devices: list[Any] | None = None
_states: dict[int, "DeviceState"] = {}


def cl() -> Any:
    """The pyopencl module (imported here, on first use, so ampcore_opencl imports without it)."""
    import pyopencl

    return pyopencl


def is_cpu(device: Any) -> bool:
    """Whether ``device`` is a CPU device (PoCL's, say) rather than a GPU or accelerator."""
    return bool(device.type & cl().device_type.CPU)


def _type_rank(device: Any) -> int:
    return 1 if is_cpu(device) else 0


def device_list() -> list[Any]:
    """Every OpenCL device of every platform, in ampcore's stable order (cached)."""
    global _devices
    with _lock:
        if _devices is None:
            found = []
            for platform in cl().get_platforms():
                try:
                    devices = platform.get_devices()
                except cl().Error:  # a platform with no devices raises DEVICE_NOT_FOUND
                    continue
                found += [(_type_rank(d), platform.name, i, d) for i, d in enumerate(devices)]
            _devices = [d for *_, d in sorted(found, key=lambda t: t[:3])]
        return _devices


def device_state(index: int) -> "DeviceState":
    """The (lazily created) state of device ``opencl:index``."""
    state = _states.get(index)
    if state is None:
        device = device_list()[index]
        with _lock:
            state = _states.get(index)
            if state is None:
                state = _states[index] = DeviceState(index, device)
    return state


class DeviceState:
    """One device's context, in-order queue, memory pool, probed capabilities and compiled kernels.

    Kernels are looked up by a key the caller chooses, e.g. ``("add", "float16",
    "scalar_b")``: the source is generated and compiled only on the first miss,
    so a scalar that changes from call to call (passed as an argument) never
    recompiles anything.
    """

    def __init__(self, index: int, device: Any):
        pyopencl = cl()
        from pyopencl.tools import ImmediateAllocator, MemoryPool

        self.index = index
        self.device = device
        self.context = pyopencl.Context([device])
        self.queue = pyopencl.CommandQueue(self.context)
        self.pool = MemoryPool(ImmediateAllocator(self.queue))
        self.extensions = frozenset(device.extensions.split())
        self.fp64 = "cl_khr_fp64" in self.extensions or bool(getattr(device, "double_fp_config", 0))
        fp_config = pyopencl.device_fp_config
        # Without this option OpenCL allows 2.5 ulp division and 3 ulp sqrt in float32, and a float16/bfloat16
        # result computed in float32 would then not be correctly rounded.
        correct_div = bool(device.single_fp_config & fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT)
        self.build_options: tuple[str, ...] = ("-cl-fp32-correctly-rounded-divide-sqrt",) if correct_div else ()
        self.correctly_rounded_div_sqrt = correct_div
        self.max_work_group_size = int(device.max_work_group_size)
        self._kernels: dict[Any, Any] = {}
        self._programs: dict[Any, Any] = {}
        self._meta: dict[tuple[int, ...], Any] = {}
        self._build_lock = threading.Lock()
        self.launch_lock = threading.Lock()
        self.half: HalfSupport = probe_native_half(self)

    # --- kernels -------------------------------------------------------
    def kernel(self, key: Any, source: Callable[[], str], name: str,
               scalar_types: Sequence[Any] | None = None) -> Any:
        """The compiled kernel ``name`` for ``key``, building ``source()`` on the first call only.

        ``scalar_types`` lists, per argument, the NumPy dtype of a scalar
        argument or None for a buffer (pyopencl's ``set_scalar_arg_dtypes``),
        so callers may pass Python numbers.
        """
        found = self._kernels.get((key, name))
        if found is not None:
            return found
        with self._build_lock:
            found = self._kernels.get((key, name))
            if found is None:
                program = self._programs.get(key)
                if program is None:  # one build per key, however many kernels its source holds
                    program = self._programs[key] = self.build(source())
                found = cl().Kernel(program, name)  # program.<name> warns on a second fetch
                if scalar_types is not None:
                    found.set_scalar_arg_dtypes(list(scalar_types))
                self._kernels[(key, name)] = found
        return found

    def build(self, source: str) -> Any:
        """Compile ``source`` for this device; a build error carries the compiler log and the source."""
        pyopencl = cl()
        try:
            return pyopencl.Program(self.context, source).build(options=list(self.build_options))
        except pyopencl.Error as exc:
            numbered = "\n".join(f"{i + 1:4d} {line}" for i, line in enumerate(source.splitlines()))
            raise RuntimeError(f"OpenCL build failed on {self.device.name!r}: {exc}\n--- source ---\n{numbered}") from exc

    def launch(self, kernel: Any, global_size: Sequence[int], local_size: Sequence[int] | None, *args: Any) -> Any:
        """Enqueue ``kernel`` (no wait).  Kernel objects hold their arguments, so setting and enqueueing is
        done under a lock: two threads must not interleave their arguments.

        ``local_size=None`` does not leave the work-group size to the driver: PoCL compiles a kernel anew
        for every work-group size, and picks that size from the global size, so each new shape would cost a
        compile (~0.7 s).  The first axis gets the largest power of two up to 64 dividing it, the others 1:
        at most seven variants per kernel, whatever the shapes.
        """
        global_size = tuple(int(n) for n in global_size)
        if local_size is None:
            first = global_size[0] & -global_size[0] if global_size[0] else 1  # its largest power-of-two divisor
            local_size = (min(first, 64),) + (1,) * (len(global_size) - 1)
        with self.launch_lock:
            return kernel(self.queue, global_size, tuple(local_size), *args)

    # --- memory --------------------------------------------------------
    def allocate(self, nbytes: int) -> Any:
        """A device buffer of at least ``nbytes`` from the pool (OpenCL has no empty buffers)."""
        return self.pool.allocate(max(int(nbytes), 8))

    def meta(self, values: Sequence[int]) -> Any:
        """A read-only int64 device buffer holding ``values`` (shapes and strides for strided kernels).

        Cached by value: a training step uses the same few layouts every
        iteration, so after the first step no upload happens at all.
        """
        key = tuple(int(v) for v in values)
        found = self._meta.get(key)
        if found is None:
            pyopencl = cl()
            host = np.array(key or (0,), dtype=np.int64)
            found = pyopencl.Buffer(self.context, pyopencl.mem_flags.READ_ONLY | pyopencl.mem_flags.COPY_HOST_PTR,
                                    hostbuf=host)
            if len(self._meta) > 4096:  # bounded: layouts of a long-running process with varying shapes
                self._meta.clear()
            self._meta[key] = found
        return found

    def synchronize(self) -> None:
        self.queue.finish()

    def __repr__(self) -> str:
        return f"<DeviceState opencl:{self.index} {self.device.name!r}>"
