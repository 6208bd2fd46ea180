"""The heart reads from the bottom up: the import-linter contract in pyproject.toml holds, and no heart
module imports another ampcore module inside a function (issue 26)."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ampcore"

# The heart: everything below nn/optim/distributed/training/cli/bench/conformance/testing.
HEART = (
    "dtypes.py",
    "device.py",
    "kernel_outputs.py",
    "kernels.py",
    "backend.py",
    "plugins",
    "tensor_base.py",
    "hooks.py",
    "syncs.py",
    "autograd.py",
    "dispatch.py",
    "ops",
    "creation.py",
    "tensor.py",
    "functions.py",
    "policy",
    "amp",
    "grad_scaler.py",
)
# Function-level imports a heart module may make: optional dependencies, and entry-point loading.
OPTIONAL = {"mpi4py", "numba", "torch", "matplotlib"}


def _heart_files() -> list[Path]:
    files: list[Path] = []
    for name in HEART:
        path = PACKAGE / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def _function_level_imports(path: Path) -> list[str]:
    """``file:line module`` for each import of an ampcore module inside a function body of ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                internal = node.level > 0 or module.split(".")[0] == "ampcore"
            elif isinstance(node, ast.Import):
                module = ", ".join(a.name for a in node.names)
                internal = any(a.name.split(".")[0] == "ampcore" for a in node.names)
            else:
                continue
            if internal and module.split(".")[0] not in OPTIONAL:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {module}")
    return found


def test_no_heart_module_imports_another_inside_a_function() -> None:
    found = [hit for path in _heart_files() for hit in _function_level_imports(path)]
    assert found == [], (
        "function-level imports between heart modules (import at module level, from below):\n" + "\n".join(found)
    )


def test_heart_files_exist() -> None:
    missing = [name for name in HEART if not (PACKAGE / name).exists()]
    assert missing == []


def _lint_imports() -> list[str]:
    script = Path(sys.executable).with_name("lint-imports")
    if script.exists():
        return [str(script)]
    return [
        sys.executable,
        "-c",
        "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
    ]


@pytest.mark.skipif(
    importlib.util.find_spec("importlinter") is None,
    reason="import-linter is not installed (pip install -e '.[test]' installs it)",
)
def test_import_linter_layers_contract_holds() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [*_lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def _cycles(package: str) -> list[list[str]]:
    """The import circles among ``package``'s modules (type-only imports excluded): Tarjan's strongly
    connected components of more than one module."""
    import grimp

    graph = grimp.build_graph(package, exclude_type_checking_imports=True)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & graph.modules for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


@pytest.mark.skipif(importlib.util.find_spec("grimp") is None, reason="grimp comes with import-linter ([test] extra)")
@pytest.mark.parametrize("package", ["ampcore", "ampcore_cpu", "ampcore_opencl", "ampcore_cuda"])
def test_the_whole_house_has_no_import_circle(package: str) -> None:
    """The layers contracts let siblings of one layer import each other; this holds them to no circle either."""
    assert _cycles(package) == []
