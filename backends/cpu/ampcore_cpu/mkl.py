"""oneMKL's low-precision GEMMs through ctypes on ``libmkl_rt`` (the ``mkl`` wheel): no compiled code of ours.

The wheel (``pip install 'ampcore-cpu[mkl]'``, x86-64 Linux) exports ``cblas_gemm_bf16bf16f32``,
``cblas_gemm_f16f16f32`` and, since 2025, ``cblas_gemm_e4m3e4m3f32`` / ``cblas_gemm_e5m2e5m2f32``: 16-bit or
float8 operands, float32 products and accumulation, a float32 result.  This module finds and loads the library
once, says why when it cannot (:func:`status`), and runs one 2-D product (:func:`gemm`).  Which products go to
MKL is :mod:`.lowp_gemm`'s choice.

``AMPCORE_CPU_GEMM`` picks the path: ``auto`` (the default: measured per dtype and thread count where oneMKL
runs its tuned kernels, the widened path where it runs its generic ones; :mod:`.lowp_gemm`), ``mkl`` (oneMKL for
every dtype it has a routine for) or ``widened`` (the float32 widen-and-sgemm path; MKL is never loaded).
CI runs the cpu tests with ``widened`` too, so both paths are tested in one install.

Intel's OpenMP runtime keeps its defaults.  ``KMP_BLOCKTIME=0`` (no spinning after each call) looked like it
spared OpenBLAS the spinning threads in one run on a loaded 2-core host; repeated, neither it nor the default
changed a 256x512x512 bfloat16 product (1.3-1.4 ms of wall time for 0.7 ms of the calling thread's CPU time, on
one thread) or an OpenBLAS product after it beyond the host's noise.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import platform
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

__all__ = [
    "ENV_GEMM",
    "cpu_vendor",
    "short_code_path",
    "describe",
    "loaded",
    "installed",
    "GEMM_MODES",
    "MKLStatus",
    "gemm_mode",
    "status",
    "routine",
    "layout",
    "gemm",
    "on_load",
    "cpu_flags",
]

ENV_GEMM = "AMPCORE_CPU_GEMM"
GEMM_MODES = ("auto", "mkl", "widened")
LIBRARY = "libmkl_rt.so.3"
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
# The routine of each operand dtype (both operands of one dtype); float8 ones are optional (MKL 2025.1+).
ROUTINES: dict[np.dtype, str] = {
    np.dtype(ml_dtypes.bfloat16): "cblas_gemm_bf16bf16f32",
    np.dtype(np.float16): "cblas_gemm_f16f16f32",
    np.dtype(ml_dtypes.float8_e4m3fn): "cblas_gemm_e4m3e4m3f32",
    np.dtype(ml_dtypes.float8_e5m2): "cblas_gemm_e5m2e5m2f32",
}
_REQUIRED = ("cblas_gemm_bf16bf16f32", "cblas_gemm_f16f16f32")
# Layout, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc (LP64: MKL_INT is a C int).
_ARGTYPES = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
_ARGTYPES += [ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
INT_MAX = 2**31 - 1
_LOAD_HOOKS: list[Callable[[], None]] = []


@dataclass(frozen=True)
class MKLStatus:
    """Whether oneMKL is loaded (``enabled``), and if not, why (``reason``, which names the fix)."""

    enabled: bool
    reason: str = ""
    version: str = ""
    path: str = ""
    code_path: str = ""
    routines: Mapping[np.dtype, Callable[..., None]] = field(default_factory=dict, repr=False)


def gemm_mode(environ: Mapping[str, str] | None = None) -> str:
    """``AMPCORE_CPU_GEMM``: ``auto`` (unset), ``mkl`` or ``widened``; ValueError naming a bad value."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_GEMM, "").strip().lower() or "auto"
    if value not in GEMM_MODES:
        raise ValueError(
            f"{ENV_GEMM}={env[ENV_GEMM]!r} is not a GEMM path; set it to one of {', '.join(GEMM_MODES)} "
            "(auto: measure which is faster; widened: float32 sgemm, never load oneMKL)"
        )
    return value


@functools.cache
def _cpuinfo() -> tuple[str, frozenset[str]]:
    """The first CPU's vendor and feature flags from /proc/cpuinfo (empty where there is none)."""
    vendor, flags = "", frozenset[str]()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id" and not vendor:
                    vendor = value.strip()
                elif key.strip() == "flags":
                    return vendor, frozenset(value.split())
    except OSError:
        pass
    return vendor, flags


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``avx512_bf16``, ``amx_bf16``, ...), from /proc/cpuinfo."""
    return _cpuinfo()[1]


def cpu_vendor() -> str:
    """``GenuineIntel``, ``AuthenticAMD``, ... ("" where /proc/cpuinfo does not say)."""
    return _cpuinfo()[0]


class _Version(ctypes.Structure):
    """MKL's ``MKLVersion`` (mkl_get_version): ``Processor`` names the code path it dispatches to on this CPU."""

    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("update", ctypes.c_int), ("patch", ctypes.c_int)]
    _fields_ += [(name, ctypes.c_char_p) for name in ("status", "build", "processor", "platform")]


