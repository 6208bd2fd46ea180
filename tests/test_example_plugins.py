"""The example plugins in examples/ work for someone outside the repo.

In this process: the examples use only ampcore's public API, the ``arrayapi``
backend over NumPy's own Array API namespace (float16 emulated) passes the
conformance suite, with and without the fused-kernel plugin, and a namespace
that cannot be used makes the backend unavailable with the reason.

In a fresh virtual environment (slow; needs pip and a package index, as CI
has: with neither the test fails, it does not skip): ampcore, the two example
distributions and the guide's ``tiny`` backend, extracted from
docs/writing-a-backend.md, are pip-installed from a copy of the checkout, and
``ampcore info``, selection by name and ``ampcore conformance`` run in
subprocesses of that environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ampcore
from ampcore.kernels import PRIMITIVES
from ampcore.plugins import registry

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
ARRAYAPI = ROOT / "examples" / "ampcore-arrayapi"
FUSED = ROOT / "examples" / "ampcore-arrayapi-fused"
EXAMPLE_FILES = sorted(p for p in (ROOT / "examples").rglob("*.py") if ".egg-info" not in str(p))


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_import_only_public_ampcore(path):
    from test_backend_imports import ampcore_violations

    assert ampcore_violations(path.read_text(), allow_testing=False) == []


# --------------------------------------------------------------------------- in this process
@pytest.fixture
def arrayapi(monkeypatch) -> Any:
    """The examples importable; ``arrayapi(namespace)`` registers the backend on that namespace (removed after)."""
    monkeypatch.syspath_prepend(str(ARRAYAPI))
    monkeypatch.syspath_prepend(str(FUSED))
    names: list[str] = []

    def register(namespace: str) -> Any:
        from ampcore_arrayapi.plugin import ArrayAPIBackend

        backend = ampcore.register_backend(ArrayAPIBackend(namespace))
        names.append(backend.name)
        return backend

    yield register
    for name in names:
        registry.unregister_backend(name)


def run_suite(pytester: pytest.Pytester, name: str) -> tuple[Any, dict[str, Any]]:
    path = pytester.path / "report.json"
    run = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--pyargs",
        "ampcore.conformance",
        "--ampcore-backend",
        name,
        "--ampcore-json",
        str(path),
    )
    return run, json.loads(path.read_text())["backends"][0]


def cells(report: dict[str, Any], outcome: str) -> set[tuple[str, str, str]]:
    return {(c["check"], c["op"], c["dtype"]) for c in report["cells"] if c["outcome"] == outcome}


@pytest.mark.slow
def test_arrayapi_on_numpy_passes_the_suite_with_float16_emulated(pytester, arrayapi):
    backend = arrayapi("numpy")
    caps = backend.capabilities()
    assert ampcore.float16 in caps.emulated and ampcore.bfloat16 not in caps.storable
    assert caps.autocast_dtype is ampcore.float16 and backend.priority < 100
    run, report = run_suite(pytester, backend.name)
    assert run.ret == 0, run.stdout.str()[-3000:]
    assert report["summary"]["fail"] == 0 and report["summary"]["pass"] > 500
    assert {
        ("kernels", "add", "float16"),
        ("rounding", "sqrt", "float16"),
        ("storage", "round trip", "float16"),
        ("training", "amp_tracks_float32", "float16"),
    } <= cells(report, "pass")
    assert ("storage", "round trip", "bfloat16") in cells(report, "not supported")
    assert ("fused", "softmax", "float32") in cells(report, "not supported")  # no fused kernels of its own


@pytest.mark.slow
def test_the_fused_plugin_provides_softmax_on_arrayapi_and_passes_the_fused_checks(pytester, arrayapi):
    import ampcore_arrayapi_fused.plugin as fused

    backend = arrayapi("numpy")
    assert not backend.kernels.has("softmax")
    ampcore.register_plugin(fused, name="arrayapi_fused")
    try:
        assert backend.kernels.provider("softmax") == "arrayapi_fused"
        assert backend.kernels.provider("matmul") == "arrayapi"  # primitives stay the backend's own
        x = ampcore.tensor([[1.0, 2.0, 3.0]], device=backend.name, dtype=ampcore.float16)
        y = ampcore.nn.functional.softmax(x, dim=-1)
        assert y.dtype is ampcore.float16 and abs(float(y.sum().item()) - 1.0) < 2**-10 * 3
        run, report = run_suite(pytester, backend.name)
        assert run.ret == 0, run.stdout.str()[-3000:]
        assert {("fused", "softmax", "float16"), ("fused", "softmax", "float32")} <= cells(report, "pass")
        assert ("fused", "gelu", "float32") in cells(report, "not supported")  # left to the core on purpose
    finally:
        registry.pm.unregister(name="arrayapi_fused")


def test_an_unusable_namespace_makes_the_backend_unavailable_with_the_fix(arrayapi, monkeypatch):
    from ampcore_arrayapi.plugin import ArrayAPIBackend

    monkeypatch.setenv("AMPCORE_ARRAYAPI_NAMESPACE", "no_such_array_library")
    backend = ArrayAPIBackend()
    status = backend.availability()
    assert not status and "'no_such_array_library'" in status.reason and "pip install" in status.reason
    assert set(backend.kernel_functions()) >= PRIMITIVES  # registered anyway, so `ampcore info` can show the reason
    monkeypatch.setenv("AMPCORE_ARRAYAPI_NAMESPACE", "json")
    status = ArrayAPIBackend().availability()
    assert not status and "not an Array API namespace" in status.reason


def test_capabilities_follow_the_namespace(arrayapi):
    backend = arrayapi("numpy")
    info = backend.namespace().xp.__array_namespace_info__()
    assert backend.device_count() == len(info.devices())
    caps = backend.capabilities(0)
    assert {d.name for d in caps.native} == {"float64", "float32", "int64", "int32", "bool"} & set(info.dtypes())
    assert caps.extra["namespace"] == "numpy"


# --------------------------------------------------------------------------- a fresh environment
def doc_project(folder: Path) -> Path:
    """The guide's ``tiny`` backend, written out from the blocks of docs/writing-a-backend.md."""
    from test_plugins import doc_block

    (folder / "ampcore_tiny").mkdir(parents=True)
    (folder / "ampcore_tiny" / "__init__.py").write_text(doc_block("# ampcore_tiny/__init__.py"))
    (folder / "ampcore_tiny" / "plugin.py").write_text(doc_block("# ampcore_tiny/plugin.py"))
    (folder / "pyproject.toml").write_text(doc_block("# pyproject.toml"))
    return folder


