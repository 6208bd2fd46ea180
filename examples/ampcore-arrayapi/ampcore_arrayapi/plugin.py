"""The ``arrayapi`` backend: ampcore on any Array API namespace.

Registered under the ``ampcore.backends`` entry point ``arrayapi``.  Devices
``arrayapi:0 .. N-1`` are the namespace's devices (its default device first);
what each stores and computes is read from the namespace.  It uses only
ampcore's public API, like any third-party backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import numpy as np

import ampcore
from ampcore import dtypes as dt
from ampcore.kernels import PRIMITIVES
from ampcore.plugins import hookimpl

from .namespace import STANDARD, Namespace, NamespaceError, load

__all__ = ["ArrayAPIBackend", "ampcore_backends"]


def to_host(array: Any) -> np.ndarray:
    """A NumPy view or copy of ``array`` through DLPack: in place on the host, copied from an accelerator."""
    try:
        return np.from_dlpack(array)
    except (BufferError, RuntimeError, TypeError, ValueError):  # on an accelerator: ask the producer for a copy
        return np.from_dlpack(array, device="cpu", copy=True)


def _unavailable(name: str, reason: str) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise ampcore.BackendUnavailableError("arrayapi", reason)

    kernel.__name__ = name
    return kernel


class ArrayAPIBackend(ampcore.Backend):
    """Kernels written once against the Array API standard, run by whichever library ``$AMPCORE_ARRAYAPI_NAMESPACE``
    names."""

    name = "arrayapi"
    priority = 10  # below cpu (100): a generic backend is used when asked for, never by default

    def __init__(self, namespace: str | None = None) -> None:
        self._requested = namespace
        self._ns: Namespace | None = None
        self._error: NamespaceError | None = None
        self._dtypes: list[tuple[Any, dt.DType]] = []

    def namespace(self) -> Namespace:
        """The namespace in use, loaded on first call; NamespaceError if it cannot be used."""
        if self._ns is not None:
            return self._ns
        if self._error is None:  # a failure is remembered: probing again would only repeat it
            try:
                self._ns = load(self._requested)
                return self._ns
            except NamespaceError as exc:
                self._error = exc
        raise self._error

    # --- discovery -----------------------------------------------------
    def availability(self) -> ampcore.Availability:
        try:
            self.namespace()
        except NamespaceError as exc:
            return ampcore.Availability(False, str(exc))
        return ampcore.Availability(True)

    def device_count(self) -> int:
        return len(self.namespace().devices)

    def capabilities(self, index: int = 0) -> ampcore.Capabilities:
        ns = self.namespace()
        stored = frozenset(ns.dtypes(index))
        emulated = frozenset({dt.float16} & stored)
        return ampcore.Capabilities(
            device_name=f"{ns.module} {ns.version()} on {ns.devices[index]}",
            storable=stored,
            native=stored - emulated,
            emulated=emulated,
            autocast_dtype=dt.float16 if emulated else None,
            policy="cuda",  # the float16 table: range-sensitive ops stay in float32
            extra={
                "namespace": ns.module,
                "api_version": getattr(ns.xp, "__array_api_version__", "unknown"),
                "bfloat16": "not stored: not in the Array API standard",
            },
        )

    def kernel_functions(self) -> Mapping[str, Callable[..., Any]]:
        from .kernels import primitive_table

        try:
            ns = self.namespace()
        except NamespaceError as exc:  # registered anyway, so `ampcore info` can say why it is unavailable
            return {name: _unavailable(name, str(exc)) for name in PRIMITIVES}
        return primitive_table(ns, self.from_numpy, to_host)

    # --- array I/O -----------------------------------------------------
    def from_numpy(self, array: np.ndarray, dtype: dt.DType, device_index: int = 0) -> Any:
        ns = self.namespace()
        host = dt.convert(np.asarray(array), dtype)  # rounded once on the host, then copied over
        return ns.xp.asarray(host, dtype=ns.dtype(dtype), device=ns.devices[device_index], copy=True)

    def to_numpy(self, array: Any) -> np.ndarray:
        return np.array(to_host(array), copy=True)

    def dtype_of(self, array: Any) -> dt.DType:
        if not self._dtypes:  # on every op's path: the pairs are built once
            ns = self.namespace()
            self._dtypes.extend((ns.dtype(d), d) for d in (*STANDARD, dt.float16) if d in ns.dtypes(0))
        for theirs, ours in self._dtypes:
            if array.dtype == theirs:
                return ours
        raise TypeError(
            f"arrayapi arrays of dtype {array.dtype!r} have no ampcore dtype; "
            f"ampcore uses {', '.join(d.name for _, d in self._dtypes)}"
        )

    def nbytes(self, array: Any) -> int:
        own = getattr(array, "nbytes", None)  # NumPy, CuPy, PyTorch count their own bytes
        if isinstance(own, int):
            return own
        xp, n = self.namespace().xp, int(np.prod(array.shape))
        if array.dtype == xp.bool:
            return n
        info = xp.finfo if xp.isdtype(array.dtype, "real floating") else xp.iinfo
        return n * info(array.dtype).bits // 8

    # --- conformance ---------------------------------------------------
    def conformance_known_gaps(self) -> str | None:
        """The shipped gaps file for the namespace in use (``known_gaps/<module>.toml``), if there is one."""
        path = resources.files("ampcore_arrayapi") / "known_gaps" / f"{self.namespace().module}.toml"
        return str(path) if path.is_file() else None


@hookimpl
def ampcore_backends() -> ampcore.Backend:
    return ArrayAPIBackend()
