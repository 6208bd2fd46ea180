"""Shared fixtures: fake backends registered for one test, a fresh Python to run code in, and the OpenCL device
a test module runs on (each in turn).  Also which modules this run leaves to another: see ``collect_ignore``."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ampcore
from ampcore.kernels import set_debug_kernels
from ampcore.plugins import registry
from ampcore.testing import FakeBackend

# The tests run with every kernel's output checked against its contract (as AMPCORE_DEBUG_KERNELS=1 does);
# a training run pays only the cheap per-op check.
set_debug_kernels(True)

_ids = itertools.count()


def _cuda_device_tests_run_on_the_simulator() -> bool:
    """Without a usable CUDA device, tests/test_cuda_device.py runs on the CUDA simulator instead, in a fresh
    interpreter, from tests/test_cuda_simulator.py (where g++ is there to build the kernels), so this run does not
    collect it only to skip it.  With a GPU, or with AMPCORE_CUDA_SIMULATOR set, it is collected as usual."""
    try:
        from ampcore_cuda.plugin import CUDABackend
    except ImportError:
        return False
    return shutil.which("g++") is not None and not CUDABackend().availability().ok


collect_ignore = ["test_cuda_device.py"] if _cuda_device_tests_run_on_the_simulator() else []


@pytest.fixture
def register_fake() -> Any:
    """``register_fake(**FakeBackend_kwargs)`` -> a registered FakeBackend with a fresh name, removed after the test.

    Names are unique per call because capabilities are cached by backend name.
    Pass ``cls=`` for a FakeBackend subclass.
    """
    names: list[str] = []
    saved_default = registry._default

    def register(cls: type = FakeBackend, **kwargs: Any) -> FakeBackend:
        kwargs.setdefault("name", f"fake{next(_ids)}")
        backend = ampcore.register_backend(cls(**kwargs))
        names.append(backend.name)
        return backend

    yield register
    for name in names:
        registry.unregister_backend(name)
    registry._default = saved_default


@pytest.fixture
def run_python() -> Callable[..., subprocess.CompletedProcess]:
    """Run ``code`` in a new interpreter (fresh plugin registry); ``path`` goes first on sys.path."""

    def run(
        code: str, *, path: Path | None = None, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("AMPCORE_")}
        if path is not None:
            full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), full_env.get("PYTHONPATH")]))
        full_env.update(env or {})
        command = [sys.executable, *(args or ("-c", code))]
        return subprocess.run(command, capture_output=True, text=True, env=full_env, timeout=120)

    return run


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests using ``opencl_device`` run once per OpenCL device, a module through on one device, then the next
    (tests/opencl_devices.py; imported only here, so other tests never touch OpenCL)."""
    if "opencl_device" in metafunc.fixturenames:
        import opencl_devices

        metafunc.parametrize("opencl_device", opencl_devices.params(), indirect=True, scope="module")


@pytest.fixture(scope="module")
def opencl_device(request: pytest.FixtureRequest) -> Iterator[int]:
    """The index of the OpenCL device the test runs on; opencl_devices.put/get/state/device use it."""
    import opencl_devices

    with opencl_devices.using(request.param) as index:
        yield index
