"""ampcore: Automatic Mixed Precision with torch.amp semantics on any backend."""

from . import cgen, dtypes, kernels, plugins
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .backend import Availability, Backend, BackendUnavailableError, Capabilities

# Before creation's names: importing the submodule ampcore.tensor binds it as ampcore.tensor, which the
# function ampcore.tensor must then replace.
from .tensor import Tensor  # isort: skip
from . import amp, autograd, nn, optim, policy
from .amp import autocast, custom_bwd, custom_fwd, get_autocast_dtype, is_autocast_available, is_autocast_enabled, op
from .creation import (
    Generator,
    arange,
    as_tensor,
    empty,
    empty_like,
    from_numpy,
    full,
    full_like,
    manual_seed,
    ones,
    ones_like,
    rand,
    randn,
    tensor,
    zeros,
    zeros_like,
)
from .device import Device
from .device import parse_device as device
from .dispatch import KernelError
from .dtypes import DType, bfloat16, bool_, finfo, float16, float32, float64, int32, int64, promote_types, result_type
from .grad_scaler import GradScaler
from .kernels import MissingKernelsError
from .ops import cat, matmul, stack, where
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
from .syncs import count_host_syncs

__version__ = "0.1.0"

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
    # dtypes
    "DType",
    "bfloat16",
    "bool_",
    "finfo",
    "float16",
    "float32",
    "float64",
    "int32",
    "int64",
    "promote_types",
    "result_type",
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
    "tensor",
    "zeros",
    "zeros_like",
    "cat",
    "stack",
    "matmul",
    "where",
    # autograd
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
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
    # host threads
    "set_num_threads",
    "get_num_threads",
]
