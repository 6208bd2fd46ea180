"""The simulated GPUs: device profiles, ``cupy.cuda.runtime``, ``cupy.cuda.Device`` and the memory pool."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["Profile", "PROFILES", "Runtime", "Device", "MemoryPool", "current_device"]


@dataclass(frozen=True)
class Profile:
    """What ``cudaGetDeviceProperties`` says about one simulated device."""

    key: str
    name: str
    major: int
    minor: int
    memory_bytes: int
    multiprocessors: int

    def properties(self) -> dict[str, Any]:
        return {
            "name": f"{self.name} (ampcore CUDA simulator)".encode(),
            "major": self.major,
            "minor": self.minor,
            "totalGlobalMem": self.memory_bytes,
            "multiProcessorCount": self.multiprocessors,
            "warpSize": 32,
            "maxThreadsPerBlock": 1024,
        }


PROFILES = {
    "h100": Profile("h100", "NVIDIA H100 80GB HBM3", 9, 0, 80 * 2**30, 132),
    "t4": Profile("t4", "Tesla T4", 7, 5, 15 * 2**30, 40),
    "l4": Profile("l4", "NVIDIA L4", 8, 9, 22 * 2**30, 58),  # Ada: float8, per-tensor scales only in cuBLASLt
    "b200": Profile("b200", "NVIDIA B200", 10, 0, 179 * 2**30, 148),  # Blackwell: MXFP8 block scaling
}
RUNTIME_VERSION = 12080  # the CUDA 12.8 runtime: what cupy-cuda12x reports

_local = threading.local()


def current_device() -> int:
    """The device ``cupy.cuda.Device(i)`` made current on this thread (0 by default, as in CUDA)."""
    return getattr(_local, "device", 0)


class Runtime:
    """``cupy.cuda.runtime`` for one profile: one device."""

    def __init__(self, profile: Profile):
        self.profile = profile

    def getDeviceCount(self) -> int:  # noqa: N802 - CuPy's names
        return 1

    def getDevice(self) -> int:  # noqa: N802
        return current_device()

    def getDeviceProperties(self, index: int) -> dict[str, Any]:  # noqa: N802
        if index != 0:
            raise ValueError(f"invalid device ordinal {index}: the simulator has one device, 0")
        return self.profile.properties()

    def runtimeGetVersion(self) -> int:  # noqa: N802
        return RUNTIME_VERSION

    def driverGetVersion(self) -> int:  # noqa: N802
        return RUNTIME_VERSION

    memcpyHostToDevice = 1  # noqa: N815 - CuPy's names
    streamCaptureModeGlobal, streamCaptureModeThreadLocal, streamCaptureModeRelaxed = 0, 1, 2  # noqa: N815

    def memcpyAsync(self, dst: int, src: int, size: int, kind: int, stream: int) -> None:  # noqa: N802
        from .streams import memcpy_async

        memcpy_async(dst, src, size, kind, stream)


class Device:
    """``cupy.cuda.Device``: a context manager making ``id`` current; kernels run synchronously, so
    ``synchronize`` has nothing to wait for."""

    def __init__(self, device: int | None = None, *, runtime: Runtime):
        self.id = current_device() if device is None else int(device)
        if self.id != 0:
            raise ValueError(f"invalid device ordinal {self.id}: the simulator has one device, 0")
        self._runtime = runtime
        self._saved: list[int] = []

    @property
    def compute_capability(self) -> str:
        return f"{self._runtime.profile.major}{self._runtime.profile.minor}"

    def synchronize(self) -> None:
        """Nothing is asynchronous in the simulator; refused inside a stream capture, as CUDA refuses it."""
        from .capture import refuse

        refuse("Device.synchronize()")

    def __enter__(self) -> Device:
        self._saved.append(current_device())
        _local.device = self.id
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.device = self._saved.pop()


class MemoryPool:
    """``cupy.get_default_memory_pool()``: counts the bytes of live device arrays in 512-byte bins and, like
    CuPy's pool, keeps freed bytes held until ``free_all_blocks``."""

    def __init__(self) -> None:
        self._used = 0
        self._held = 0
        self._lock = threading.Lock()

    def allocated(self, nbytes: int) -> None:
        with self._lock:
            self._used += -(-nbytes // 512) * 512
            self._held = max(self._held, self._used)

    def freed(self, nbytes: int) -> None:
        with self._lock:
            self._used -= -(-nbytes // 512) * 512

    def used_bytes(self) -> int:
        return self._used

    def total_bytes(self) -> int:
        return self._held

    def malloc(self, nbytes: int) -> Any:
        """What ``cupy.cuda.using_allocator(pool.malloc)`` names: allocations come from this pool."""
        raise NotImplementedError("the simulated pool is named by using_allocator; arrays allocate themselves")

    def free_all_blocks(self) -> None:
        with self._lock:
            self._held = self._used
