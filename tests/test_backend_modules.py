"""ampcore.cpu / ampcore.cuda / ampcore.opencl and every registered backend's device module (torch.cuda's API)."""

from __future__ import annotations

import importlib
import types

import pytest

import ampcore
from ampcore.backend_modules import BackendModule
from ampcore.testing import FakeBackend


def test_cpu_module_answers_torch_cuda_questions():
    cpu = ampcore.cpu
    assert isinstance(cpu, types.ModuleType) and cpu is ampcore.cpu and cpu.__name__ == "ampcore.cpu"
    assert cpu.is_available() and cpu.device_count() == 1 and cpu.current_device() == 0
    assert cpu.is_bf16_supported()  # emulated exactly with ml_dtypes
    assert cpu.is_bf16_supported(including_emulation=False) is False
    assert cpu.get_device_name() == ampcore.get_backend("cpu").capabilities(0).device_name
    cpu.synchronize()
    cpu.synchronize("cpu:0")
    assert cpu.memory_allocated() == 0  # the cpu backend does not track it
    assert importlib.import_module("ampcore.cpu") is cpu


def test_manual_seed_seeds_the_generator_every_device_draws_from():
    ampcore.cpu.manual_seed(7)
    a = ampcore.randn(4).numpy()
    ampcore.manual_seed(7)
    assert (ampcore.randn(4).numpy() == a).all()
    ampcore.cuda.manual_seed_all(7)  # fine without a GPU, as in torch
    assert (ampcore.randn(4).numpy() == a).all()


def test_a_third_party_backend_gets_its_own_module(register_fake):
    class Tracking(FakeBackend):
        def memory_allocated(self, device_index=0):
            return 100 + device_index

    fake = register_fake(cls=Tracking, devices=2)
    mod = getattr(ampcore, fake.name)
    assert isinstance(mod, BackendModule) and mod.is_available() and mod.device_count() == 2
    assert mod.memory_allocated(1) == 101 and mod.memory_allocated(f"{fake.name}:0") == 100
    mod.synchronize(ampcore.device(f"{fake.name}:1"))
    with pytest.raises(ValueError, match=r"invalid device index 2 .* it has 2 device\(s\)"):
        mod.synchronize(2)
    with pytest.raises(ValueError, match="of another backend"):
        mod.get_device_name("cpu:0")


def test_an_installed_but_unavailable_backend_answers_without_raising(register_fake):
    fake = register_fake(unusable={0: "the driver is missing"})
    mod = getattr(ampcore, fake.name)
    assert mod.is_available() is False and mod.device_count() == 0 and mod.is_bf16_supported() is False
    with pytest.raises(ampcore.BackendUnavailableError, match="the driver is missing"):
        mod.synchronize()


def test_builtin_names_resolve_even_when_not_installed_and_unknown_names_list_the_known(monkeypatch):
    from ampcore.plugins.registry import registry

    if "cuda" in registry.records:
        monkeypatch.delitem(registry.records, "cuda")
    assert ampcore.cuda.is_available() is False and ampcore.cuda.device_count() == 0
    with pytest.raises(RuntimeError, match="backend 'cuda' is not installed: pip install ampcore-cuda"):
        ampcore.cuda.synchronize()
    with pytest.raises(AttributeError, match=r"no attribute 'cudaa'; the backends' modules are .*'cpu', 'cuda'"):
        ampcore.cudaa  # noqa: B018 - the attribute access is the test
    with pytest.raises(AttributeError):
        ampcore.__wrapped__  # noqa: B018 - dunder probes are plain AttributeErrors


def test_device_modules_do_not_shadow_real_submodules():
    from pathlib import Path

    package = Path(ampcore.__file__).parent
    for name in ("cpu", "cuda", "opencl"):
        assert not (package / name).exists() and not (package / f"{name}.py").exists()


# --------------------------------------------------------------------------- torch.cuda's other names
def test_cuda_amp_paths_bind_the_device_type_and_warn_as_torch(register_fake):
    import warnings

    from ampcore.cuda.amp import GradScaler as CudaScaler  # importable from the start, as torch's path

    assert CudaScaler is ampcore.cuda.amp.GradScaler
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scaler = ampcore.cpu.amp.GradScaler(init_scale=8.0)
        with ampcore.cpu.amp.autocast(dtype=ampcore.bfloat16):
            inside = ampcore.is_autocast_enabled("cpu")
    assert isinstance(scaler, ampcore.GradScaler) and scaler.get_scale() == 8.0 and inside
    assert [type(w.message) for w in caught] == [FutureWarning, FutureWarning]
    assert "Please use `ampcore.amp.GradScaler('cpu', args...)` instead" in str(caught[0].message)


def test_set_device_makes_the_bare_name_mean_that_device(register_fake):
    fake = register_fake(devices=3)
    module = getattr(ampcore, fake.name)
    module.set_device(2)
    assert module.current_device() == 2 and ampcore.zeros(1, device=fake.name).device.index == 2
    with pytest.raises(ValueError, match=r"invalid device index 3 .* it has 3 device\(s\)"):
        module.set_device(3)


def test_memory_functions_and_out_of_memory_error_answer_as_torchs(register_fake):
    class Tracking(FakeBackend):
        peak = 4096
        emptied = 0

        def max_memory_allocated(self, device_index=0):
            return self.peak

        def reset_peak_memory_stats(self, device_index=0):
            self.peak = 0

        def empty_cache(self, device_index=0):
            self.emptied += 1

    fake = register_fake(cls=Tracking)
    module = getattr(ampcore, fake.name)
    assert module.max_memory_allocated() == 4096
    module.reset_peak_memory_stats()
    module.empty_cache()
    assert module.max_memory_allocated() == 0 and fake.emptied == 1
    assert ampcore.cpu.max_memory_allocated() == 0  # the cpu backend cannot tell: 0, as memory_allocated
    assert ampcore.cuda.OutOfMemoryError is MemoryError


def test_a_name_that_is_neither_a_backend_nor_in_ampcore_points_to_the_porting_guide():
    with pytest.raises(AttributeError, match=r"ampcore does not have torch\.kron yet; docs/porting-from-torch\.md"):
        ampcore.kron  # noqa: B018 - the attribute access is the test
    with pytest.raises(AttributeError) as err:
        ampcore.kron  # noqa: B018
    assert "backends' modules" not in str(err.value)
    with pytest.raises(AttributeError, match=r"no attribute 'mps'; the backends' modules are"):
        ampcore.mps  # noqa: B018 - torch's device module: a backend that is not installed
    with pytest.raises(AttributeError, match=r"'tensr' \(did you mean '[Tt]ensor'"):
        ampcore.tensr  # noqa: B018
