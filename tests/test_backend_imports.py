"""Built-in backends use only ampcore's public API, and the core never imports a backend or device library."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ampcore

ROOT = Path(__file__).resolve().parents[1]
# distributed: a backend's DevicePath (NCCL); cgen: the kernel text the C dialects share; expr: the programs a
# backend renders (its elementwise primitive); capture: the recorded program a backend's capture_runner replays
PUBLIC_SUBMODULES = {"dtypes", "plugins", "kernels", "distributed", "cgen", "expr", "float8", "capture"}
TEST_ONLY_SUBMODULES = {"testing"}
DEVICE_LIBRARIES = {"pyopencl", "cupy", "cupyx", "pycuda", "torch"}

BACKEND_FILES = sorted(p for p in (ROOT / "backends").glob("*/**/*.py") if ".egg-info" not in str(p))
CORE_FILES = sorted((ROOT / "ampcore").rglob("*.py"))


def _is_test_file(path: Path) -> bool:
    return "tests" in path.parts or path.name.startswith("test_") or path.name == "conftest.py"


def ampcore_violations(source: str, allow_testing: bool) -> list[str]:
    """Every import of, or attribute taken from, ampcore outside its public API."""
    allowed_modules = PUBLIC_SUBMODULES | (TEST_ONLY_SUBMODULES if allow_testing else set())
    public_names = set(ampcore.__all__) | (TEST_ONLY_SUBMODULES if allow_testing else set())
    bad = []
    aliases = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != "ampcore":
                    continue
                if len(parts) > 2 or (len(parts) == 2 and parts[1] not in allowed_modules):
                    bad.append(f"line {node.lineno}: import {alias.name}")
                elif len(parts) == 1:
                    aliases.add(alias.asname or "ampcore")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] != "ampcore":
                continue
            if len(parts) == 1:
                bad += [
                    f"line {node.lineno}: from ampcore import {a.name}"
                    for a in node.names
                    if a.name not in public_names
                ]
            elif len(parts) > 2 or parts[1] not in allowed_modules:
                bad.append(f"line {node.lineno}: from {node.module} import ...")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr not in public_names:
                bad.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return bad


def imported_top_level(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_there_are_backend_modules_to_check():
    assert any(p.parent.name == "ampcore_cpu" for p in BACKEND_FILES)


@pytest.mark.parametrize("path", BACKEND_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_backend_imports_only_public_ampcore(path):
    assert ampcore_violations(path.read_text(), allow_testing=_is_test_file(path)) == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import ampcore\nampcore.Backend", []),
        ("from ampcore import dtypes, Backend", []),
        ("from ampcore.plugins import hookimpl", []),
        ("from ampcore.tensor import Tensor", ["line 1: from ampcore.tensor import ..."]),
        ("from ampcore.plugins.registry import registry", ["line 1: from ampcore.plugins.registry import ..."]),
        ("from ampcore import _caps", ["line 1: from ampcore import _caps"]),
        ("import ampcore.dispatch", ["line 1: import ampcore.dispatch"]),
        ("import ampcore as ac\nac.ops.binary", ["line 2: ac.ops"]),
        ("from ampcore.testing import FakeBackend", ["line 1: from ampcore.testing import ..."]),
    ],
)
def test_the_import_checker_catches_internals(source, expected):
    assert ampcore_violations(source, allow_testing=False) == expected


def test_tests_of_a_backend_may_use_ampcore_testing():
    assert ampcore_violations("from ampcore.testing import FakeBackend", allow_testing=True) == []


# The one exception: ``ampcore bench`` measures torch beside ampcore when torch is installed.  That module may
# import torch, but only inside functions, so importing ampcore never loads it (checked below).
TORCH_REFERENCE = ROOT / "ampcore" / "bench" / "torch_reference.py"


def module_level_imports(source: str) -> set[str]:
    """Top-level package names imported outside any function body."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(child, ast.Import):
                names.update(alias.name.split(".")[0] for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names.add(child.module.split(".")[0])
            visit(child)

    visit(ast.parse(source))
    return names


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_no_device_library_and_no_backend(path):
    source = path.read_text()
    imported = imported_top_level(source)
    if path == TORCH_REFERENCE:
        assert "torch" in imported and not module_level_imports(source) & DEVICE_LIBRARIES
        imported = imported - {"torch"}
    assert not imported & DEVICE_LIBRARIES
    assert not {name for name in imported if name.startswith("ampcore_")}


def test_the_bench_command_loads_torch_only_when_it_measures_it(run_python):
    code = (
        "import sys, ampcore, ampcore.bench, ampcore.cli.bench; from ampcore.cli import build_parser; "
        "build_parser(); print('torch' in sys.modules)"
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_importing_ampcore_loads_no_backend(run_python):
    proc = run_python("import sys, ampcore; print(sorted(m for m in sys.modules if m.startswith('ampcore_')))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
