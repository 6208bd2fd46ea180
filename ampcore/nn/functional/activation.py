"""Activations: relu, silu, gelu, softmax and log_softmax.

softmax, log_softmax and gelu run the backend's fused kernels when it has
them (:mod:`._fused`), and otherwise the ``*_reference`` compositions below.
Both compute float16/bfloat16 inputs in float32 and round once on output, so
the two routes agree to within one rounding of the input dtype.
"""

from __future__ import annotations

import math
from typing import Any

from ... import dtypes as dt
from ...dispatch import composite, register_op
from ...ops import elementwise as ew
from ...ops.reduction import normalize_axes
from ...tensor import Tensor
from . import _fused
from ._utils import check_float, opmath

__all__ = [
    "relu",
    "silu",
    "gelu",
    "softmax",
    "log_softmax",
    "gelu_reference",
    "softmax_reference",
    "log_softmax_reference",
]

GELU_APPROXIMATIONS = ("none", "tanh")
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002 - torch's argument name
    """max(x, 0) (the primitive relu op): the gradient at 0 is 0 and NaN propagates, as in torch.

    ``inplace=True`` makes ``input`` hold the result (its history continues through relu, as in
    torch); RuntimeError for a leaf that requires grad.
    """
    return input._rebase(ew.relu, "relu_") if inplace else ew.relu(input)


@composite("silu")
def silu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """x * sigmoid(x) (also called swish)."""
    check_float(input, "input", "silu")
    return input._rebase(_silu, "silu_") if inplace else _silu(input)


@composite("gelu")
def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002
    """Gaussian error linear unit: x * Phi(x), or its tanh approximation with ``approximate="tanh"``.

    Raises ValueError for another ``approximate``, TypeError for non-float input.
    """
    _check_approximate(approximate)
    check_float(input, "input", "gelu")
    if _fused.has_fused(input, "gelu"):
        return _fused.fused_gelu(input, approximate)
    return gelu_reference(input, approximate)


@composite("softmax")
def softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:  # noqa: A002
    """exp(x) / sum(exp(x)) along ``dim``, computed stably (the maximum is subtracted first).

    ``dtype`` casts the input first, as in torch.  Raises TypeError for
    non-float input and IndexError for a bad ``dim``.
    """
    x, axis = _softmax_args(input, dim, dtype, "softmax")
    if _fused.has_fused(x, "softmax"):
        return _on_axis(x, axis, _fused.fused_softmax)
    return softmax_reference(x, axis)


@composite("log_softmax")
def log_softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:  # noqa: A002
    """log(softmax(x)) along ``dim``, computed as (x - max) - log(sum(exp(x - max))).

    Raises TypeError for non-float input and IndexError for a bad ``dim``.
    """
    x, axis = _softmax_args(input, dim, dtype, "log_softmax")
    if _fused.has_fused(x, "log_softmax"):
        return _on_axis(x, axis, _fused.fused_log_softmax)
    return log_softmax_reference(x, axis)


# --------------------------------------------------------------------------- reference compositions
def softmax_reference(x: Tensor, dim: int) -> Tensor:
    """softmax as a composition of primitives (the route for backends without the fused kernel)."""
    z = _shifted(opmath(x), dim)
    e = z.exp()
    return ew.cast(e / e.sum(dim, keepdim=True), x.dtype)


def log_softmax_reference(x: Tensor, dim: int) -> Tensor:
    """log_softmax as a composition of primitives."""
    z = _shifted(opmath(x), dim)
    return ew.cast(z - z.exp().sum(dim, keepdim=True).log(), x.dtype)


def gelu_reference(x: Tensor, approximate: str = "none") -> Tensor:
    """gelu as a composition of primitives: 0.5 x (1 + erf(x / sqrt 2)), or the tanh form."""
    _check_approximate(approximate)
    v = opmath(x)
    if approximate == "tanh":
        inner = (v + v * v * v * 0.044715) * _SQRT_2_OVER_PI
        out = v * (inner.tanh() + 1.0) * 0.5
    else:
        out = v * ((v * (1.0 / math.sqrt(2.0))).erf() + 1.0) * 0.5
    return ew.cast(out, x.dtype)


# --------------------------------------------------------------------------- helpers
def _shifted(x: Tensor, dim: int) -> Tensor:
    # Softmax is shift-invariant, so the max needs no gradient; detaching it
    # also keeps tied maxima out of the backward.
    if x.ndim == 0:
        return x - x.detach()
    return x - x.detach().amax(dim, keepdim=True)


def _softmax_args(x: Tensor, dim: Any, dtype: Any, op: str) -> tuple[Tensor, int]:
    if dtype is not None:
        x = ew.cast(x, dt.as_dtype(dtype))
    check_float(x, "input", op)
    if dim is None:
        raise ValueError(f"{op}() needs an explicit dim, e.g. {op}(x, dim=-1)")
    if x.ndim == 0:
        normalize_axes(dim, 0)  # validates dim against a 0-d tensor (0 and -1 are allowed)
        return x, 0
    (axis,) = normalize_axes(dim, x.ndim)
    return x, axis


def _on_axis(x: Tensor, axis: int, fn: Any) -> Tensor:
    """Run a fused kernel on ``x`` along ``axis``; 0-d tensors go through as 1-element vectors."""
    if x.ndim == 0:
        return fn(x.reshape(1), 0).reshape(())
    return fn(x, axis)


def _check_approximate(approximate: str) -> None:
    if approximate not in GELU_APPROXIMATIONS:
        valid = ", ".join(repr(a) for a in GELU_APPROXIMATIONS)
        raise ValueError(f"gelu(): unknown approximate {approximate!r}; valid values are {valid}")


def _silu(x: Tensor) -> Tensor:
    return x * x.sigmoid()


for _name in ("relu_", "silu_"):
    register_op(_name, "in-place")


# Tensor sits below nn, so the layer that owns softmax gives Tensor its softmax/log_softmax methods.
Tensor.softmax = softmax
Tensor.log_softmax = log_softmax
