"""Compiling this backend's CUDA C with NVRTC directly, loading it with ``cupy.cuda.function.Module``, and the
on-disk cache of compiled images.

Not ``cupy.RawKernel``: CuPy appends ``-ftz=true`` to every NVRTC compile it does, RawKernel and RawModule
included (``_compile_with_cache_cuda`` in cupy/cuda/compiler.py; cupy issues #8382, #9576), so float32
subnormals (and bfloat16's, computed in float32) would be flushed to zero in every kernel; torch's CUDA kernels
keep them, and the conformance suite checks that.  Here the options are the backend's own plus
``--ftz=false`` and the device's ``-arch``, through the low-level API that CuPy 13 and 14 both have
(``cupy.cuda.nvrtc``, which is ``cupy_backends.cuda.libs.nvrtc``).

The image (a cubin, or PTX when NVRTC cannot target the device) is cached under
``$XDG_CACHE_HOME/ampcore/cuda`` (default ``~/.cache/ampcore/cuda``), keyed by the SHA-256 of the source, the
options, the NVRTC version and the target, so a second process loads it without compiling.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .runtime import import_cupy, import_cupy_module

__all__ = ["KernelCompileError", "load", "target", "cache_dir"]


class KernelCompileError(RuntimeError):
    """NVRTC refused a kernel's source; the message names the kernel and the options and carries NVRTC's log."""


def cache_dir() -> Path:
    """Where compiled images are kept: $XDG_CACHE_HOME/ampcore/cuda, else ~/.cache/ampcore/cuda."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ampcore" / "cuda"


def target(compute_capability: int, supported: Sequence[int]) -> tuple[str, str]:
    """(the ``-arch`` option, ``"cubin"`` or ``"ptx"``) for a device of ``compute_capability`` (90 for 9.0)
    given the architectures NVRTC supports.

    A cubin for the device's own architecture where NVRTC has it, else for the newest supported one of the
    same major version (SASS runs on later minor versions of its major); otherwise PTX for the newest
    supported architecture below the device, which the driver compiles on load.
    """
    archs = sorted(int(a) for a in supported) or [compute_capability]
    below = [a for a in archs if a <= compute_capability]
    same_major = [a for a in below if a // 10 == compute_capability // 10]
    if same_major:
        return f"-arch=sm_{same_major[-1]}", "cubin"
    return f"-arch=compute_{(below or archs)[-1]}", "ptx"


def load(source: str, name: str, options: Sequence[str]) -> Any:
    """Kernel ``name`` of ``source`` compiled with ``options`` for the current device, as a
    ``cupy.cuda.function.Function`` (called like a RawKernel: ``f(grid, block, args, shared_mem=0)``);
    KernelCompileError with NVRTC's log when the source does not compile."""
    cupy = import_cupy()
    nvrtc = cupy.cuda.nvrtc
    device = cupy.cuda.runtime.getDevice()
    arch, kind = target(int(cupy.cuda.Device(device).compute_capability), _supported(nvrtc))
    image = _image(nvrtc, source, name, (*options, arch), kind)
    module = import_cupy_module("cupy.cuda.function").Module()
    module.load(image)
    _MODULES.append(module)  # a Function must not outlive its module: keep every loaded module
    return module.get_function(name)


_MODULES: list[Any] = []


def _supported(nvrtc: Any) -> tuple[int, ...]:
    try:
        return tuple(int(a) for a in nvrtc.getSupportedArchs())
    except Exception:  # noqa: BLE001 - an NVRTC without nvrtcGetSupportedArchs: let the device's own arch be tried
        return ()


def _image(nvrtc: Any, source: str, name: str, options: tuple[str, ...], kind: str) -> bytes:
    version = ".".join(str(v) for v in nvrtc.getVersion())
    key = hashlib.sha256("\0".join((source, name, *options, version, kind)).encode()).hexdigest()[:32]
    path = cache_dir() / f"{name}-{key}.{kind}"
    try:
        return path.read_bytes()
    except OSError:  # not cached yet (or unreadable): compile
        pass
    image = _compile(nvrtc, source, name, options, kind)
    _store(path, image)
    return image


def _compile(nvrtc: Any, source: str, name: str, options: tuple[str, ...], kind: str) -> bytes:
    program = nvrtc.createProgram(source, f"{name}.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(program, list(options))
        except Exception as exc:  # nvrtc.NVRTCError; the log says what is wrong with the source
            raise KernelCompileError(
                f"NVRTC could not compile kernel {name!r} with {' '.join(options)} ({exc}):\n{_log(nvrtc, program)}"
            ) from exc
        return nvrtc.getCUBIN(program) if kind == "cubin" else nvrtc.getPTX(program)
    finally:
        nvrtc.destroyProgram(program)


def _log(nvrtc: Any, program: Any) -> str:
    try:
        return str(nvrtc.getProgramLog(program)).strip()
    except Exception as exc:  # noqa: BLE001 - the log is a courtesy: never hide the compile error behind its failure
        return f"(no log: {type(exc).__name__}: {exc})"


def _store(path: Path, image: bytes) -> None:
    """Write ``image`` atomically (a concurrent process writes the same bytes); a cache that cannot be written
    (read-only home) only costs a compile next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(image)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
