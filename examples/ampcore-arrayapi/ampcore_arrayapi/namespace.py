"""Which Array API namespace the backend computes with, and what it offers.

The user picks the library with ``AMPCORE_ARRAYAPI_NAMESPACE`` (a module
name: ``array_api_strict``, ``numpy``, ``torch``, ``cupy``, ...).  A module
that is an Array API namespace by itself (it has ``__array_namespace_info__``:
array-api-strict, NumPy >= 2, CuPy >= 14) is used as it is; any other goes
through ``array_api_compat.<name>`` (PyTorch, older NumPy and CuPy).  Unset,
it is ``array_api_strict`` when installed, else ``numpy``.

Everything the backend claims is read from the namespace: its devices from
``__array_namespace_info__().devices()`` and each device's dtypes from
``.dtypes(device=...)``.  Devices lacking float32, float64 or int64 are left
out.  The namespace must implement the 2023.12 standard or later (it added
the inspection API, ``maximum``/``minimum``, ``nextafter`` and
``cumulative_sum``, all of which the kernels use).

One extension beyond the standard: a namespace that names a ``float16``
dtype (NumPy, CuPy, PyTorch) stores float16, and the kernels compute it in
float32 with one rounding on output.  bfloat16 is never
claimed: the standard has neither the dtype nor a bit-cast to move its bits.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from ampcore import dtypes as dt

__all__ = ["ENV", "Namespace", "NamespaceError", "load"]

ENV = "AMPCORE_ARRAYAPI_NAMESPACE"
DEFAULTS = ("array_api_strict", "numpy")
MIN_VERSION = "2023.12"
# ampcore dtypes by their Array API name ("bool" is the same in both); float16 is the extension above.
STANDARD = (dt.float64, dt.float32, dt.int64, dt.int32, dt.bool_)
# ampcore needs float32 (master weights) and int64 (indices) on a device; the kernels need float64 for erf
# and for the loss-scale products (torch rounds scale * factor once from double): a device without it is not used.
REQUIRED = ("float32", "float64", "int64")


class NamespaceError(ImportError):
    """The chosen namespace cannot be imported or is not an Array API namespace."""


@dataclass(frozen=True)
class Namespace:
    """An Array API namespace with the devices ampcore can use, the default device first."""

    xp: Any
    module: str
    devices: tuple[Any, ...]

    @property
    def float16(self) -> Any | None:
        """The namespace's float16 dtype, or None (array-api-strict has none: it keeps to the standard)."""
        return getattr(self.xp, "float16", None)

    def dtype(self, d: dt.DType) -> Any:
        """The namespace's dtype object for ``d`` (the standard names them as ampcore does)."""
        return getattr(self.xp, d.name)

    def dtypes(self, index: int) -> dict[dt.DType, Any]:
        """ampcore dtype -> the namespace's dtype object, for the dtypes device ``index`` has."""
        offered = _offered(self.xp, self.devices[index])
        found = {d: offered[d.name] for d in STANDARD if d.name in offered}
        if self.float16 is not None:
            found[dt.float16] = self.float16
        return found

    def version(self) -> str:
        """The library's version (for ``torch`` through array-api-compat: torch's)."""
        base = importlib.import_module(self.module.split(".")[0])
        return str(getattr(base, "__version__", getattr(self.xp, "__version__", "unknown")))


def _as_namespace(name: str) -> Any:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise NamespaceError(
            f"Array API namespace {name!r}: cannot import it ({exc}); "
            f"pip install {name.replace('_', '-')}, or pick another with ${ENV}"
        ) from exc
    if hasattr(module, "__array_namespace_info__"):
        return module
    try:
        return importlib.import_module(f"array_api_compat.{name}")
    except ImportError as exc:
        raise NamespaceError(
            f"Array API namespace {name!r}: {name} is not an Array API namespace by itself "
            f"and array_api_compat.{name} is unavailable ({exc}); pip install array-api-compat"
        ) from exc


def _offered(xp: Any, device: Any) -> dict[str, Any]:
    """Dtype name -> dtype object on ``device``."""
    return dict(xp.__array_namespace_info__().dtypes(device=device))


def _usable(xp: Any) -> tuple[Any, ...]:
    """The namespace's devices that have every REQUIRED dtype, its default device first."""
    info = xp.__array_namespace_info__()
    default = info.default_device()
    devices = [default] + [d for d in info.devices() if d != default]
    return tuple(d for d in devices if all(name in _offered(xp, d) for name in REQUIRED))


def _check_version(name: str, xp: Any) -> None:
    version = str(getattr(xp, "__array_api_version__", "unknown"))
    if not MIN_VERSION <= version <= "9999":
        raise NamespaceError(
            f"Array API namespace {name!r} implements the standard's version {version!r}; this "
            f"backend needs {MIN_VERSION} or later (maximum, minimum, nextafter, cumulative_sum and "
            f"the inspection API); upgrade it, pick another with ${ENV}, or for array-api-strict "
            "unset ARRAY_API_STRICT_API_VERSION"
        )


def _default_name() -> str:
    for name in DEFAULTS:
        try:
            _as_namespace(name)
        except NamespaceError:
            continue
        return name
    return DEFAULTS[-1]


def load(name: str | None = None) -> Namespace:
    """The namespace called ``name`` (default: ``$AMPCORE_ARRAYAPI_NAMESPACE``, then DEFAULTS in order).

    Raises NamespaceError naming the module and the fix when it cannot be used.
    """
    name = name or os.environ.get(ENV, "").strip() or _default_name()
    xp = _as_namespace(name)
    _check_version(name, xp)
    devices = _usable(xp)
    if not devices:
        raise NamespaceError(
            f"Array API namespace {name!r}: no device of {name} has both {' and '.join(REQUIRED)}, "
            "which ampcore-arrayapi needs (see REQUIRED)"
        )
    return Namespace(xp, name, devices)
