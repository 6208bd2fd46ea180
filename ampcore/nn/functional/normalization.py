"""Normalisation: layer_norm, group_norm, batch_norm, instance_norm.

float16/bfloat16 inputs are normalised in float32 and the result rounded
once to the input dtype: what torch's kernels do internally, and it keeps
x**2 from overflowing float16.  The output keeps the input dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...autograd import no_grad
from ...dispatch import composite
from ...ops import elementwise as ew
from ...ops.declare import Example, Input
from ...ops.declare import composite as declared
from ...tensor import Tensor
from ._utils import check_float, check_tensor, opmath

__all__ = ["layer_norm", "group_norm", "batch_norm", "instance_norm"]


@composite("layer_norm")
def layer_norm(
    input: Tensor,  # noqa: A002 - torch's argument name
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dimensions (biased variance), then scale and shift.

    Raises ValueError if the input's trailing shape is not ``normalized_shape``
    or weight/bias do not have that shape.
    """
    check_float(input, "input", "layer_norm")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or len(shape) > input.ndim or input.shape[input.ndim - len(shape) :] != shape:
        raise ValueError(f"layer_norm(): input of shape {input.shape} does not end in normalized_shape {shape}")
    _check_param_shape("layer_norm", "weight", weight, shape)
    _check_param_shape("layer_norm", "bias", bias, shape)
    axes = tuple(range(input.ndim - len(shape), input.ndim))
    out = _normalize(opmath(input), axes, eps)
    return ew.cast(_affine(out, weight, bias, shape), input.dtype)


