"""A CUDA simulator for the cuda backend, in the spirit of Numba's ``NUMBA_ENABLE_CUDASIM``: a NumPy-backed
CuPy whose ``RawKernel`` runs the kernel's own CUDA C on the CPU (built by g++ against ``shim.h``, one fiber
per CUDA thread) and whose cuBLAS computes as ``CUBLAS_COMPUTE_32F`` does.

Opt-in only: ``AMPCORE_CUDA_SIMULATOR=h100`` (sm_90, bfloat16 autocast) or ``t4`` (sm_75, float16 autocast,
bfloat16 GEMMs fall back to float32); ``l4`` (sm_89) and ``b200`` (sm_100) for the float8 GEMM paths
that depend on the architecture (cuBLASLt's stand-in, :mod:`.cublaslt`).  Streams capture and graphs replay
(:mod:`.capture`), refusing what CUDA refuses inside a capture.  It proves kernel logic and the
glue around it; it says nothing about speed, NVRTC, real cuBLAS(Lt), the memory model or warp divergence.
"""

from __future__ import annotations

import os
import types
from typing import Any

from .devices import PROFILES, Profile

__all__ = [
    "ENV",
    "PROFILES",
    "IMPORTABLE",
    "requested_profile",
    "cupy_module",
    "cublaslt_module",
    "nvmath_cublas_module",
    "module",
]

ENV = "AMPCORE_CUDA_SIMULATOR"
_modules: dict[str, types.ModuleType] = {}


def requested_profile(value: str | None = None) -> Profile | None:
    """The profile ``value`` (default ``$AMPCORE_CUDA_SIMULATOR``) names, None when unset or empty; ValueError
    naming the valid values for any other."""
    value = (os.environ.get(ENV, "") if value is None else value).strip()
    if not value:
        return None
    try:
        return PROFILES[value.lower()]
    except KeyError:
        raise ValueError(
            f"{ENV}={value!r} is not a simulator profile; use one of "
            f"{', '.join(repr(k) for k in PROFILES)}, or unset it"
        ) from None


def cupy_module(profile: Profile) -> types.ModuleType:
    """The simulated ``cupy`` for ``profile`` (one per profile and process)."""
    from .namespace import make_cupy

    if profile.key not in _modules:
        _modules[profile.key] = make_cupy(profile)
    return _modules[profile.key]


def cublaslt_module(profile: Profile | None = None) -> Any:
    """The simulated ``nvmath.bindings.cublasLt`` of ``profile`` (default: ``$AMPCORE_CUDA_SIMULATOR``'s)."""
    from .cublaslt import make_cublaslt

    profile = profile or requested_profile()
    if profile is None:
        raise ValueError(f"{ENV} is not set: the simulated cuBLASLt has no device")
    return make_cublaslt(profile)


def nvmath_cublas_module() -> Any:
    """The simulated ``nvmath.bindings.cublas``: cuBLAS with a handle of the caller's own, capturable."""
    from .cublas import NVMATH_CUBLAS

    return NVMATH_CUBLAS


# What ``importlib.import_module`` finds in CuPy 14: ``cupy.cuda.cublas`` and ``cupy.cuda.nvrtc`` are attributes
# of ``cupy.cuda`` only (its module ``__getattr__`` loads cupy_backends.cuda.libs.*), so importing them by name
# raises ModuleNotFoundError here as there; runtime.resolve_module falls back to the parent's attribute.
IMPORTABLE = frozenset(
    {
        "cupy",
        "cupy.cuda",
        "cupy.cuda.device",
        "cupy.cuda.function",
        "cupy.cuda.runtime",
        "cupyx",
        "cupyx.scipy",
        "cupyx.scipy.special",
    }
)


def module(name: str, profile: Profile) -> Any:
    """The simulated module ``name`` as ``importlib.import_module`` gives it with CuPy 14 (``cupy``,
    ``cupy.cuda.device``, ``cupyx``, ``cupyx.scipy.special``, ...); ModuleNotFoundError for any other name,
    ``cupy.cuda.cublas`` included."""
    from .namespace import make_cupyx

    if name not in IMPORTABLE:
        raise ModuleNotFoundError(f"No module named {name!r} (the simulated CuPy 14)", name=name)
    cupy = cupy_module(profile)
    if name == "cupyx" or name.startswith("cupyx."):
        if "cupyx" not in _modules:
            _modules["cupyx"] = make_cupyx()
        root, parts = _modules["cupyx"], name.split(".")[1:]
    else:
        root, parts = cupy, name.split(".")[1:]
    for part in parts:
        root = getattr(root, part)
    return root
