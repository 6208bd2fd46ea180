"""The opencl backend as a whole: device order, usable and unusable devices, the float16 tier probe,
capabilities, selection, short build errors, and a training step that compiles nothing new and reads the
device once (the skip decision).

The kernels themselves are pinned by the conformance suite (run on every installed backend) and by
tests/test_opencl_<family>.py.  Tests taking ``opencl_device`` run on every OpenCL device and skip, with its
reason, on one that cannot build kernels; but a host where the backend is installed and no device is usable
fails (test_the_opencl_backend_has_a_usable_device_here), so CI cannot pass by skipping everything.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("pyopencl", reason="pyopencl is not installed (pip install 'ampcore-opencl[intel]')")

from opencl_devices import device, state
from training_steps import mlp_step

import ampcore
from ampcore_opencl import devices, probe
from ampcore_opencl.plugin import OpenCLBackend

_status = OpenCLBackend().availability()
needs_device = pytest.mark.skipif(not _status.ok, reason=f"no OpenCL device: {_status.reason}")
INTEL, POCL = "Intel(R) OpenCL", "Portable Computing Language"
# PoCL then refuses every build, as pip's PoCL does on a CPU its LLVM does not know (AMD Zen 5).
BROKEN_POCL = {"POCL_EXTRA_BUILD_FLAGS": "-mcpu=generic-bogus"}


# --------------------------------------------------------------------------- device order (no device needed)
class _FakeDevice(SimpleNamespace):
    pass


def _fake_cl(platforms: list[tuple[str, list[tuple[str, int]]]]) -> SimpleNamespace:
    class Error(Exception):
        pass

    def platform(name: str, devs: list[tuple[str, int]]) -> SimpleNamespace:
        made = [_FakeDevice(name=d, type=t) for d, t in devs]
        return SimpleNamespace(name=name, get_devices=lambda: made)

    def empty_platform() -> SimpleNamespace:
        def raise_not_found() -> list:
            raise Error("DEVICE_NOT_FOUND")

        return SimpleNamespace(name="Empty", get_devices=raise_not_found)

    made = [platform(n, d) for n, d in platforms] + [empty_platform()]
    return SimpleNamespace(get_platforms=lambda: made, Error=Error, device_type=SimpleNamespace(CPU=2, GPU=4))


def test_devices_are_ordered_gpus_first_then_by_platform_name_whatever_the_loader_order(monkeypatch):
    orders = []
    for listing in (
        [("Zeta", [("z-cpu", 2), ("z-gpu", 4)]), ("Alpha", [("a-gpu0", 4), ("a-gpu1", 4)]), ("Mid", [("m-cpu", 2)])],
        [("Mid", [("m-cpu", 2)]), ("Alpha", [("a-gpu0", 4), ("a-gpu1", 4)]), ("Zeta", [("z-cpu", 2), ("z-gpu", 4)])],
    ):
        fake = _fake_cl(listing)
        monkeypatch.setattr(devices, "cl", lambda fake=fake: fake)
        monkeypatch.setattr(devices, "_devices", None)
        orders.append([d.name for d in devices.device_list()])
    assert orders[0] == orders[1] == ["a-gpu0", "a-gpu1", "z-gpu", "m-cpu", "z-cpu"]


def test_no_platform_is_unavailable_with_the_fix(monkeypatch):
    def no_platforms() -> list:
        raise RuntimeError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(devices, "cl", lambda: SimpleNamespace(get_platforms=no_platforms))
    monkeypatch.setattr(devices, "_devices", None)
    status = OpenCLBackend().availability()
    assert not status.ok
    assert "PLATFORM_NOT_FOUND_KHR" in status.reason
    assert "ampcore-opencl[intel]" in status.reason and "ampcore-opencl[pocl]" in status.reason


# --------------------------------------------------------------------------- usable and unusable devices
def test_the_opencl_backend_has_a_usable_device_here():
    """Not per device: where the backend is installed but no device can build kernels, every per-device test
    skips with its reason, and this one fails the test command with the backend's reason."""
    backend = OpenCLBackend()
    status = backend.availability()
    if not status.ok:
        pytest.fail(f"the opencl backend is installed but unavailable: {status.reason}", pytrace=False)
    statuses = [backend.device_status(i) for i in range(backend.device_count())]
    if not any(statuses):
        pytest.fail(f"no OpenCL device is usable: {[s.reason for s in statuses]}", pytrace=False)


