"""cuBLAS through a handle of this backend's own (nvmath-python's raw bindings, ``nvmath.bindings.cublas``), for
GEMMs inside a CUDA graph: CuPy's cuBLAS wrapper raises NotImplementedError while a stream captures.

One handle per device, created (with its workspace) before any capture, as cuBLAS allocates in ``cublasCreate``
and a graph must not; each call sets the current stream and, as ``cublasSetStream`` resets it, the workspace
again (torch does the same).  Host pointer mode: alpha and beta are read when the call is captured.  The
simulator's stand-in (:mod:`ampcore_cuda.sim.cublas`) where the simulator runs.
"""

from __future__ import annotations

import functools
import importlib
import threading
from typing import Any

from .runtime import import_cupy, simulated

__all__ = ["INSTALL_HINT", "WORKSPACE_BYTES", "import_cublas", "support", "prepare", "gemm_strided_batched_ex"]

INSTALL_HINT = "pip install 'ampcore-cuda[graphs]' (NVIDIA's nvmath-python, for cuBLAS with a handle of our own)"
WORKSPACE_BYTES = 32 * 2**20  # cuBLAS's default on Hopper; allocated before capture, owned by the handle
_POINTER_MODE_HOST = 0
_lock = threading.Lock()
_handles: dict[int, tuple[int, Any]] = {}


def import_cublas() -> Any:
    """``nvmath.bindings.cublas``, or the simulator's stand-in when the simulator runs."""
    if simulated():
        from . import sim

        return sim.nvmath_cublas_module()
    return importlib.import_module("nvmath.bindings.cublas")


@functools.cache
def support() -> tuple[bool, str]:
    """``(True, version)`` where the bindings load, else ``(False, the reason and the fix)``."""
    try:
        version = int(import_cublas().get_version())
    except ModuleNotFoundError as exc:
        return False, f"nvmath-python is not installed ({exc.name}): {INSTALL_HINT}"
    except Exception as exc:  # noqa: BLE001 - a missing libcublas, a driver too old: say why
        return False, f"nvmath-python's cuBLAS bindings cannot load ({type(exc).__name__}: {exc}): {INSTALL_HINT}"
    return True, f"cuBLAS {version // 10000}.{version // 100 % 100}.{version % 100} through nvmath-python"


def prepare(device: int) -> tuple[int, Any]:
    """The handle of ``device`` and its workspace, created on first use (outside any capture)."""
    with _lock:
        found = _handles.get(device)
        if found is None:
            cublas, cupy = import_cublas(), import_cupy()
            with cupy.cuda.Device(device):
                workspace = cupy.empty(WORKSPACE_BYTES, dtype="uint8")
                handle = int(cublas.create())
            cublas.set_pointer_mode(handle, _POINTER_MODE_HOST)
            found = _handles[device] = (handle, workspace)
    return found


def gemm_strided_batched_ex(device: int, *args: Any) -> None:
    """``cublasGemmStridedBatchedEx`` on the current stream with ``device``'s own handle: ``args`` are CuPy's
    ``gemmStridedBatchedEx``'s after the handle, in its order."""
    cublas = import_cublas()
    handle, workspace = prepare(device)
    cublas.set_stream(handle, import_cupy().cuda.get_current_stream().ptr)
    cublas.set_workspace(handle, workspace.data.ptr, WORKSPACE_BYTES)
    cublas.gemm_strided_batched_ex(handle, *args)
