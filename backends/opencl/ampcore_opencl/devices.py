"""OpenCL devices in a stable order, each with its context, queue, memory pool and program cache.

``opencl:N`` is the N-th device of :func:`device_list`: GPUs and accelerators
first, then CPUs, each group by platform name and the platform's own order, so
an index names the same device from run to run (the ICD loader's platform
order is not stable).  Every device found is numbered, usable or not, so an
index does not move when a runtime breaks.  Everything about a device is
created on first use.

A device is *usable* only once it has built and run a kernel
(:func:`device_status`): an OpenCL stack can list a device whose compiler
cannot build for this CPU (pip's PoCL 3.0, on LLVM 14, on AMD Zen 5: "unknown
target CPU 'generic'").  Selecting an unusable device raises
``BackendUnavailableError`` with the compiler's message and the fix.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ampcore

from . import runtimes
from .probe import (
    HalfConvert,
    HalfSupport,
    choose_half_convert,
    compiler_message,
    probe_native_half,
    quiet_compiler,
    run_smoke_kernel,
    stderr_silenced,
)

_lock = threading.Lock()
_devices: list[Any] | None = None
_states: dict[int, DeviceState] = {}
_unusable: dict[int, str] = {}


def cl() -> Any:
    """The pyopencl module (imported here, on first use, so ampcore_opencl imports without it), with the
    runtimes installed from PyPI registered with its ICD loader first."""
    runtimes.prepare()
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


def describe(device: Any) -> str:
    """``'name' (platform)``, for messages."""
    return f"{device.name.strip()!r} ({device.platform.name.strip()})"


def device_status(index: int) -> ampcore.Availability:
    """Whether ``opencl:index`` has built and run a kernel here (tried once per process; never raises)."""
    try:
        device_state(index)
    except ampcore.BackendUnavailableError as exc:
        return ampcore.Availability(False, exc.reason)
    return ampcore.Availability(True)


def device_state(index: int) -> DeviceState:
    """The (lazily created) state of device ``opencl:index``; BackendUnavailableError if it is unusable."""
    state = _states.get(index)
    if state is not None:
        return state
    device = device_list()[index]
    with _lock:
        state = _states.get(index)
        if state is None and index not in _unusable:
            try:
                state = _states[index] = DeviceState(index, device)
            except Exception as exc:  # noqa: BLE001 - its compiler or runtime failed: unusable, with the reason and the fix
                _unusable[index] = _unusable_reason(device, exc)
    if state is None:
        raise ampcore.BackendUnavailableError("opencl", _unusable[index], device=f"opencl:{index}")
    return state


def _unusable_reason(device: Any, error: BaseException) -> str:
    fix = runtimes.INTEL_HINT
    if "Intel" in device.platform.name:
        fix = "reinstall it: pip install --force-reinstall 'ampcore-opencl[intel]'"
    return f"{describe(device)} cannot build and run a kernel: {compiler_message(error)}; use another device, or {fix}"


class BuildError(RuntimeError):
    """A kernel did not compile: the compiler's first error, and where its whole log and the source are."""


def _write_build_log(device: Any, source: str, error: BaseException) -> str:
    folder = os.environ.get("AMPCORE_OPENCL_BUILD_LOG") or tempfile.gettempdir()
    numbered = "\n".join(f"{i + 1:4d} {line}" for i, line in enumerate(source.splitlines()))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="ampcore-opencl-build-", suffix=".log", dir=folder)
        with os.fdopen(fd, "w") as out:
            out.write(f"device: {describe(device)}\n\n--- compiler ---\n{error}\n\n--- source ---\n{numbered}\n")
    except OSError as exc:
        return f"not written: {exc}"
    return path


_recording = threading.local()


def recording() -> Any:
    """The enqueue recorder active on this thread (:mod:`.launch_list`), or None: each of :class:`DeviceState`'s
    enqueues reports to it while a captured program's first replay runs."""
    return getattr(_recording, "recorder", None)


def set_recording(recorder: Any) -> None:
    """Make ``recorder`` (or None) this thread's enqueue recorder."""
    _recording.recorder = recorder


