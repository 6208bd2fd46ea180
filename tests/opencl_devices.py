"""Every OpenCL device, for the opencl test modules: their tests run once on each device found.

A module opts in with ``pytestmark = pytest.mark.usefixtures("opencl_device")``
(or a test takes the ``opencl_device`` fixture, defined in conftest.py): each of
its tests then runs once per device, with an ID naming it (``[opencl:1]``), and
skips with the device's own reason where that device cannot build and run
kernels.  The fixture is module-scoped, so a module runs through on one device,
then on the next.  :func:`put`, :func:`get`, :func:`state` and :func:`device`
act on the device the running test is on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from ampcore_opencl.plugin import OpenCLBackend

BACKEND = OpenCLBackend()
_current: list[int] = []


def params() -> list[Any]:
    """One ``pytest.param(i, id="opencl:i")`` per OpenCL device, an unusable one marked skip with its reason;
    a single skipped param with the backend's reason where there is no device at all."""
    status = BACKEND.availability()
    try:
        count = BACKEND.device_count()
    except Exception:  # noqa: BLE001 - no pyopencl or no platform: the availability reason says which, and the fix
        count = 0
    if count == 0:
        return [pytest.param(None, id="opencl", marks=pytest.mark.skip(reason=f"no OpenCL device: {status.reason}"))]
    found = []
    for i in range(count):
        usable = BACKEND.device_status(i)
        marks = () if usable.ok else pytest.mark.skip(reason=f"opencl:{i} is unusable here: {usable.reason}")
        found.append(pytest.param(i, id=f"opencl:{i}", marks=marks))
    return found


@contextlib.contextmanager
def using(index: int) -> Iterator[int]:
    """Make ``opencl:index`` the device of :func:`put`, :func:`state` and :func:`device` inside the block."""
    _current.append(index)
    try:
        yield index
    finally:
        _current.pop()


def index() -> int:
    """The index of the device the running test is on; RuntimeError outside a test using ``opencl_device``."""
    if not _current:
        raise RuntimeError("no OpenCL device selected: the test must use the 'opencl_device' fixture")
    return _current[-1]


def device() -> str:
    """``'opencl:N'`` for the device the running test is on."""
    return f"opencl:{index()}"


def state() -> Any:
    """The DeviceState of the device the running test is on."""
    return BACKEND._state(index())


def put(values: Any, dtype: Any) -> Any:
    """``values`` as a CLArray of ``dtype`` on the device the running test is on."""
    return BACKEND.from_numpy(np.asarray(values), dtype, index())


def get(array: Any) -> np.ndarray:
    """A device array back on the host."""
    return BACKEND.to_numpy(array)
