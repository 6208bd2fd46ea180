"""Device arrays of the simulated CuPy: NumPy arrays that know their device and, like CuPy's, refuse to mix
with host (NumPy) arrays in arithmetic.  ``.data.ptr`` is the address kernels and cuBLAS receive.

CuPy's own kernels (ufuncs, reductions, ``astype``) are compiled with ``-ftz=true`` and flush float32
subnormals to zero, inputs and results; so do the simulated ones (:func:`flush_float32`), so a float32
computation that leaves the backend's own kernels for CuPy's shows here what a GPU would do to it."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import capture
from .devices import MemoryPool, current_device

__all__ = ["ndarray", "MemoryPointer", "POOL", "to_device", "check_no_host_arrays", "flush_float32", "FTZ_EXEMPT"]

POOL = MemoryPool()
_TINY32 = np.float32(np.finfo(np.float32).tiny)
# CuPy functions that do not run a flushing CuPy kernel: matmul is cuBLAS, which keeps subnormals.
FTZ_EXEMPT = frozenset({"matmul"})


def flush_float32(value: Any, copy: bool = True) -> Any:
    """``value`` with every float32 subnormal replaced by a zero of its sign, as CuPy's kernels (built with
    ``-ftz=true``) read and write them; other dtypes and values unchanged.  ``copy=False`` flushes in place."""
    if isinstance(value, np.float32):
        return np.float32(np.copysign(0, value)) if 0 < abs(value) < _TINY32 else value
    if not isinstance(value, np.ndarray) or value.dtype != np.float32:
        return value
    plain = value.view(np.ndarray)
    sub = (np.abs(plain) < _TINY32) & (plain != 0)
    if not sub.any():
        return value
    if copy:
        value = value.copy()
        plain = value.view(np.ndarray)
    plain[sub] = np.copysign(np.float32(0), plain[sub])
    return value


@dataclass(frozen=True)
class MemoryPointer:
    """``ndarray.data``: the address of the first element and the device it lives on."""

    ptr: int
    device_id: int


class _DeviceRef:
    __slots__ = ("id",)

    def __init__(self, index: int):
        self.id = index


def _count(owner: np.ndarray) -> None:
    """Charge ``owner``'s buffer to the current pool until it is garbage collected (checked inside a capture)."""
    capture.on_allocate(owner)
    capture.track(owner)
    pool = capture.current_pool() or POOL
    pool.allocated(owner.nbytes)
    weakref.finalize(owner, pool.freed, owner.nbytes)


def _host_read(what: str) -> None:
    capture.refuse(f"a host read of device data ({what})")


