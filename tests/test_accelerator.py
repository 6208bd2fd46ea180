"""ampcore.accelerator: the default device's backend, unless that is the CPU (torch counts no CPU accelerator)."""

from __future__ import annotations

import pytest

import ampcore
from ampcore import accelerator


@pytest.fixture
def default_device():
    yield ampcore.set_default_device
    ampcore.set_default_device(None)


def test_the_cpu_is_no_accelerator(default_device):
    default_device("cpu")
    assert accelerator.current_accelerator() is None and accelerator.is_available() is False
    assert accelerator.device_count() == 0
    with pytest.raises(RuntimeError, match="no accelerator: ampcore's default device is the CPU"):
        accelerator.current_device_index()


def test_a_registered_device_backend_is_the_accelerator(register_fake, default_device):
    fake = register_fake(devices=2)
    default_device(f"{fake.name}:0")
    device = accelerator.current_accelerator()
    assert device is not None and device.type == fake.name and str(device) == fake.name
    assert accelerator.is_available() and accelerator.device_count() == 2
    with accelerator.device_index(1):
        assert accelerator.current_device_index() == 1
        assert ampcore.zeros(2, device=fake.name).device.index == 1  # "<name>" means the current device
    assert accelerator.current_device_index() == 0
    accelerator.synchronize()
    assert accelerator.memory_allocated() == 0 and accelerator.max_memory_allocated() == 0
    # the idiom of pytorch/examples
    assert (accelerator.current_accelerator().type if accelerator.is_available() else "cpu") == fake.name
