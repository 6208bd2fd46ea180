"""``cupy.cuda.nvrtc`` and ``cupy.cuda.function`` of the simulator: the path the backend compiles and loads its
kernels through (ampcore_cuda.compiler), with the same calls, options and failure modes the backend relies on.

``compileProgram`` checks the options as NVRTC would use them (a known ``-arch`` the device can run) and the
source's constructs as the simulator's build does, and fails with :class:`NVRTCError` and a program log.  It
refuses flush-to-zero (``-ftz=true``, ``--use_fast_math``): the kernels run on the host's IEEE arithmetic, so
a flushing build would pass here and fail on a GPU.  The "cubin" it produces is the source and options; a
``Module`` loading it hands out the simulator's :class:`RawKernel`, which g++ builds on first launch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from . import build as _build
from . import capture
from .kernel import RawKernel

__all__ = ["NVRTCError", "Nvrtc", "Module", "VERSION", "SUPPORTED_ARCHS"]

VERSION = (12, 8)  # what cupy-cuda12x's NVRTC 12.8 reports (devices.RUNTIME_VERSION)
SUPPORTED_ARCHS = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 120)  # NVRTC 12.8's sm_* targets
_MAGIC = b"\x7fAMPSIM-IMAGE\n"
_FTZ = ("-ftz=true", "--ftz=true", "-use_fast_math", "--use_fast_math")


class NVRTCError(RuntimeError):
    """``cupy_backends.cuda.libs.nvrtc.NVRTCError``: a failed NVRTC call."""


class _Program:
    def __init__(self, source: str, name: str):
        self.source, self.name = source, name
        self.log, self.image, self.ptx = "", b"", False


class Nvrtc:
    """The NVRTC functions the backend calls, for one device of compute capability ``cc`` (90 for 9.0)."""

    def __init__(self, cc: int):
        self.cc = cc

    def getVersion(self) -> tuple[int, int]:  # noqa: N802 - CuPy's names
        return VERSION

    def getSupportedArchs(self) -> tuple[int, ...]:  # noqa: N802
        return SUPPORTED_ARCHS

    def createProgram(  # noqa: N802 - NVRTC's C API name, which the simulator mirrors
        self,
        src: str,
        name: str,
        headers: Sequence[Any],
        include_names: Sequence[Any],
    ) -> _Program:
        if headers or include_names:
            raise NVRTCError("NVRTC_ERROR_INVALID_INPUT (the simulator takes no headers)")
        return _Program(src, name)

    def compileProgram(self, program: _Program, options: Sequence[str]) -> None:  # noqa: N802
        capture.refuse(f"compiling kernel source {program.name!r} (a kernel not built and loaded before capture)")
        options = list(options)
        problem = self._check_options(options)
        if problem is None:
            try:
                _build.check_constructs(program.source)
            except _build.SimulatorBuildError as exc:
                problem = f"{program.name}: {exc}"
        if problem is not None:
            program.log = problem
            raise NVRTCError("NVRTC_ERROR_COMPILATION (6)")
        program.log = ""
        program.ptx = any(o.startswith("-arch=compute_") for o in options)
        program.image = _MAGIC + json.dumps({"source": program.source, "options": options}).encode()

    def _check_options(self, options: list[str]) -> str | None:
        flush = [o for o in options if o in _FTZ]
        if flush:
            return (
                f"the CUDA simulator computes with IEEE subnormals and cannot run a kernel built with {flush[0]} "
                "(flush-to-zero); build with --ftz=false, as ampcore_cuda.compiler does"
            )
        archs = [o.split("=", 1)[1] for o in options if o.startswith("-arch=")]
        if len(archs) != 1:
            return f"exactly one -arch=sm_XY or -arch=compute_XY option is needed, got {archs}"
        kind, _, number = archs[0].partition("_")
        if kind not in ("sm", "compute") or not number.isdigit() or int(number) not in SUPPORTED_ARCHS:
            return f"nvrtc: error: invalid value for --gpu-architecture (-arch): {archs[0]}"
        if int(number) > self.cc or (kind == "sm" and int(number) // 10 != self.cc // 10):
            return f"-arch={archs[0]} cannot run on this sm_{self.cc} device"
        return None

    def getProgramLog(self, program: _Program) -> str:  # noqa: N802
        return program.log

    def getCUBIN(self, program: _Program) -> bytes:  # noqa: N802
        if not program.image or program.ptx:
            raise NVRTCError("NVRTC_ERROR_INVALID_PROGRAM (no cubin: compiled for a virtual architecture)")
        return program.image

    def getPTX(self, program: _Program) -> bytes:  # noqa: N802
        if not program.image:
            raise NVRTCError("NVRTC_ERROR_INVALID_PROGRAM (not compiled)")
        return program.image

    def destroyProgram(self, program: _Program) -> None:  # noqa: N802
        program.image = b""


class Module:
    """``cupy.cuda.function.Module``: ``load(image)`` then ``get_function(name)``."""

    def __init__(self) -> None:
        self._code: str | None = None
        self._options: tuple[str, ...] = ()

    def load(self, image: bytes) -> None:
        capture.refuse("loading a module (a kernel not loaded before capture)")
        if not isinstance(image, bytes) or not image.startswith(_MAGIC):
            raise RuntimeError("CUDA_ERROR_INVALID_IMAGE: not an image the simulator's NVRTC produced")
        payload = json.loads(image[len(_MAGIC) :])
        self._code, self._options = payload["source"], tuple(payload["options"])

    def get_function(self, name: str) -> RawKernel:
        if self._code is None:
            raise RuntimeError("CUDA_ERROR_INVALID_HANDLE: get_function on a module that was not loaded")
        try:
            return RawKernel(self._code, name, self._options)
        except _build.SimulatorBuildError as exc:
            raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found ({exc})") from exc