class ndarray(np.ndarray):  # noqa: N801 - CuPy's name
    """A device array: NumPy memory, CuPy's surface (``data.ptr``, ``device``, ``get()``)."""

    def __array_finalize__(self, obj: Any) -> None:
        self._device_id = getattr(obj, "_device_id", current_device())
        if self.base is None and self.nbytes:
            _count(self)

    @property
    def data(self) -> MemoryPointer:  # type: ignore[override]
        return MemoryPointer(self.__array_interface__["data"][0], self._device_id)

    @property
    def device(self) -> _DeviceRef:  # type: ignore[override]
        return _DeviceRef(self._device_id)

    def get(self, stream: Any = None) -> np.ndarray:
        """A host copy (a plain NumPy array); refused inside a capture."""
        _host_read("ndarray.get()")
        return np.array(self.view(np.ndarray), copy=True)

    def item(self, *args: Any) -> Any:
        _host_read("ndarray.item()")
        return np.ndarray.item(self, *args)

    def tolist(self) -> Any:
        _host_read("ndarray.tolist()")
        return np.ndarray.tolist(self)

    def __float__(self) -> float:
        _host_read("float(ndarray)")
        return float(self.view(np.ndarray))

    def __int__(self) -> int:
        _host_read("int(ndarray)")
        return int(self.view(np.ndarray))

    def __bool__(self) -> bool:
        _host_read("bool(ndarray)")
        return bool(self.view(np.ndarray))

    # Methods that may copy (CuPy runs a copy kernel) or write: recorded inside a capture.
    def reshape(self, *shape: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return capture.run(lambda: np.ndarray.reshape(self, *shape, **kwargs), (), {}, reads=(self,))

    def ravel(self, order: Any = "C") -> Any:  # type: ignore[override]
        return capture.run(lambda: np.ndarray.ravel(self, order), (), {}, reads=(self,))

    def flatten(self, order: Any = "C") -> Any:  # type: ignore[override]
        return capture.run(lambda: np.ndarray.flatten(self, order), (), {}, reads=(self,))

    def fill(self, value: Any) -> None:
        capture.run(np.ndarray.fill, (self, value), {}, writes=True)

    def copy(self, order: Any = "C") -> Any:  # type: ignore[override]
        return capture.run(lambda: to_device(np.array(self.view(np.ndarray), order=order, copy=True)), (), {})

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return capture.run(self._ufunc, (ufunc, method, *inputs), kwargs, writes="out" in kwargs)

    def _ufunc(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        check_no_host_arrays(inputs, ufunc.__name__)
        flush = ufunc.__name__ not in FTZ_EXEMPT
        args = [
            flush_float32(x.view(np.ndarray))
            if flush and isinstance(x, ndarray)
            else x.view(np.ndarray)
            if isinstance(x, ndarray)
            else x
            for x in inputs
        ]
        if "out" in kwargs:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, ndarray) else o for o in kwargs["out"])
        with np.errstate(all="ignore"):  # a GPU raises no floating-point warnings
            result = getattr(ufunc, method)(*args, **kwargs)
        if flush:
            for out in result if isinstance(result, tuple) else (result,):
                flush_float32(out, copy=False) if isinstance(out, np.ndarray) else None
            if isinstance(result, np.float32):
                result = flush_float32(result)
        return to_device(result)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """NumPy's astype; a conversion (not a same-dtype copy) flushes float32 subnormals as CuPy's does."""
        return capture.run(self._astype, (dtype, *args), kwargs)

    def _astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        if np.dtype(dtype) == self.dtype:
            return np.ndarray.astype(self, dtype, *args, **kwargs)
        source = flush_float32(self.view(np.ndarray))
        with np.errstate(all="ignore"):
            result = to_device(np.ndarray.astype(source, dtype, *args, **kwargs))
        return flush_float32(result, copy=False)

    def __getitem__(self, key: Any) -> Any:
        return capture.run(self._getitem, (key,), {})

    def _getitem(self, key: Any) -> Any:
        result = np.ndarray.__getitem__(self, key)
        if isinstance(result, np.generic):  # CuPy gives a 0-d view where NumPy gives a scalar
            result = np.ndarray.__getitem__(self, (*(key if isinstance(key, tuple) else (key,)), Ellipsis))
        return result

    def __setitem__(self, key: Any, value: Any) -> None:
        capture.run(self._setitem, (key, value), {}, writes=True)

    def _setitem(self, key: Any, value: Any) -> None:
        plain = value.view(np.ndarray) if isinstance(value, ndarray) else value
        np.ndarray.__setitem__(self.view(np.ndarray), key, plain)


def check_no_host_arrays(values: Any, what: str) -> None:
    """TypeError (CuPy's) when a NumPy array meets device arrays in a device function."""
    for v in values:
        if isinstance(v, np.ndarray) and not isinstance(v, ndarray):
            raise TypeError(
                f"Unsupported type {type(v)} in {what}: a host (NumPy) array in a device function; "
                "copy it with cupy.asarray first"
            )
        if isinstance(v, (list, tuple)):
            check_no_host_arrays(v, what)


def to_device(value: Any) -> Any:
    """NumPy results as device arrays on the current device (tuples element by element); scalars unchanged."""
    if isinstance(value, tuple):
        return tuple(to_device(v) for v in value)
    if isinstance(value, ndarray):
        return value
    if isinstance(value, np.generic):  # CuPy's ufuncs and reductions return 0-d arrays, never scalars
        value = np.asarray(value)
    if isinstance(value, np.ndarray):
        if value.base is None and value.nbytes:
            _count(value)
        out = value.view(ndarray)
        out._device_id = current_device()
        return out
    return value