def _code_path(lib: ctypes.CDLL) -> str:
    """MKL's words for the kernels it runs here: ``Intel(R) Architecture processors`` (its generic path, which
    it took on an AMD EPYC), or an ISA such as ``Intel(R) Advanced Vector Extensions 512 ...``."""
    version = _Version()
    lib.mkl_get_version(ctypes.byref(version))
    return (version.processor or b"").decode(errors="replace")


def short_code_path(processor: str) -> str:
    """``AMX``, ``AVX-512``, ``AVX2`` or ``generic`` for MKL's code path description."""
    for needle, label in (("AMX", "AMX"), ("AVX-512", "AVX-512"), ("AVX512", "AVX-512"), ("AVX2", "AVX2")):
        if needle in processor:
            return label
    return "generic"


def _library_path() -> str | None:
    """Where the ``mkl`` distribution installed ``libmkl_rt.so.3``, or None when it is not installed."""
    try:
        files = importlib.metadata.distribution("mkl").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == LIBRARY:
            return str(f.locate())
    return None


def installed() -> bool:
    """Whether the mkl wheel is installed for x86-64 Linux here (loads nothing)."""
    on_x86_linux = sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64")
    return on_x86_linux and _library_path() is not None


def _version(lib: ctypes.CDLL) -> str:
    buf = ctypes.create_string_buffer(256)
    lib.MKL_Get_Version_String(buf, len(buf))
    text = buf.value.decode(errors="replace")
    words = text.split()
    return words[words.index("Version") + 1] if "Version" in words else text  # "2026.2-Product" -> keep it short


def _load(environ: Mapping[str, str]) -> MKLStatus:
    if gemm_mode(environ) == "widened":
        return MKLStatus(False, f"{ENV_GEMM}=widened is set")
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return MKLStatus(
            False, f"oneMKL's wheel is loaded on x86-64 Linux only, not {sys.platform} {platform.machine()}"
        )
    path = _library_path()
    if path is None:
        return MKLStatus(False, "oneMKL is not installed: pip install 'ampcore-cpu[mkl]'")
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        return MKLStatus(False, f"loading {path} failed: {exc}")
    missing = [name for name in _REQUIRED if not hasattr(lib, name)]
    if missing:
        return MKLStatus(False, f"{path} lacks {', '.join(missing)}: pip install -U mkl")
    routines = {}
    for dtype, name in ROUTINES.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.argtypes, fn.restype = _ARGTYPES, None
            routines[dtype] = fn
    return MKLStatus(True, "", _version(lib), path, _code_path(lib), routines)


@functools.cache
def status() -> MKLStatus:
    """This process's oneMKL, loaded once (threads set as ``ampcore.set_num_threads`` says: :func:`on_load`)."""
    found = _load(os.environ)
    if found.enabled:
        for hook in _LOAD_HOOKS:
            hook()
    return found


def loaded() -> bool:
    """Whether this process has loaded oneMKL already (never loads it)."""
    return status.cache_info().currsize > 0 and status().enabled


def on_load(hook: Callable[[], None]) -> None:
    """Call ``hook()`` once oneMKL is loaded (at once if it is); the thread setting applies itself this way."""
    _LOAD_HOOKS.append(hook)
    if loaded():
        hook()


def routine(dtype: np.dtype) -> Callable[..., None] | None:
    """MKL's GEMM for two ``dtype`` operands, or None (not loaded, or no such routine)."""
    return status().routines.get(dtype)


def layout(x: np.ndarray) -> tuple[int, int] | None:
    """A 2-D array as row-major BLAS sees it: ``(NO_TRANS or TRANS, leading dimension)``, or None when its
    strides fit neither (a copy is needed).  A transposed view goes as TRANS, never copied."""
    rows, cols = x.shape
    e = x.itemsize
    s0, s1 = x.strides
    if (cols == 1 or s1 == e) and (rows == 1 or (s0 > 0 and s0 % e == 0 and s0 // e >= cols)):
        return NO_TRANS, (s0 // e if rows > 1 else max(cols, 1))
    if (rows == 1 or s0 == e) and (cols == 1 or (s1 > 0 and s1 % e == 0 and s1 // e >= rows)):
        return TRANS, (s1 // e if cols > 1 else max(rows, 1))
    return None


def blas_ready(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``(x or a C-contiguous copy of it, trans, ld)`` for a 2-D operand."""
    found = layout(x)
    if found is None:
        x = np.ascontiguousarray(x)
        found = layout(x)
        assert found is not None  # a C-contiguous 2-D array is NO_TRANS
    return x, found[0], found[1]


def gemm(fn: Callable[..., None], a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out = a @ b`` by MKL's ``fn`` for a 2-D (m, k) ``a`` and (k, n) ``b`` (m, n, k > 0, each < 2**31), and a
    float32 ``out`` whose rows are contiguous (``out.strides[1] == 4``)."""
    (m, k), n = a.shape, b.shape[1]
    a, ta, lda = blas_ready(a)
    b, tb, ldb = blas_ready(b)
    ldc = out.strides[0] // 4 if m > 1 else n
    fn(ROW_MAJOR, ta, tb, m, n, k, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, 0.0, out.ctypes.data, ldc)


def describe(found: MKLStatus | None = None) -> str:
    """One line: ``oneMKL 2026.2-Product, code path: <MKL's words>`` or ``not loaded: why``."""
    found = status() if found is None else found
    return f"oneMKL {found.version}, code path: {found.code_path}" if found.enabled else f"not loaded: {found.reason}"