@composite("group_norm")
def group_norm(
    input: Tensor,  # noqa: A002 - torch's argument name
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise (N, C, *) input over each group of C / num_groups channels (and all spatial positions).

    Raises ValueError if C is not divisible by ``num_groups`` or weight/bias are not shaped (C,).
    """
    check_float(input, "input", "group_norm")
    if input.ndim < 2:
        raise ValueError(f"group_norm() needs an (N, C, *) input, got shape {input.shape}")
    n, c = input.shape[:2]
    if not isinstance(num_groups, int) or num_groups < 1 or c % num_groups:
        raise ValueError(
            f"group_norm(): {c} channels (input shape {input.shape}) are not divisible into num_groups={num_groups!r}"
        )
    stat = _channel_shape(input)
    _check_param_shape("group_norm", "weight", weight, (c,))
    _check_param_shape("group_norm", "bias", bias, (c,))
    per_group = (c // num_groups) * math.prod(input.shape[2:])  # explicit: -1 is ambiguous for an empty batch
    grouped = opmath(input).reshape(n, num_groups, per_group)
    out = _normalize(grouped, (2,), eps).reshape(input.shape)
    return ew.cast(_affine(out, weight, bias, stat), input.dtype)


@composite("batch_norm")
def batch_norm(
    input: Tensor,  # noqa: A002 - torch's argument name
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise (N, C, *) input per channel.

    Training: batch mean and biased variance; if given, the running stats are
    updated in place (without gradient, in their own dtype — float32 for a
    bf16 model) as ``running = (1 - momentum) * running + momentum * batch``,
    with the *unbiased* batch variance, as torch does.  Evaluation: the
    running stats are used.  An empty batch gives an empty output and leaves
    the running stats alone.  Raises ValueError for missing running stats in
    evaluation, mis-shaped stats/parameters, or exactly one value per channel
    in training.
    """
    check_float(input, "input", "batch_norm")
    if input.ndim < 2:
        raise ValueError(f"batch_norm() needs an (N, C, *) input, got shape {input.shape}")
    stat = _check_channel_params("batch_norm", input, running_mean, running_var, weight, bias)
    axes = tuple(i for i in range(input.ndim) if i != 1)
    x = opmath(input)
    if training:
        out = _normalize(x, axes, eps, running=(running_mean, running_var, momentum))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm(): running_mean and running_var are needed when training=False")
        out = _normalize_by_running(x, running_mean, running_var, eps, stat)
    return ew.cast(_affine(out, weight, bias, stat), input.dtype)


def _normalize(x: Tensor, axes: tuple[int, ...], eps: float, running: tuple[Any, Any, float] | None = None) -> Tensor:
    """(x - mean) / sqrt(var + eps) over ``axes``, with the biased variance; optionally update running stats."""
    mean = x.mean(axes, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(axes, keepdim=True)
    if running is not None:
        _update_running(mean, var, x.numel() // mean.numel(), *running)
    return centered * (var + eps).rsqrt()


def _update_running(
    mean: Tensor, var: Tensor, count: int, running_mean: Any, running_var: Any, momentum: float
) -> None:
    if count == 1:
        raise ValueError(f"batch_norm(): expected more than 1 value per channel when training, got {count}")
    if count == 0:
        return  # an empty batch has no statistics; torch leaves the running ones as they are
    with no_grad():
        if running_mean is not None:
            batch = ew.cast(mean.detach().reshape(-1), running_mean.dtype)
            running_mean.copy_(running_mean * (1.0 - momentum) + batch * momentum)
        if running_var is not None:
            unbiased = ew.cast(var.detach().reshape(-1), running_var.dtype) * (count / (count - 1))
            running_var.copy_(running_var * (1.0 - momentum) + unbiased * momentum)


def _affine(x: Tensor, weight: Tensor | None, bias: Tensor | None, shape: tuple[int, ...]) -> Tensor:
    if weight is not None:
        x = x * weight.reshape(shape)
    if bias is not None:
        x = x + bias.reshape(shape)
    return x


def _channel_shape(x: Tensor) -> tuple[int, ...]:
    """(1, C, 1, ..., 1): per-channel parameters broadcast against (N, C, *)."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _check_channel_params(
    op: str, x: Tensor, running_mean: Any, running_var: Any, weight: Any, bias: Any
) -> tuple[int, ...]:
    """Each given per-channel tensor must be (C,); returns the shape they broadcast in, (1, C, 1, ..., 1)."""
    c = x.shape[1]
    for name, value in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        _check_param_shape(op, name, value, (c,))
    return _channel_shape(x)


def _normalize_by_running(
    x: Tensor, running_mean: Tensor, running_var: Tensor, eps: float, stat: tuple[int, ...]
) -> Tensor:
    """(x - running_mean) / sqrt(running_var + eps), the stats cast to x's dtype."""
    mean = ew.cast(running_mean, x.dtype).reshape(stat)
    var = ew.cast(running_var, x.dtype).reshape(stat)
    return (x - mean) * (var + eps).rsqrt()


def _check_param_shape(op: str, name: str, value: Any, shape: tuple[int, ...]) -> None:
    if value is not None and check_tensor(value, name, op).shape != shape:
        raise ValueError(f"{op}(): {name} of shape {value.shape} does not match the expected shape {shape}")


@declared(
    "instance_norm",
    variants=("function",),
    signature=(
        "instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, "
        "momentum=0.1, eps=1e-05) -> Tensor"
    ),
    torch_function="nn.functional.instance_norm",
    example=Example(
        (Input((2, 3, 4, 5)), Input((3,)), Input((3,))),
        n=20,
        n_grad=(20, 40, 40),
        call=lambda op, x, w, b: op(x, weight=w, bias=b),
    ),
    reference=lambda x, w, b: _instance_norm_reference(x, w, b),
)
def instance_norm(
    input: Tensor,  # noqa: A002 - torch's argument name
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise each (sample, channel) of (N, C, *) input over its own spatial elements (biased variance), then
    scale and shift per channel (torch.nn.functional.instance_norm).  With ``use_input_stats`` the running stats,
    if given, move toward the batch's average instance statistics (unbiased variance) as batch_norm's do;
    without it they normalise instead.  ValueError for mis-shaped parameters or a single spatial element."""
    check_float(input, "input", "instance_norm")
    if input.ndim < 3:
        raise ValueError(f"instance_norm() needs an (N, C, *) input with spatial dimensions, got shape {input.shape}")
    stat = _check_channel_params("instance_norm", input, running_mean, running_var, weight, bias)
    axes = tuple(range(2, input.ndim))
    x = opmath(input)
    if use_input_stats:
        mean = x.mean(axes, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(axes, keepdim=True)
        count = x.numel() // mean.numel() if mean.numel() else 0
        if count == 1:
            raise ValueError(
                f"instance_norm(): expected more than 1 spatial element per channel, got shape {input.shape}"
            )
        if running_mean is not None or running_var is not None:
            _update_running(mean.mean(0), var.mean(0), count, running_mean, running_var, momentum)
        out = centered * (var + eps).rsqrt()
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm(): running_mean and running_var are needed when use_input_stats=False")
        out = _normalize_by_running(x, running_mean, running_var, eps, stat)
    return ew.cast(_affine(out, weight, bias, stat), input.dtype)


def _instance_norm_reference(x: Any, w: Any, b: Any) -> Any:
    axes = tuple(range(2, x.ndim))
    mean = x.mean(axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axes, keepdims=True)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean) / (var + 1e-5) ** 0.5 * w.reshape(shape) + b.reshape(shape)