_HIDE_INTEL = """
import sys

import pytest

from ampcore_opencl import runtimes

runtimes._register_intel = lambda: None  # as if intel-opencl-rt were not installed
sys.exit(pytest.main(sys.argv[1:]))
"""


def _platforms() -> set[str]:
    return {d.platform.name.strip() for d in devices.device_list()}


def _pocl_index() -> int:
    """The index of PoCL's device (skips where PoCL is not installed)."""
    for index, found in enumerate(devices.device_list()):
        if found.platform.name.strip() == POCL:
            return index
    pytest.skip("PoCL is not installed: pip install 'ampcore-opencl[pocl]'")


@needs_device
def test_the_test_command_fails_where_no_device_is_usable(run_python, tmp_path):
    """PoCL made to fail its builds and Intel's runtime hidden: the guard above fails, the rest skip."""
    _pocl_index()
    others = _platforms() - {INTEL, POCL}
    if others:
        pytest.skip(f"this host has other OpenCL platforms ({sorted(others)}): a device would stay usable")
    tests = Path(__file__).resolve().parent
    # This process's OCL_ICD_VENDORS lists Intel's runtime (runtimes.py); PoCL is found in pyopencl's folder.
    env = {**BROKEN_POCL, "OCL_ICD_VENDORS": str(tmp_path)}
    proc = run_python(
        "",
        env=env,
        args=(
            "-c",
            _HIDE_INTEL,
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            f"{tests / 'test_opencl_backend.py'}::test_the_opencl_backend_has_a_usable_device_here",
            f"{tests / 'test_opencl_reductions.py'}::test_full_sum_of_positive_values_keeps_float32_accuracy",
        ),
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"\b1 failed, 1 skipped\b", proc.stdout), proc.stdout[-3000:]
    assert "the opencl backend is installed but unavailable: no OpenCL device can build kernels here" in proc.stdout
    assert "opencl:0 is unusable here:" in proc.stdout  # the skipped test's reason: PoCL is opencl:0 there
    assert "Invalid build option: -mcpu=generic-bogus" in proc.stdout


def test_intel_and_pocl_are_listed_together_when_both_are_installed():
    for distribution, extra in (("intel-opencl-rt", "intel"), ("pocl-binary-distribution", "pocl")):
        try:
            metadata.distribution(distribution)
        except metadata.PackageNotFoundError:
            pytest.skip(f"{distribution} is not installed: pip install 'ampcore-opencl[{extra}]'")
    assert {INTEL, POCL} <= _platforms()


@needs_device
def test_intels_cpu_runtime_has_native_half():
    """What the README promises for the [intel] extra: its device passes the float16 probe."""
    found = [i for i, d in enumerate(devices.device_list()) if d.platform.name.strip() == INTEL]
    if not found:
        pytest.skip("Intel's OpenCL CPU runtime is not installed: pip install 'ampcore-opencl[intel]'")
    half = devices.device_state(found[0]).half
    assert half.native, half.detail


def _opencl_info(run_python, env: dict[str, str]) -> dict:
    proc = run_python("", env=env, args=("-m", "ampcore", "info", "--json"))
    assert proc.returncode == 0, proc.stderr
    return {b["name"]: b for b in json.loads(proc.stdout)["backends"]}["opencl"]


@needs_device
def test_a_device_that_cannot_build_is_listed_unusable_with_the_compiler_message_and_the_fix(run_python):
    pocl = _pocl_index()
    listed = _opencl_info(run_python, BROKEN_POCL)["devices"]
    found = devices.device_list()
    assert [d["index"] for d in listed] == list(range(len(found)))  # every device keeps its index
    broken = listed[pocl]
    assert broken["usable"] is False
    assert broken["reason"].startswith(f"{devices.describe(found[pocl])} cannot build and run a kernel: ")
    assert "Invalid build option: -mcpu=generic-bogus" in broken["reason"]  # PoCL's own message
    assert "use another device, or pip install 'ampcore-opencl[intel]'" in broken["reason"]
    for index, entry in enumerate(listed):
        if index != pocl:  # the others, Intel's included, are as usable as without the breakage
            assert entry["usable"] == devices.device_status(index).ok, entry
        if entry["usable"]:
            assert (entry["device_name"], entry["platform"]) == (
                found[index].name.strip(),
                found[index].platform.name.strip(),
            )