def copy_checkout(dest: Path) -> dict[str, Path]:
    """ampcore and the examples copied out, so building them leaves no build/ or egg-info in the checkout."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    shutil.copytree(ROOT / "ampcore", dest / "ampcore" / "ampcore", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / "ampcore" / name)
    shutil.copytree(ARRAYAPI, dest / "arrayapi", ignore=ignore)
    shutil.copytree(FUSED, dest / "fused", ignore=ignore)
    return {
        "ampcore": dest / "ampcore",
        "arrayapi": dest / "arrayapi",
        "fused": dest / "fused",
        "tiny": doc_project(dest / "tiny"),
    }


def run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AMPCORE_", "PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run(command, capture_output=True, text=True, timeout=400, env={**clean, "COLUMNS": "200", **env})


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A new virtual environment with ampcore[conformance], both examples (array-api-strict from the index) and
    the guide's tiny backend installed from a copy of the checkout; pip's cache makes reruns quick."""
    where = tmp_path_factory.mktemp("fresh")
    src = copy_checkout(where / "src")
    made = run([sys.executable, "-m", "venv", str(where / "venv")])
    assert made.returncode == 0, f"python -m venv failed (CI has venv): {made.stderr}"
    bindir = where / "venv" / ("Scripts" if os.name == "nt" else "bin")
    pip = run(
        [
            str(bindir / "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            f"{src['ampcore']}[conformance]",
            f"{src['arrayapi']}[strict]",
            str(src["fused"]),
            str(src["tiny"]),
        ]
    )
    assert pip.returncode == 0, f"pip install failed (CI reaches the package index):\n{pip.stdout}\n{pip.stderr}"
    return bindir


@pytest.mark.slow
def test_fresh_install_lists_the_plugins_with_their_distributions(venv):
    proc = run([str(venv / "ampcore"), "info", "--json"])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["broken_plugins"] == []
    backends = {b["name"]: b for b in data["backends"]}
    arrayapi = backends["arrayapi"]
    assert (arrayapi["distribution"], arrayapi["version"], arrayapi["entry_point"]) == (
        "ampcore-arrayapi",
        "0.1.0",
        "ampcore_arrayapi.plugin",
    )
    assert arrayapi["available"] and arrayapi["priority"] == 10
    assert arrayapi["devices"][0]["namespace"] == "array_api_strict"  # the default when installed
    assert arrayapi["kernels"]["primitives"] == len(PRIMITIVES)
    assert arrayapi["kernels"]["reference"] == [
        "adamw_step",
        "adamw_step_amp",
        "gelu",
        "gelu_backward",
        "log_softmax",
        "log_softmax_backward",
        "max_pool2d_tiled",
        "max_pool2d_tiled_backward",
        "quantize_float8",
        "quantize_float8_current",
        "scaled_mm",
        "scaled_mm_mx",
    ]
    assert arrayapi["kernels"]["fused"]["softmax"] == "arrayapi_fused"
    assert backends["tiny"]["distribution"] == "ampcore-tiny"
    plugins = {p["name"]: p for p in data["plugins"]}
    assert plugins["arrayapi_fused"]["distribution"] == "ampcore-arrayapi-fused"
    assert plugins["arrayapi_fused"]["kernels"]["arrayapi"] == ["softmax", "softmax_backward"]
    text = run([str(venv / "ampcore"), "info"]).stdout
    assert "from ampcore-arrayapi 0.1.0  entry point ampcore_arrayapi.plugin" in text
    assert "arrayapi_fused: softmax, softmax_backward" in text
    assert "softmax (arrayapi_fused), softmax_backward (arrayapi_fused)" in text


SELECT = (
    "import ampcore\n"
    "x = ampcore.ones(3, device='arrayapi') * 2.0\n"
    "print(x.device, ampcore.zeros(2).device, float(x.sum().item()), type(x.numpy()).__name__)\n"
)


@pytest.mark.slow
def test_fresh_install_selects_the_backend_by_name_and_by_environment(venv):
    proc = run([str(venv / "python"), "-c", SELECT])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["arrayapi", "arrayapi", "6.0", "ndarray"]  # no cpu here: arrayapi leads tiny
    proc = run([str(venv / "python"), "-c", SELECT], AMPCORE_DEVICE="tiny")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:2] == ["arrayapi", "tiny"]
    where = "import ampcore; print(ampcore.zeros(2).device)"
    proc = run([str(venv / "python"), "-c", where], AMPCORE_DEVICE="arrayapi:1")
    assert proc.returncode == 0 and proc.stdout.strip() == "arrayapi:1", proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", ["arrayapi", "tiny"])
def test_fresh_install_passes_the_conformance_suite(venv, tmp_path, name):
    path = tmp_path / "report.json"
    proc = run([str(venv / "ampcore"), "conformance", "--backend", name, "--report", "summary", "--json", str(path)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads(path.read_text())["backends"][0]
    assert report["passed"] and report["summary"]["pass"] > 300 and report["summary"]["stale"] == 0
    float16 = {
        c["outcome"]
        for c in report["cells"]
        if c["dtype"] == "float16" and c["check"] in ("kernels", "rounding", "storage", "ops")
    }
    assert float16 == {"not supported"}  # neither array-api-strict nor tiny has float16: reported, not faked
    assert ("capabilities", "unclaimed dtype refused", "float16") in {
        (c["check"], c["op"], c["dtype"]) for c in report["cells"] if c["outcome"] == "pass"
    }
