"""The public surface is pinned: nothing leaks into or drops out of ``ampcore.__all__`` by accident."""

from __future__ import annotations

import importlib
import types
from pathlib import Path

import pytest

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


# --------------------------------------------------------------------------- importable from where they were
# Every name each public module exported at 174fc7d, before issue 26 moved the heart around: each must still
# be importable from the same module (new names may be added; none may go).
IMPORTABLE = {
    'ampcore': (
        'Availability', 'Backend', 'BackendUnavailableError', 'Capabilities', 'DType', 'Device', 'Generator',
        'GradScaler', 'KernelError', 'MissingKernelsError', 'PluginLoadError', 'Tensor', 'UnknownBackendError',
        '__version__', 'amp', 'arange', 'as_tensor', 'autocast', 'autograd', 'available_backends', 'bfloat16',
        'bool_', 'cat', 'count_host_syncs', 'custom_bwd', 'custom_fwd', 'device', 'dtypes', 'empty',
        'empty_like', 'enable_grad', 'finfo', 'float16', 'float32', 'float64', 'from_numpy', 'full',
        'full_like', 'get_autocast_dtype', 'get_backend', 'get_default_device', 'int32', 'int64',
        'is_autocast_available', 'is_autocast_enabled', 'is_grad_enabled', 'kernels', 'manual_seed', 'matmul',
        'nn', 'no_grad', 'ones', 'ones_like', 'op', 'optim', 'plugins', 'policy', 'promote_types', 'rand',
        'randn', 'register_backend', 'register_plugin', 'result_type', 'set_default_device', 'set_grad_enabled',
        'stack', 'tensor', 'where', 'zeros', 'zeros_like',
    ),
    'ampcore.nn': (
        'BCELoss', 'BCEWithLogitsLoss', 'BatchNorm2d', 'Bilinear', 'Conv2d', 'CosineEmbeddingLoss',
        'CosineSimilarity', 'CrossEntropyLoss', 'Dropout', 'Embedding', 'Flatten', 'GELU', 'GroupNorm',
        'HingeEmbeddingLoss', 'HuberLoss', 'Identity', 'IncompatibleKeys', 'KLDivLoss', 'L1Loss', 'LayerNorm',
        'Linear', 'LogSoftmax', 'MSELoss', 'MarginRankingLoss', 'Module', 'ModuleList', 'MultiheadAttention',
        'NLLLoss', 'PReLU', 'Parameter', 'PoissonNLLLoss', 'ReLU', 'Sequential', 'SiLU', 'Sigmoid',
        'SmoothL1Loss', 'SoftMarginLoss', 'Softmax', 'Softmin', 'Softplus', 'StateDictError', 'Tanh',
        'TripletMarginLoss', 'functional', 'init', 'utils',
    ),
    'ampcore.nn.functional': (
        'addcdiv', 'addcmul', 'addmm', 'avg_pool2d', 'baddbmm', 'batch_norm', 'bilinear',
        'binary_cross_entropy', 'binary_cross_entropy_with_logits', 'bmm', 'cat', 'conv1d', 'conv2d',
        'cosine_embedding_loss', 'cosine_similarity', 'cross_entropy', 'cumsum', 'dot', 'dropout', 'embedding',
        'exp', 'gelu', 'group_norm', 'hinge_embedding_loss', 'huber_loss', 'kl_div', 'l1_loss', 'layer_norm',
        'linear', 'log', 'log_softmax', 'margin_ranking_loss', 'matmul', 'max_pool2d', 'mean', 'mm', 'mse_loss',
        'nll_loss', 'normalize', 'poisson_nll_loss', 'pow', 'prelu', 'relu', 'rsqrt',
        'scaled_dot_product_attention', 'sigmoid', 'silu', 'smooth_l1_loss', 'soft_margin_loss', 'softmax',
        'softmin', 'softplus', 'sqrt', 'stack', 'sum', 'tanh', 'tensordot', 'triplet_margin_loss',
    ),
    'ampcore.optim': (
        'Adam', 'AdamW', 'Optimizer', 'SGD', 'StateDictError',
    ),
    'ampcore.amp': (
        'AutocastError', 'Decision', 'GradScaler', 'OptState', 'OverflowRecord', 'Trace', 'TraceRecord',
        'autocast', 'clear_autocast_cache', 'custom_bwd', 'custom_fwd', 'decide', 'detect_overflow', 'explain',
        'get_autocast_dtype', 'is_autocast_available', 'is_autocast_cache_enabled', 'is_autocast_enabled', 'op',
    ),
    'ampcore.plugins': (
        'BrokenPlugin', 'PluginLoadError', 'UnknownBackendError', 'available_backends', 'best_device',
        'broken_plugins', 'get_backend', 'get_default_device', 'hookimpl', 'hookspec', 'list_backends',
        'register_backend', 'register_plugin', 'registry', 'resolve_device', 'set_default_device',
    ),
    'ampcore.plugins.hookspecs': (
        'ampcore_backends', 'ampcore_kernels', 'ampcore_policy', 'hookimpl', 'hookspec',
    ),
    'ampcore.conformance': (
        'BackendUnderTest', 'EPS', 'KnownGap', 'KnownGapsError', 'NOT_SUPPORTED', 'assert_close',
        'assert_same_nonfinite', 'load_known_gaps', 'tolerance',
    ),
    'ampcore.conformance.plugin': (
        'backend', 'pytest_addoption', 'pytest_configure',
    ),
    'ampcore.testing': (
        'FakeBackend', 'GradcheckError', 'gradcheck',
    ),
    'ampcore.grad_scaler': (
        'GradScaler', 'OptState',
    ),
    'ampcore.policy': (
        'BANNED', 'BANNED_REASONS', 'BUILTIN_TABLES', 'Category', 'DtypePolicy', 'Entry', 'FP32', 'LOWER',
        'PROMOTE', 'Policy', 'UNLISTED', 'UnknownOpError', 'builtin', 'get', 'register', 'unregister',
    ),
    'ampcore.autograd': (
        'Context', 'Function', 'FunctionCtx', 'Node', 'enable_grad', 'is_grad_enabled', 'no_grad',
        'queue_callback', 'run_backward', 'saved_bytes', 'set_grad_enabled', 'zero_grads',
    ),
    'ampcore.dispatch': (
        'GuardedKernels', 'KernelError', 'call', 'common_device', 'composite', 'guarded_kernels',
        'is_registered', 'op_boundary', 'primitive', 'register_op', 'registered_ops', 'route',
    ),
    'ampcore.kernels': (
        'BINARY', 'COMPARISON', 'FUSED', 'KernelError', 'KernelTable', 'MissingKernelsError', 'PRIMITIVES',
        'UNARY', 'adamw_moment_dtype', 'check_adamw_step',
    ),
    'ampcore.tensor': (
        'Tensor',
    ),
    'ampcore.creation': (
        'Generator', 'arange', 'as_tensor', 'default_generator', 'empty', 'empty_like', 'from_numpy', 'full',
        'full_like', 'manual_seed', 'ones', 'ones_like', 'rand', 'randn', 'tensor', 'zeros', 'zeros_like',
    ),
    'ampcore.dtypes': (
        'ALL_DTYPES', 'DType', 'FInfo', 'FLOAT_DTYPES', 'LOW_PRECISION_DTYPES', 'as_dtype', 'bfloat16', 'bool_',
        'convert', 'finfo', 'float16', 'float32', 'float64', 'int32', 'int64', 'promote_types', 'result_type',
    ),
    'ampcore.backend': (
        'Availability', 'Backend', 'BackendUnavailableError', 'Capabilities',
    ),
    'ampcore.device': (
        'Device', 'DeviceLike', 'parse_device',
    ),
}

