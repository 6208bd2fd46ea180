"""docs/architecture.md names only files and modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def _paths() -> set[str]:
    """Every repository path (``ampcore/...``, ``backends/...``, ``docs/...``, ``tests/...``, ``benchmarks/...``)."""
    text = DOC.read_text()
    return set(re.findall(r"\b((?:ampcore|backends|docs|tests|benchmarks)/[\w./-]*\w)", text))


def test_the_architecture_page_names_existing_paths() -> None:
    paths = _paths()
    assert len(paths) > 20, "the page should name the files a change touches"
    missing = sorted(p for p in paths if not (ROOT / p).exists() and not (ROOT / f"{p}.py").exists())
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"


def test_the_architecture_page_names_existing_modules() -> None:
    modules = set(re.findall(r"`(ampcore(?:\.\w+)+)`", DOC.read_text()))
    assert modules
    missing = []
    for module in sorted(modules):
        parts = module.split(".")
        if not any(
            (ROOT.joinpath(*parts[:i]).with_suffix(".py")).exists() or ROOT.joinpath(*parts[:i]).is_dir()
            for i in range(len(parts), 1, -1)
        ):
            missing.append(module)
    assert missing == [], f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_heart_layer_of_the_contract_is_on_the_page() -> None:
    text = DOC.read_text()
    contract = (ROOT / "pyproject.toml").read_text().split("[tool.importlinter]", 1)[1]
    layers = re.findall(r"ampcore\.(\w+)", contract)
    missing = [name for name in layers if f"ampcore/{name}" not in text]
    assert missing == [], f"layers of the import-linter contract the page does not show: {missing}"