def refuse_recording(reason: str) -> None:
    """Tell this thread's recorder, if any, that what is running cannot be replayed from a list of enqueues."""
    recorder = recording()
    if recorder is not None:
        recorder.refuse(reason)


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
        self.platform: str = device.platform.name.strip()  # per-platform kernel variants (gemm's pack_b)
        self.context = pyopencl.Context([device])
        self.queue = pyopencl.CommandQueue(self.context)
        run_smoke_kernel(self.context, self.queue)  # raises where this device cannot build or run kernels
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
        # The float16 load/store conversions (probe.choose_half_convert), selected in every build by a -D.
        self.half_convert: HalfConvert = choose_half_convert(self)
        self.build_options += self.half_convert.build_options

    # --- kernels -------------------------------------------------------
    def kernel(self, key: Any, source: Callable[[], str], name: str, scalar_types: Sequence[Any] | None = None) -> Any:
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
        """Compile ``source`` for this device.

        A failure raises a short error: the compiler's first error line, and the
        file holding its whole log and the numbered source
        (``AMPCORE_OPENCL_BUILD_LOG=DIR`` chooses the folder; default: a
        temporary one).
        """
        pyopencl = cl()
        try:
            with quiet_compiler(), stderr_silenced():  # a failure's diagnostics go to the log file, not stderr
                return pyopencl.Program(self.context, source).build(options=list(self.build_options))
        except pyopencl.Error as exc:
            log = _write_build_log(self.device, source, exc)
            raise BuildError(
                f"OpenCL build failed on {describe(self.device)}: {compiler_message(exc)} "
                f"(compiler log and source: {log})"
            ) from exc

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
        local_size = tuple(local_size)
        recorder = recording()
        if recorder is not None:
            recorder.launch(self, kernel, global_size, local_size, args)
        with self.launch_lock:
            return kernel(self.queue, global_size, local_size, *args)

    def copy(self, dst: Any, src: Any, nbytes: int, dst_offset: int = 0, src_offset: int = 0) -> None:
        """Enqueue a device-to-device copy of ``nbytes`` (byte offsets into each buffer)."""
        recorder = recording()
        if recorder is not None:
            recorder.copy(self, dst, src, nbytes, dst_offset, src_offset)
        with self.launch_lock:
            cl().enqueue_copy(self.queue, dst, src, byte_count=nbytes, src_offset=src_offset, dst_offset=dst_offset)

    def fill(self, buffer: Any, pattern: np.ndarray, nbytes: int) -> None:
        """Enqueue filling the first ``nbytes`` of ``buffer`` with the one-element array ``pattern``."""
        recorder = recording()
        if recorder is not None:
            recorder.fill(self, buffer, pattern, nbytes)
        with self.launch_lock:
            cl().enqueue_fill_buffer(self.queue, buffer, pattern, 0, nbytes)

    def upload(self, buffer: Any, host: np.ndarray) -> Any:
        """Enqueue a copy of ``host`` into ``buffer`` (no wait); returns its event, which holds ``host`` until the
        copy has run (dropping the event waits for it)."""
        refuse_recording("a kernel uploads host data")
        with self.launch_lock:
            return cl().enqueue_copy(self.queue, buffer, host, is_blocking=False)

    def download(self, host: np.ndarray, buffer: Any) -> None:
        """Copy the start of ``buffer`` into ``host``, waiting for it (a host read)."""
        refuse_recording("a kernel reads device data on the host")
        with self.launch_lock:
            cl().enqueue_copy(self.queue, host, buffer, is_blocking=True)

    # --- memory --------------------------------------------------------
    def allocate(self, nbytes: int) -> Any:
        """A device buffer of at least ``nbytes`` from the pool (OpenCL has no empty buffers)."""
        buffer = self.pool.allocate(max(int(nbytes), 8))
        recorder = recording()
        if recorder is not None:
            recorder.allocate(self, buffer, nbytes)
        return buffer

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
            found = pyopencl.Buffer(
                self.context, pyopencl.mem_flags.READ_ONLY | pyopencl.mem_flags.COPY_HOST_PTR, hostbuf=host
            )
            if len(self._meta) > 4096:  # bounded: layouts of a long-running process with varying shapes
                self._meta.clear()
            self._meta[key] = found
        return found

    def synchronize(self) -> None:
        self.queue.finish()

    def __repr__(self) -> str:
        return f"<DeviceState opencl:{self.index} {self.device.name!r}>"
