"""Plugins and backend selection: entry-point discovery, broken plugins, kernel overrides, device choice."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ampcore
from ampcore import Availability, BackendUnavailableError, MissingKernelsError, UnknownBackendError
from ampcore.device import Device
from ampcore.plugins import hookimpl, registry
from ampcore.plugins.registry import Registry
from ampcore.testing import FakeBackend


# --------------------------------------------------------------------------- entry points, in a fresh process
def install_plugin(root: Path, module: str, source: str, entry_point: str | None = None) -> None:
    """Write ``module.py`` and, if ``entry_point`` is given, a dist-info declaring it in ``ampcore.backends``."""
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    if entry_point is None:
        return
    info = root / f"ampcore_{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ampcore-{module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[ampcore.backends]\n{entry_point} = {module}\n")


def last_json(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


GOOD_PLUGIN = """
    from ampcore.plugins import hookimpl
    from ampcore.testing import FakeBackend

    @hookimpl
    def ampcore_backends():
        return FakeBackend("goodfake", priority=5)
"""

BROKEN_PLUGIN = """
    raise ImportError("badplug needs libbad.so: pip install ampcore-badplug[driver]")
"""

REPORT = """
import json, ampcore
from ampcore.plugins import broken_plugins, list_backends
records = {r.backend.name: [r.plugin, r.distribution, r.version, r.entry_point] for r in list_backends()}
broken = [[b.name, b.where, b.error] for b in broken_plugins()]
print(json.dumps({"records": records, "broken": broken, "cpu_sum": ampcore.ones(3, device="cpu").sum().item()}))
"""


def test_entry_point_backend_is_listed_with_provenance_and_selectable(tmp_path, run_python):
    install_plugin(tmp_path, "goodplug", GOOD_PLUGIN, entry_point="goodfake")
    out = last_json(run_python(REPORT, path=tmp_path))
    assert out["records"]["goodfake"] == ["goodfake", "ampcore-goodplug", "0.1", "goodplug"]
    assert "cpu" in out["records"] and out["broken"] == []
    used = last_json(
        run_python(
            textwrap.dedent("""
        import json, ampcore
        t = ampcore.ones(2, 3, device="goodfake")
        print(json.dumps({"device": str(t.device), "sum": (t * 2.0).sum().item()}))
    """),
            path=tmp_path,
        )
    )
    assert used == {"device": "goodfake", "sum": 12.0}


def test_plugin_that_fails_to_import_is_recorded_and_cpu_keeps_working(tmp_path, run_python):
    install_plugin(tmp_path, "badplug", BROKEN_PLUGIN, entry_point="badplug")
    out = last_json(run_python(REPORT, path=tmp_path))
    assert out["cpu_sum"] == 3.0
    [(name, where, error)] = out["broken"]
    assert (name, where) == ("badplug", "import")
    assert "ImportError: badplug needs libbad.so" in error


def test_asking_for_a_broken_plugin_by_name_raises_with_its_error(tmp_path, run_python):
    install_plugin(tmp_path, "badplug", BROKEN_PLUGIN, entry_point="badplug")
    proc = run_python("import ampcore; ampcore.ones(1, device='badplug')", path=tmp_path)
    assert proc.returncode != 0
    assert "PluginLoadError: backend 'badplug' is installed but broken (import)" in proc.stderr
    assert "libbad.so" in proc.stderr


@pytest.mark.parametrize("plugin_first", [True, False])
def test_strict_plugins_makes_a_broken_plugin_fatal_naming_it(tmp_path, run_python, plugin_first):
    install_plugin(tmp_path, "badplug", BROKEN_PLUGIN, entry_point="badplug")
    # Asked twice: the second attempt must still blame badplug, not the plugins loaded before it.
    code = textwrap.dedent(f"""
        import sys
        sys.path.{"insert(0, " if plugin_first else "append("}{str(tmp_path)!r})
        import ampcore
        for attempt in range(2):
            try:
                ampcore.ones(1, device="cpu")
            except ampcore.PluginLoadError as exc:
                print("PluginLoadError:", exc)
    """)
    strict = run_python(code, env={"AMPCORE_STRICT_PLUGINS": "1"})
    assert strict.returncode == 0, strict.stderr
    lines = strict.stdout.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1], lines
    assert lines[0].startswith("PluginLoadError: plugin 'badplug' failed in import: ImportError: badplug needs")
    assert "AMPCORE_STRICT_PLUGINS" in lines[0]
    relaxed = run_python(code)
    assert relaxed.returncode == 0 and relaxed.stdout == ""


def test_backend_missing_primitives_is_reported_naming_them(tmp_path, run_python):
    install_plugin(
        tmp_path,
        "partial",
        """
        from ampcore.plugins import hookimpl
        from ampcore.testing import FakeBackend

        @hookimpl
        def ampcore_backends():
            return FakeBackend("partial", missing=("matmul", "exp"))
    """,
        entry_point="partial",
    )
    out = last_json(run_python(REPORT, path=tmp_path))
    assert "partial" not in out["records"]
    [(name, where, error)] = out["broken"]
    assert (name, where) == ("partial", "validate")
    assert "MissingKernelsError" in error and "exp, matmul" in error


KERNEL_PLUGIN = """
    import numpy as np
    from ampcore.plugins import hookimpl

    calls = []

    @hookimpl
    def ampcore_kernels(backend):
        if backend.name != "cpu":
            return None

        def matmul(a, b):
            calls.append(a.shape)
            return np.matmul(a, b)

        return {"matmul": matmul}
