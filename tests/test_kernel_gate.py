"""One kernel gate: every road into a backend's kernels turns the backend's failure into KernelError
naming the kernel and the backend (creation, .to(), .item(), gradient accumulation, GradScaler,
overflow detection), never a bare RuntimeError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ampcore
from ampcore import KernelError
from ampcore.amp import detect_overflow
from ampcore.testing import FakeBackend


class FailingBackend(FakeBackend):
    """A fake backend whose kernels named in ``failing`` (every kernel for ``"all"``; ``"io"`` for
    from_numpy/to_numpy) raise RuntimeError, as a device that was lost would."""

    failing: set[str] | str = set()

    def _fails(self, name: str) -> bool:
        return self.failing == "all" or name in self.failing

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        inner = super()._wrap(name, fn)

        def kernel(*args: Any, **kwargs: Any) -> Any:
            if self._fails(name):
                raise RuntimeError(f"device lost in {name}")
            return inner(*args, **kwargs)

        return kernel

    def from_numpy(self, array: np.ndarray, dtype: Any, device_index: int = 0) -> np.ndarray:
        if self._fails("io"):
            raise RuntimeError("device lost in from_numpy")
        return super().from_numpy(array, dtype, device_index)

    def to_numpy(self, array: np.ndarray) -> np.ndarray:
        if self._fails("io"):
            raise RuntimeError("device lost in to_numpy")
        return super().to_numpy(array)


@pytest.fixture
def broken(register_fake: Any) -> FailingBackend:
    backend: FailingBackend = register_fake(cls=FailingBackend)
    backend.failing = set()
    return backend


def _fail_all(backend: FailingBackend) -> None:
    backend.failing = "all"


@pytest.mark.parametrize(
    "create, kernel",
    [
        (lambda d: ampcore.zeros(2, 3, device=d), "full"),
        (lambda d: ampcore.ones(2, device=d), "full"),
        (lambda d: ampcore.full((2,), 1.5, device=d), "full"),
        (lambda d: ampcore.rand(2, device=d), "uniform"),
        (lambda d: ampcore.randn(2, device=d), "normal"),
        (lambda d: ampcore.arange(4, device=d), "arange"),
        (lambda d: ampcore.tensor([1.0, 2.0], device=d), "from_numpy"),
    ],
)
def test_creation_on_a_failing_backend_raises_kernel_error(broken: FailingBackend, create: Any, kernel: str) -> None:
    _fail_all(broken)
    with pytest.raises(KernelError, match=rf"kernel '{kernel}'.*{broken.name}") as info:
        create(broken.name)
    assert info.value.kernel == kernel and info.value.backend == broken.name


def test_to_another_device_raises_kernel_error(broken: FailingBackend) -> None:
    x = ampcore.ones(3, device="cpu")
    _fail_all(broken)
    with pytest.raises(KernelError, match="kernel 'from_numpy'"):
        x.to(broken.name)


def test_to_another_dtype_raises_kernel_error(broken: FailingBackend) -> None:
    x = ampcore.ones(3, device=broken.name)
    _fail_all(broken)
    with pytest.raises(KernelError, match="op 'cast'"):
        x.to(ampcore.float64)


def test_item_and_numpy_raise_kernel_error(broken: FailingBackend) -> None:
    x = ampcore.ones(1, device=broken.name)
    _fail_all(broken)
    with pytest.raises(KernelError, match="kernel 'to_numpy'"):
        x.item()
    with pytest.raises(KernelError, match="kernel 'to_numpy'"):
        x.numpy()


def test_gradient_accumulation_raises_kernel_error(broken: FailingBackend) -> None:
    x = ampcore.ones(3, device=broken.name, requires_grad=True)
    g = ampcore.ones(3, device=broken.name)
    _fail_all(broken)
    with pytest.raises(KernelError, match="gradient accumulation.*kernel 'cast'"):
        x.backward(g)


def test_backward_step_raises_kernel_error(broken: FailingBackend) -> None:
    x = ampcore.ones(3, device=broken.name, requires_grad=True)
    y = (x * x).sum()
    _fail_all(broken)
    with pytest.raises(KernelError):
        y.backward()


def test_grad_scaler_raises_kernel_error(broken: FailingBackend) -> None:
    w = ampcore.nn.Parameter(ampcore.ones(3, device=broken.name))
    opt = ampcore.optim.SGD([w], lr=0.1)
    scaler = ampcore.GradScaler(broken.name, init_scale=2.0)
    scaler.scale((w * 1.0).sum()).backward()
    _fail_all(broken)
    with pytest.raises(KernelError, match="GradScaler"):
        scaler.unscale_(opt)


def test_grad_scaler_update_raises_kernel_error(broken: FailingBackend) -> None:
    w = ampcore.nn.Parameter(ampcore.ones(3, device=broken.name))
    opt = ampcore.optim.SGD([w], lr=0.1)
    scaler = ampcore.GradScaler(broken.name, init_scale=2.0)
    scaler.scale((w * 1.0).sum()).backward()
    scaler.step(opt)
    broken.failing = {"update_scale"}
    with pytest.raises(KernelError, match="GradScaler.update.*kernel 'update_scale'"):
        scaler.update()


def test_overflow_detection_raises_kernel_error(broken: FailingBackend) -> None:
    a = ampcore.ones(3, device=broken.name)
    broken.failing = {"sub"}  # the op runs; the finiteness check (x - x) fails
    with pytest.raises(KernelError, match="detect_overflow.*kernel 'sub'"):
        with detect_overflow():
            a * 2.0


def test_op_on_a_failing_backend_raises_kernel_error(broken: FailingBackend) -> None:
    a = ampcore.ones(3, device=broken.name)
    _fail_all(broken)
    with pytest.raises(KernelError, match="op 'add' failed.*kernel 'add'"):
        a + a
