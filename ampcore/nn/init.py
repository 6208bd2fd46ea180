"""Parameter initialisation, in place, with torch.nn.init's names and formulas.

Each function draws from ``ampcore.rand``/``ampcore.randn`` (seeded by
``ampcore.manual_seed`` or an explicit ``generator``) in float32 (float64 for
float64 tensors), scales there, rounds once into the tensor's dtype and rebinds
the tensor's array.  No autograd history is recorded.  They return the tensor.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes as dt
from ..autograd import no_grad
from ..creation import Generator, default_generator, full, rand, randn
from ..creation import tensor as make_tensor
from ..names import missing_names_getattr as _missing_names_getattr
from ..tensor import Tensor

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "constant_",
    "zeros_",
    "ones_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "trunc_normal_",
    "orthogonal_",
    "eye_",
    # torch's deprecated names, each warning FutureWarning and calling the one with ``_``
    "uniform",
    "normal",
    "constant",
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "orthogonal",
]

_LINEAR_GAIN = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "sigmoid",
)


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (torch's table); ValueError for an unknown name."""
    if nonlinearity in _LINEAR_GAIN:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"negative_slope {slope!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(
        f"unsupported nonlinearity {nonlinearity!r}; use one of "
        f"{', '.join(_LINEAR_GAIN + ('tanh', 'relu', 'leaky_relu', 'selu'))}"
    )


def _fan_in_and_fan_out(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError(f"fan in and fan out need a tensor with at least 2 dimensions, got shape {t.shape}")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def _fan(t: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} is not supported; use 'fan_in' or 'fan_out'")
    fan_in, fan_out = _fan_in_and_fan_out(t)
    return fan_in if mode == "fan_in" else fan_out


def _work_dtype(t: Tensor) -> dt.DType:
    if not t.dtype.is_floating_point:
        raise TypeError(f"initialisers need a floating tensor, got {t.dtype.name}")
    return dt.float64 if t.dtype == dt.float64 else dt.float32


def _set(t: Tensor, values: Tensor) -> Tensor:
    """Round ``values`` into ``t``'s dtype and rebind ``t``'s array to them."""
    t._data = values.to(dtype=t.dtype)._data
    return t


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill with samples from U(a, b)."""
    with no_grad():
        u = rand(*tensor.shape, dtype=_work_dtype(tensor), device=tensor.device, generator=generator)
        return _set(tensor, u * (b - a) + a)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill with samples from N(mean, std**2)."""
    with no_grad():
        n = randn(*tensor.shape, dtype=_work_dtype(tensor), device=tensor.device, generator=generator)
        return _set(tensor, n * std + mean)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    tensor._data = full(tensor.shape, val, dtype=tensor.dtype, device=tensor.device)._data
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0 if tensor.dtype.is_floating_point else 0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0 if tensor.dtype.is_floating_point else 1)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Glorot normal: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan); ``a`` is the leaky-ReLU slope."""
    fan = _fan(tensor, mode)
    if fan == 0:
        return tensor  # torch warns and leaves a zero-element tensor alone
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """He normal: N(0, std**2) with std = gain / sqrt(fan)."""
    fan = _fan(tensor, mode)
    if fan == 0:
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def _host_rng(generator: Generator | None) -> np.random.Generator:
    return np.random.default_rng((generator or default_generator).next_seed())


def _set_host(t: Tensor, values: np.ndarray) -> Tensor:
    """Round float64 host ``values`` into ``t``'s dtype on its device and rebind ``t``'s array to them."""
    with no_grad():
        return _set(
            t,
            make_tensor(
                values.reshape(t.shape), dtype=dt.float64 if t.dtype == dt.float64 else dt.float32, device=t.device
            ),
        )


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator | None = None,
) -> Tensor:
    """Fill with N(mean, std**2) samples kept only inside [a, b] (drawn again until they fall there).

    Drawn on the host in float64 from a seed of ``generator`` (the default one when None), then rounded once.
    """
    _work_dtype(tensor)
    if not a < b:
        raise ValueError(f"trunc_normal_: the bounds must satisfy a < b, got a={a}, b={b}")
    rng = _host_rng(generator)
    n = tensor.numel()
    values = rng.normal(mean, std, n)
    outside = (values < a) | (values > b)
    for _ in range(1000):
        if not outside.any():
            break
        values[outside] = rng.normal(mean, std, int(outside.sum()))
        outside = (values < a) | (values > b)
    else:
        raise ValueError(f"trunc_normal_: [a, b] = [{a}, {b}] holds almost none of N({mean}, {std}**2)")
    return _set_host(tensor, values)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix, as torch: the Q of a QR decomposition of a normal matrix, its
    columns' signs fixed by R's diagonal, over ``tensor`` viewed as (rows, numel / rows); times ``gain``."""
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_ needs a tensor with 2 or more dimensions, got shape {tensor.shape}")
    _work_dtype(tensor)
    rows = tensor.shape[0]
    cols = tensor.numel() // rows if rows else 0
    if tensor.numel() == 0:
        return tensor
    flat = _host_rng(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _set_host(tensor, q * gain)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the diagonal, zeros elsewhere)."""
    if tensor.ndim != 2:
        raise ValueError(f"eye_ needs a 2-D tensor, got shape {tensor.shape}")
    return _set_host(tensor, np.eye(tensor.shape[0], tensor.shape[1]))


def _deprecated(new: Callable[..., Tensor]) -> Callable[..., Tensor]:
    old = new.__name__[:-1]

    @functools.wraps(new)
    def alias(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(
            f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.", FutureWarning, stacklevel=2
        )
        return new(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated (as in torch): warns FutureWarning and calls :func:`{new.__name__}`."
    return alias


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)


def default_init_(weight: Tensor, bias: Tensor | None, fan_in: int | None = None) -> None:
    """torch's default for Linear and Conv: kaiming_uniform_(a=sqrt(5)) on the weight, so
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias from the same range."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan = _fan_in_and_fan_out(weight)[0] if fan_in is None else fan_in
        bound = 1.0 / math.sqrt(fan) if fan > 0 else 0.0
        uniform_(bias, -bound, bound)


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