@needs_device
def test_training_on_an_unusable_device_exits_2_with_one_line_naming_it(run_python):
    pocl = _pocl_index()
    proc = run_python(
        "", env=BROKEN_POCL, args=("-m", "ampcore", "train", "--device", f"opencl:{pocl}", "--epochs", "1")
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"device 'opencl:{pocl}' of backend 'opencl' is unusable: " in lines[0]
    assert "cannot build and run a kernel" in lines[0] and "generic-bogus" in lines[0]


_SELECT = """
import json
import ampcore
from ampcore_opencl import devices

pocl = int(__import__("sys").argv[1])
try:
    ampcore.zeros(1, device=f"opencl:{pocl}")
    refused = None
except ampcore.BackendUnavailableError as exc:
    refused = str(exc)
ampcore.set_default_device("opencl")
print(json.dumps({"tensor": ampcore.tensor([1.0], device="opencl").device.index,
                  "default": ampcore.zeros(1).device.index, "refused": refused,
                  "listed": [devices.describe(d) for d in devices.device_list()]}))
"""


@needs_device
def test_plain_opencl_lands_on_a_usable_device_and_indices_do_not_move(run_python):
    pocl = _pocl_index()
    proc = run_python("", env=BROKEN_POCL, args=("-c", _SELECT, str(pocl)))
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["listed"] == [devices.describe(d) for d in devices.device_list()]
    assert seen["tensor"] != pocl and seen["default"] != pocl
    assert devices.device_status(seen["tensor"]).ok
    assert seen["refused"].startswith(f"device 'opencl:{pocl}' of backend 'opencl' is unusable: ")


@needs_device
def test_plain_opencl_skips_an_unusable_first_device(monkeypatch):
    """The first device made unusable (device 0 is not PoCL on every host): 'opencl' and the default go to
    the next usable one, and naming device 0 is refused with its reason."""
    backend = OpenCLBackend()
    usable = [i for i in range(backend.device_count()) if backend.device_status(i).ok]
    if len(usable) < 2:
        pytest.skip(f"needs two usable OpenCL devices, this host has {len(usable)}")
    real = devices.device_status
    monkeypatch.setattr(
        devices,
        "device_status",
        lambda i: ampcore.Availability(False, "broken on purpose") if i == usable[0] else real(i),
    )
    assert ampcore.zeros(1, device="opencl").device.index == usable[1]
    with pytest.raises(ampcore.BackendUnavailableError, match=rf"'opencl:{usable[0]}'.*broken on purpose"):
        ampcore.zeros(1, device=f"opencl:{usable[0]}")


def test_a_build_error_is_short_and_names_a_log_holding_the_source(opencl_device, tmp_path, monkeypatch):
    monkeypatch.setenv("AMPCORE_OPENCL_BUILD_LOG", str(tmp_path))
    with pytest.raises(devices.BuildError) as caught:
        state().build("bad source")
    message = str(caught.value)
    assert len(message.splitlines()) <= 3 and len(message) < 600, message
    assert message.startswith(f"OpenCL build failed on {devices.describe(state().device)}: ")
    assert "error:" in message  # the compiler's first error, not pyopencl's repeated status
    log = Path(re.search(r"compiler log and source: (\S+)\)$", message).group(1))
    assert log.parent == tmp_path and log.is_file()
    assert "   1 bad source" in log.read_text()


# --------------------------------------------------------------------------- the probe and capabilities
def test_half_tier_comes_from_the_probe_and_is_reported(opencl_device):
    state = devices.device_state(opencl_device)
    caps = OpenCLBackend().capabilities(opencl_device)
    assert caps.extra["float16"] == state.half.tier
    assert caps.extra["cl_khr_fp16"] == ("cl_khr_fp16" in state.extensions)
    assert (ampcore.float16 in caps.native) == state.half.native
    assert (ampcore.float16 in caps.emulated) == (not state.half.native)
    assert ampcore.bfloat16 in caps.emulated and ampcore.float16 in caps.storable
    assert caps.autocast_dtype == ampcore.float16


def test_the_probe_checks_results_not_just_the_build(monkeypatch, opencl_device):
    state = devices.device_state(opencl_device)
    if not state.half.native:
        # Still pin the verdict's wording: the device's own answer is recorded.
        assert "probe" in state.half.detail
    monkeypatch.setattr(probe, "_expected", lambda a, b: np.zeros(4 * a.size, dtype=np.float16) + np.float16(7))
    verdict = probe.probe_native_half(state)
    assert not verdict.native
    if state.half.native:
        assert "wrong results" in verdict.detail


def test_storage_tier_can_be_forced(monkeypatch, opencl_device):
    monkeypatch.setenv("AMPCORE_OPENCL_HALF", "storage")
    verdict = probe.probe_native_half(devices.device_state(opencl_device))
    assert not verdict.native and verdict.detail == "AMPCORE_OPENCL_HALF=storage"


def test_native_half_arithmetic_is_used_where_the_probe_passed(opencl_device):
    state = devices.device_state(opencl_device)
    if not state.half.native:
        pytest.skip(f"{device()} ({state.device.name.strip()}) has no native half arithmetic: {state.half.detail}")
    a = ampcore.tensor(np.array([1.5, 2049.0, 6e-5], np.float16), device=device())
    b = ampcore.tensor(np.array([2.0, 1.0, 3.0], np.float16), device=device())
    assert (a * b + a).numpy().tolist() == (
        np.array([1.5, 2049.0, 6e-5], np.float16) * np.float16([2, 1, 3]) + np.float16([1.5, 2049.0, 6e-5])
    ).tolist()


@needs_device
def test_a_cpu_device_does_not_outrank_the_cpu_backend():
    backend = OpenCLBackend()
    first = next(i for i in range(backend.device_count()) if backend.device_status(i).ok)
    if devices.is_cpu(devices.device_list()[first]):  # the first usable device decides
        assert backend.priority < ampcore.get_backend("cpu").priority
    else:
        assert backend.priority > ampcore.get_backend("cpu").priority


@needs_device
def test_info_lists_each_device_with_its_extensions_and_tier():
    out = subprocess.run(
        [sys.executable, "-m", "ampcore", "info", "--json"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    report = {b["name"]: b for b in json.loads(out.stdout)["backends"]}
    opencl = report["opencl"]
    assert opencl["available"] and opencl["distribution"] == "ampcore-opencl"
    assert [d["index"] for d in opencl["devices"]] == list(range(OpenCLBackend().device_count()))
    for index, entry in enumerate(opencl["devices"]):
        assert entry["usable"] == devices.device_status(index).ok, entry
        if entry["usable"]:
            assert entry["extensions"] == sorted(devices.device_state(index).extensions)
            assert entry["float16"] in {"native half", "float16 storage, float32 arithmetic"}
        else:
            assert entry["reason"] == devices.device_status(index).reason
    assert out.stderr == ""  # the failed probe's compiler chatter must not reach the user


# --------------------------------------------------------------------------- storage
@pytest.mark.parametrize("dtype,size", [("float16", 2), ("bfloat16", 2), ("float32", 4), ("bool", 1)])
def test_device_bytes_per_element(dtype, size, opencl_device):
    t = ampcore.zeros(10, 3, dtype=dtype, device=device())
    assert t.nbytes == 30 * size


@needs_device
def test_a_bad_device_index_names_the_devices():
    count = OpenCLBackend().device_count()
    with pytest.raises(ValueError, match=rf"opencl:{count}.*does not exist.*opencl:0"):
        ampcore.zeros(2, device=f"opencl:{count}")


# --------------------------------------------------------------------------- a training step


@pytest.mark.parametrize("amp", [False, True], ids=["float32", "amp-float16"])
def test_training_steps_compile_nothing_new_and_sync_once_per_step(amp, opencl_device):
    state = devices.device_state(opencl_device)
    step = mlp_step(device(), amp, dtype="float16")
    losses = [step(1e-2).item()]  # the first step compiles what it needs
    compiled = len(state._kernels)
    with ampcore.count_host_syncs() as syncs:
        kept = [step(lr) for lr in (9e-3, 8e-3, 7e-3)]
    assert len(state._kernels) == compiled, "a step with a new learning rate compiled new kernels"
    # One read per step: the GradScaler's skip decision, or cross_entropy's deferred class-index check
    # (read before the optimizer step; with a scaler it travels with the found-inf flag).
    assert syncs.count == 3, syncs.by_reason
    losses += [t.item() for t in kept]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_the_mlp_benchmark_runs_and_writes_its_json(tmp_path, opencl_device):
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_opencl_mlp.py"
    out = tmp_path / "mlp.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(script),
            "--device",
            device(),
            "--steps",
            "1",
            "--warmup",
            "1",
            "--batch",
            "8",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "AMP speedup over float32" in proc.stdout
    result = json.loads(out.read_text())
    assert set(result["configs"]) == {"float32", "amp float16"}
    for config in result["configs"].values():
        assert config["pool_bytes"] > 0 and config["median_s"] > 0 and np.isfinite(config["final_loss"])
