"""The public surface is pinned: nothing leaks into or drops out of ``ampcore.__all__`` by accident."""

from __future__ import annotations

import types
from pathlib import Path

import ampcore

DOCUMENTED = {
    "__version__",
    # modules
    "dtypes", "kernels", "plugins", "nn", "optim", "amp", "autograd", "policy", "cgen",
    # dtypes
    "DType", "bfloat16", "bool_", "finfo", "float16", "float32", "float64", "int32", "int64", "promote_types",
    "result_type",
    # tensors
    "Tensor", "Generator", "arange", "as_tensor", "empty", "empty_like", "from_numpy", "full", "full_like",
    "manual_seed", "ones", "ones_like", "rand", "randn", "tensor", "zeros", "zeros_like", "cat", "stack", "matmul",
    "where",
    # autograd
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    # mixed precision
    "autocast", "is_autocast_enabled", "get_autocast_dtype", "is_autocast_available", "custom_fwd", "custom_bwd",
    "GradScaler", "count_host_syncs",
    "op",
    # devices and backends
    "Device", "device", "Backend", "Capabilities", "Availability", "BackendUnavailableError", "MissingKernelsError",
    "KernelError", "PluginLoadError", "UnknownBackendError", "available_backends", "get_backend",
    "get_default_device", "register_backend", "register_plugin", "set_default_device",
}


def test_all_is_exactly_the_documented_surface():
    exported = set(ampcore.__all__)
    assert not exported - DOCUMENTED, f"undocumented names exported: {sorted(exported - DOCUMENTED)}"
    assert not DOCUMENTED - exported, f"documented names missing from __all__: {sorted(DOCUMENTED - exported)}"
    assert len(ampcore.__all__) == len(exported), "duplicate names in __all__"


def test_every_exported_name_exists():
    missing = [name for name in ampcore.__all__ if not hasattr(ampcore, name)]
    assert missing == []


def test_exported_modules_are_modules_and_the_rest_are_not():
    modules = {name for name in ampcore.__all__ if isinstance(getattr(ampcore, name, None), types.ModuleType)}
    assert modules == {"dtypes", "kernels", "plugins", "nn", "optim", "amp", "autograd", "policy", "cgen"}


def test_testing_helpers_are_importable():
    from ampcore.testing import FakeBackend, gradcheck

    assert callable(gradcheck) and issubclass(FakeBackend, ampcore.Backend)


# --------------------------------------------------------------------------- what the README promises
ROOT = Path(__file__).resolve().parents[1]


def readme_blocks(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return [b.split("\n", 1)[1] for b in text.split("```")[1::2] if b.startswith(language + "\n")]


def test_ci_runs_exactly_the_readme_test_command_last():
    quick_start = readme_blocks("bash")
    assert len(quick_start) == 2, "the quick start is exactly two commands"
    test_command = quick_start[1].strip()
    assert "pytest" in test_command and "\n" not in test_command
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert "set -euo pipefail" in ci
    assert ci[-1] == test_command


def test_readme_quick_start_installs_ampcore_and_cpu_and_trains():
    first = readme_blocks("bash")[0].strip()
    assert first.startswith("python3 -m venv .venv && ") and ".venv/bin/ampcore train" in first
    assert "-e . -e backends/cpu" in first


def test_readme_python_example_runs():
    [example] = readme_blocks("python")
    exec(compile(example, "README.md", "exec"), {})