# Tensor's methods and operators at 174fc7d (issue 26 builds its plain delegations from a table).
TENSOR_METHODS = (
    'T', '__abs__', '__add__', '__array__', '__bool__', '__eq__', '__float__', '__ge__', '__getitem__',
    '__gt__', '__index__', '__int__', '__invert__', '__iter__', '__le__', '__len__', '__lt__', '__matmul__',
    '__mul__', '__ne__', '__neg__', '__pos__', '__pow__', '__radd__', '__rmatmul__', '__rmul__', '__rpow__',
    '__rsub__', '__rtruediv__', '__setitem__', '__sub__', '__truediv__', 'abs', 'add_', 'amax', 'argmax',
    'argmin', 'backward', 'bfloat16', 'bool', 'clamp', 'clip', 'clone', 'contiguous', 'copy_', 'cos', 'cpu',
    'cumsum', 'detach', 'device', 'dim', 'double', 'dtype', 'erf', 'exp', 'expand', 'expand_as', 'fill_',
    'flatten', 'float', 'grad', 'grad_fn', 'half', 'int', 'is_floating_point', 'is_leaf', 'item', 'log',
    'log_softmax', 'long', 'mT', 'masked_fill', 'matmul', 'max', 'maximum', 'mean', 'min', 'minimum', 'mul_',
    'nbytes', 'ndim', 'numel', 'numpy', 'permute', 'pow', 'relu', 'requires_grad', 'requires_grad_', 'reshape',
    'rsqrt', 'shape', 'sigmoid', 'sign', 'sin', 'size', 'softmax', 'sqrt', 'squeeze', 'std', 'sum', 't', 'tanh',
    'to', 'tolist', 'transpose', 'type_as', 'unsqueeze', 'var', 'view', 'zero_'
)


@pytest.mark.parametrize("module", sorted(IMPORTABLE))
def test_every_name_stays_importable_from_where_it_was(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in IMPORTABLE[module] if not hasattr(mod, name)]
    assert missing == [], f"{module} lost {missing}"


def test_tensor_keeps_every_method() -> None:
    missing = [name for name in TENSOR_METHODS if not hasattr(ampcore.Tensor, name)]
    assert missing == []


def test_grad_scaler_is_one_class_from_its_three_homes() -> None:
    from ampcore.amp.grad_scaler import GradScaler
    from ampcore.grad_scaler import GradScaler as OldHome

    assert GradScaler is OldHome is ampcore.GradScaler is ampcore.amp.GradScaler


def test_the_conformance_plugin_is_registered_with_pytest() -> None:
    from importlib.metadata import entry_points

    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins.get("ampcore") == "ampcore.conformance.plugin"