"""

USE_MATMUL = """
import json, sys, ampcore
k = ampcore.get_backend("cpu").kernels
out = ampcore.ones(2, 3) @ ampcore.ones(3, 4)
calls = sys.modules["fastgemm"].calls
print(json.dumps({"matmul": k.provider("matmul"), "add": k.provider("add"), "calls": calls, "out": out.sum().item()}))
"""


@pytest.mark.parametrize("how", ["entry point", "register_plugin"])
def test_kernel_plugin_overrides_a_cpu_kernel_and_is_named_its_provider(tmp_path, run_python, how):
    install_plugin(tmp_path, "fastgemm", KERNEL_PLUGIN, entry_point="fastgemm" if how == "entry point" else None)
    setup = "import ampcore, fastgemm; ampcore.register_plugin(fastgemm, 'fastgemm')\n" if how != "entry point" else ""
    out = last_json(run_python(setup + USE_MATMUL, path=tmp_path))
    assert out == {"matmul": "fastgemm", "add": "cpu", "calls": [[2, 3]], "out": 24.0}


# --------------------------------------------------------------------------- registry, in process
class BackendsPlugin:
    def __init__(self, *backends):
        self.backends = list(backends)

    @hookimpl
    def ampcore_backends(self):
        return self.backends


def test_fresh_registry_takes_plugins_from_code_in_isolation():
    reg = Registry(load_entry_points=False)
    reg.register_plugin(BackendsPlugin(FakeBackend("one"), FakeBackend("two", priority=3)), name="pair")
    assert sorted(reg.records) == ["one", "two"]
    assert reg.records["two"].plugin == "pair"
    assert reg.best_device() == Device("two")
    assert reg.get_backend("one").kernels.provider("add") == "one"
    assert "cpu" not in reg.records and registry.records.get("one") is None


def test_fresh_registry_records_each_failure_and_keeps_the_rest():
    class Raising:
        @hookimpl
        def ampcore_backends(self):
            raise RuntimeError("no driver")

    class BadKernels:
        @hookimpl
        def ampcore_kernels(self, backend):
            return {"matmull": np.matmul}

    reg = Registry(load_entry_points=False)
    reg.register_plugin(BackendsPlugin(FakeBackend("ok")), name="good")
    reg.register_plugin(Raising(), name="raising")
    reg.register_plugin(BackendsPlugin("not a backend"), name="junk")
    reg.register_plugin(BackendsPlugin(FakeBackend("ok")), name="dup")
    reg.register_plugin(BadKernels(), name="typo")
    found = {b.name: (b.where, b.error) for b in reg.broken}
    assert found["raising"] == ("ampcore_backends", "RuntimeError: no driver")
    assert found["junk"][0] == "validate" and "not an ampcore.Backend" in found["junk"][1]
    assert found["dup"][0] == "validate" and "already taken by plugin 'good'" in found["dup"][1]
    assert found["typo"][0] == "ampcore_kernels" and "matmull" in found["typo"][1]
    assert list(reg.records) == ["ok"] and reg.get_backend("ok").kernels.provider("matmul") == "ok"


def test_register_backend_makes_a_fake_usable_and_unregister_removes_it():
    fake = ampcore.register_backend(FakeBackend("tmpfake"))
    try:
        t = ampcore.arange(4, dtype="float32", device="tmpfake")
        assert t.device == Device("tmpfake") and (t * t).sum().item() == 14.0
        assert fake.calls["mul"] == 1
    finally:
        registry.unregister_backend("tmpfake")
    with pytest.raises(UnknownBackendError):
        ampcore.get_backend("tmpfake")


def test_register_backend_lacking_primitives_raises_naming_them():
    with pytest.raises(MissingKernelsError, match="missing primitive kernels exp, matmul") as info:
        ampcore.register_backend(FakeBackend("holes", missing=("matmul", "exp")))
    assert info.value.missing == ["exp", "matmul"]
    assert "holes" not in registry.records


def test_injected_kernel_failure_surfaces_as_kernel_error(register_fake):
    fake = register_fake(fail_on=("exp", 2))
    x = ampcore.ones(2, device=fake.name)
    x.exp()
    with pytest.raises(ampcore.KernelError, match=f"op 'exp' failed \\(kernel 'exp'\\) on backend '{fake.name}'"):
        x.exp()


# --------------------------------------------------------------------------- selection
def test_unknown_backend_lists_installed_ones():
    with pytest.raises(UnknownBackendError, match=r"^unknown backend 'opnecl'.*; installed backends are .*'cpu'"):
        ampcore.ones(1, device="opnecl")


def test_unavailable_backend_raises_with_its_reason_and_is_not_auto_selected(register_fake):
    class Offline(FakeBackend):
        def availability(self):
            return Availability(False, "no device: libfake.so not found")

    offline = register_fake(cls=Offline, priority=10_000)
    with pytest.raises(BackendUnavailableError, match="unavailable: no device: libfake.so not found") as info:
        ampcore.ones(1, device=offline.name)
    assert info.value.reason == "no device: libfake.so not found"
    assert offline not in ampcore.available_backends()
    assert ampcore.plugins.best_device().type != offline.name


def test_highest_priority_available_backend_is_the_default(register_fake):
    low = register_fake(priority=-1)
    assert ampcore.plugins.best_device().type != low.name
    high = register_fake(priority=1_000_000)
    ranked = ampcore.available_backends()
    assert ranked[0] is high and ranked[-1] is low
    assert [b.priority for b in ranked] == sorted((b.priority for b in ranked), reverse=True)
    assert ampcore.get_default_device() == Device(high.name)
    assert ampcore.ones(1).device.type == high.name


def test_ampcore_device_env_selects_the_default(register_fake, monkeypatch):
    fake = register_fake(devices=2)
    monkeypatch.setattr(registry, "_default", None)
    monkeypatch.setenv("AMPCORE_DEVICE", f"{fake.name}:1")
    assert ampcore.zeros(2).device == Device(fake.name, 1)
    monkeypatch.setenv("AMPCORE_DEVICE", "opnecl")
    with pytest.raises(UnknownBackendError, match=r"installed backends are .* \(from AMPCORE_DEVICE='opnecl'\)"):
        ampcore.zeros(2)


def test_ampcore_device_env_in_a_fresh_process(run_python):
    proc = run_python("import ampcore; print(ampcore.ones(1).device)", env={"AMPCORE_DEVICE": "cpu:0"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "cpu:0"


def test_set_default_device_wins_over_env_and_none_restores(register_fake, monkeypatch):
    fake = register_fake()
    monkeypatch.setenv("AMPCORE_DEVICE", "cpu")
    ampcore.set_default_device(fake.name)
    assert ampcore.ones(1).device.type == fake.name
    ampcore.set_default_device(None)
    assert ampcore.ones(1).device.type == "cpu"
    with pytest.raises(UnknownBackendError):
        ampcore.set_default_device("opnecl")


def test_device_index_is_parsed_and_checked(register_fake):
    fake = register_fake(devices=2)
    t = ampcore.ones(1, device=f"{fake.name}:1")
    assert (t.device.type, t.device.index, str(t.device)) == (fake.name, 1, f"{fake.name}:1")
    with pytest.raises(ValueError, match=rf"device '{fake.name}:2' does not exist; backend '{fake.name}' has 2 device"):
        ampcore.ones(1, device=f"{fake.name}:2")
    assert ampcore.device("cuda:1") == Device("cuda", 1)
    with pytest.raises(ValueError, match="malformed device 'cuda:x'"):
        ampcore.ones(1, device="cuda:x")


def test_dtype_the_device_cannot_store_raises_naming_dtype_and_device(register_fake):
    fake = register_fake(storable=["float32", "int64", "bool"])
    with pytest.raises(TypeError, match=rf"device '{fake.name}:0' cannot store float16 tensors"):
        ampcore.zeros(2, dtype=ampcore.float16, device=fake.name)
    x = ampcore.ones(2, device=fake.name)
    with pytest.raises(TypeError, match="cannot store bfloat16"):
        x.to(ampcore.bfloat16)


def test_storage_only_dtype_can_be_held_but_not_computed(register_fake):
    fake = register_fake(
        storable=["float32", "bfloat16", "int64", "bool"], native=["float32", "int64", "bool"], emulated=[]
    )
    b = ampcore.ones(2, device=fake.name).to(ampcore.bfloat16)
    assert b.dtype == ampcore.bfloat16
    assert b.float().sum().item() == 2.0
    with pytest.raises(TypeError, match="cannot compute 'add'"):
        b + b


def test_tensors_on_two_devices_cannot_be_combined(register_fake):
    fake = register_fake()
    with pytest.raises(ValueError, match=rf"different devices \('cpu' and '{fake.name}'\)"):
        ampcore.ones(2, device="cpu") + ampcore.ones(2, device=fake.name)
    moved = ampcore.ones(2, device=fake.name).to("cpu")
    assert (moved + ampcore.ones(2)).device == Device("cpu")


# --------------------------------------------------------------------------- the documented example
DOC = Path(__file__).resolve().parents[1] / "docs" / "writing-a-backend.md"


def doc_block(first_line: str) -> str:
    """The fenced code block of the backend guide that starts with ``first_line``."""
    for block in DOC.read_text().split("```")[1::2]:
        body = block.split("\n", 1)[1]
        if body.startswith(first_line):
            return body
    raise AssertionError(f"no code block starting with {first_line!r} in {DOC}")


def test_backend_example_in_the_docs_works(tmp_path, run_python):
    package = tmp_path / "ampcore_tiny"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(doc_block("# ampcore_tiny/plugin.py"))
    info = tmp_path / "ampcore_tiny-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ampcore-tiny\nVersion: 0.1.0\n")
    assert '[project.entry-points."ampcore.backends"]\ntiny = "ampcore_tiny.plugin"' in doc_block("# pyproject.toml")
    (info / "entry_points.txt").write_text("[ampcore.backends]\ntiny = ampcore_tiny.plugin\n")

    console = doc_block("$ ampcore info").splitlines()
    command, shown = console[1].removeprefix("$ python -c ").strip('"'), console[2]
    proc = run_python(command, path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == shown

    out = last_json(
        run_python(
            REPORT
            + textwrap.dedent("""
        x = ampcore.randn(8, 4, device="tiny", requires_grad=True)
        w = ampcore.randn(4, 3, device="tiny", requires_grad=True)
        h = (x @ w).tanh()
        loss = (h - h.max(1, keepdim=True).values).exp().sum() + h[ampcore.tensor([0, 2], device="tiny")].sum()
        loss.backward()
        ref = (x.detach().cpu() @ w.detach().cpu()).tanh()
        print(json.dumps({"grad": list(w.grad.shape), "close": bool(abs(ref - h.detach().cpu()).max().item() < 1e-6),
                          "argmax": h.argmax(1).dtype.name}))
    """),
            path=tmp_path,
        )
    )
    assert out == {"grad": [4, 3], "close": True, "argmax": "int64"}
    report = last_json(run_python(REPORT, path=tmp_path))
    assert report["records"]["tiny"] == ["tiny", "ampcore-tiny", "0.1.0", "ampcore_tiny.plugin"]
    assert report["broken"] == []
