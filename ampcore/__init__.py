"""ampcore: Automatic Mixed Precision with torch.amp semantics on any backend."""

from typing import Any

from . import cgen, dtypes, expr, kernels, plugins
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .backend import Availability, Backend, BackendUnavailableError, Capabilities

# Before creation's names: importing the submodule ampcore.tensor binds it as ampcore.tensor, which the
# function ampcore.tensor must then replace.
from .tensor import Tensor  # isort: skip
from . import (
    accelerator,
    amp,
    autograd,
    backend_modules,
    backends,
    capture,
    compiler,
    distributed,
    distributions,
    float8,
    functions,  # torch's function forms: the declared ops' and the methods' (exported below)
    multiprocessing,
    nn,
    optim,
    policy,
    serialization,
    utils,
    version,
)
from .amp import autocast, custom_bwd, custom_fwd, get_autocast_dtype, is_autocast_available, is_autocast_enabled, op
from .compiler import compile  # noqa: A004 - torch.compile's name
from .creation import (
    Generator,
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    manual_seed,
    multinomial,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from .creation import range_inclusive as range  # noqa: A004 - torch's (deprecated) torch.range
from .device import Device
from .device import parse_device as device
from .dispatch import KernelError
from .dtypes import (
    DType,
    bfloat16,
    bool_,
    finfo,
    float8_e4m3fn,
    float8_e5m2,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    int32,
    int64,
    promote_types,
    result_type,
)

# torch's dtype aliases (ampcore.long is ampcore.int64); a torch dtype ampcore cannot store raises naming it.
from .dtypes import bool_ as bool  # noqa: A004
from .dtypes import float16 as half
from .dtypes import float32 as float  # noqa: A004
from .dtypes import float64 as double
from .dtypes import int32 as int  # noqa: A004
from .dtypes import int64 as long
from .grad_scaler import GradScaler
from .kernels import MissingKernelsError, get_float32_matmul_precision, set_float32_matmul_precision
from .legacy import BFloat16Tensor, BoolTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor
from .ops import argsort, cat, chunk, masked_select, matmul, sort, split, stack, take_along_dim, topk, where
from .ops.float8 import scaled_mm_torch as _scaled_mm  # noqa: F401 - torch._scaled_mm's name, kept out of __all__
from .plugins import (
    PluginLoadError,
    UnknownBackendError,
    available_backends,
    get_backend,
    get_default_device,
    get_num_threads,
    register_backend,
    register_plugin,
    set_default_device,
    set_num_threads,
)
from .serialization import load, load_safetensors, save, save_safetensors
from .syncs import count_host_syncs
from .version import __version__


def _export(name: str, fn: Any) -> None:
    """Put a function form (``ampcore.exp``, ``ampcore.max``, a newly declared op's) in the namespace."""
    globals()[name] = fn
    if name not in __all__:
        __all__.append(name)


def __getattr__(name: str) -> backend_modules.BackendModule:
    """``ampcore.cuda``, ``ampcore.opencl``, ``ampcore.cpu`` and any registered backend's device module; a torch
    dtype ampcore does not support (``ampcore.uint8``) raises UnsupportedDTypeError naming it, and any other
    torch name ampcore lacks an AttributeError naming it and the porting guide."""
    error = dtypes.unsupported_dtype_error(name)
    if error is not None:
        raise error
    return backend_modules.module_for(name)


__all__ = [
    "__version__",
    # modules
    "dtypes",
    "kernels",
    "plugins",
    "nn",
    "optim",
    "amp",
    "autograd",
    "policy",
    "cgen",
    "expr",
    "float8",
    "accelerator",
    "backends",
    "distributed",
    "distributions",
    "capture",
    "compiler",
    "multiprocessing",
    "version",
    # dtypes
    "DType",
    "bfloat16",
    "bool_",
    "finfo",
    "float16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e8m0fnu",
    "int32",
    "int64",
    "promote_types",
    "result_type",
    "long",
    "int",
    "half",
    "float",
    "double",
    "bool",
    # tensors
    "Tensor",
    "Generator",
    "arange",
    "as_tensor",
    "empty",
    "empty_like",
    "from_numpy",
    "full",
    "full_like",
    "manual_seed",
    "ones",
    "ones_like",
    "rand",
    "randn",
    "randint",
    "randperm",
    "multinomial",
    "tensor",
    "zeros",
    "zeros_like",
    "cat",
    "stack",
    "matmul",
    "where",
    "split",
    "chunk",
    "sort",
    "argsort",
    "topk",
    "tril",
    "triu",
    "masked_select",
    "take_along_dim",
    "rand_like",
    "randn_like",
    "linspace",
    "eye",
    "range",
    # torch's legacy tensor types, as constructors (ampcore.legacy)
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "LongTensor",
    "IntTensor",
    "BoolTensor",
    # autograd
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "inference_mode",
    "set_float32_matmul_precision",
    "get_float32_matmul_precision",
    # mixed precision
    "autocast",
    "is_autocast_enabled",
    "get_autocast_dtype",
    "is_autocast_available",
    "custom_fwd",
    "custom_bwd",
    "op",
    "GradScaler",
    "count_host_syncs",
    "compile",
    # devices and backends
    "Device",
    "device",
    "Backend",
    "Capabilities",
    "Availability",
    "BackendUnavailableError",
    "MissingKernelsError",
    "KernelError",
    "PluginLoadError",
    "UnknownBackendError",
    "available_backends",
    "get_backend",
    "get_default_device",
    "register_backend",
    "register_plugin",
    "set_default_device",
    # checkpoints
    "save",
    "load",
    "save_safetensors",
    "load_safetensors",
    "serialization",
    "utils",
    # per-backend device modules (torch.cuda's functions), made from the plugin registry on first access
    "cpu",
    "cuda",
    "opencl",
    # host threads
    "set_num_threads",
    "get_num_threads",
]
# torch's function forms (ampcore.functions): every declared op's with the ``function`` variant, and the methods'.
for _name in functions.function_names():
    _export(_name, functions.TORCH_FUNCTIONS[_name])
functions.on_new_function(_export)
