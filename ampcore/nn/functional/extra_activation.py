"""More activations from torch's autocast lists: prelu, softplus and softmin.

softplus and softmin compute float16/bfloat16 inputs in float32 and round
once on output (torch's kernels do the same); prelu is one multiply and a
select, which the kernels already round once.
"""

from __future__ import annotations

from typing import Any

from ...dispatch import call, composite
from ...ops import elementwise as ew
from ...tensor import Tensor
from . import _fused
from ._bce_ops import LOG1P
from ._utils import check_float, check_tensor, opmath
from .activation import _on_axis, _softmax_args, softmax_reference

__all__ = ["prelu", "softplus", "softmin"]


@composite("prelu")
def prelu(input: Tensor, weight: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
    """x where x > 0, else weight * x; ``weight`` has 1 element or one per channel (dimension 1).

    As torch: a weight with more than one element needs C = input.shape[1]
    elements (a 1-D input counts as one channel), the weight is at most 1-D,
    and input and weight must share a dtype (no promotion).  Raises TypeError
    for non-float input or differing dtypes, ValueError for a mis-sized weight.
    """
    check_float(input, "input", "prelu")
    check_tensor(weight, "weight", "prelu")
    if weight.dtype != input.dtype:
        raise TypeError(
            f"prelu(): weight dtype {weight.dtype.name} differs from input dtype {input.dtype.name}; "
            "prelu does not promote, so convert one with .to(dtype)"
        )
    if weight.ndim > 1:
        raise ValueError(f"prelu(): weight must be a scalar or 1-D tensor, got shape {weight.shape}")
    n = weight.numel()
    if n != 1:
        channels = input.shape[1] if input.ndim > 1 else 1
        if input.ndim == 0 or n != channels:
            raise ValueError(
                f"prelu(): weight has {n} elements but input of shape {input.shape} has {channels} "
                f"channel(s) (dimension 1); use a weight of 1 or {channels} elements"
            )
    shape = [1] * input.ndim
    if input.ndim > 1:
        shape[1] = n
    w = weight.reshape(tuple(shape))
    return ew.where(input > 0, input, w * input)


@composite("softplus")
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """log(1 + exp(beta x)) / beta, and x itself where beta x > ``threshold`` (torch's linear region).

    Computed as (max(z, 0) + log1p(exp(-|z|))) / beta with z = beta x, so it
    neither overflows (torch's exp(beta x) does for a threshold above ~88 in
    float32) nor loses small values.  Raises TypeError for non-float input.
    """
    check_float(input, "input", "softplus")
    x = opmath(input)
    z = x * beta
    soft = (ew.binary("maximum", z, 0.0) + call(LOG1P, (-z.abs()).exp())) / beta
    return ew.cast(ew.where(z > threshold, x, soft), input.dtype)


@composite("softmin")
def softmin(input: Tensor, dim: int, dtype: Any = None) -> Tensor:  # noqa: A002
    """softmax(-x) along ``dim``; ``dtype`` casts the input first, as in torch.

    Raises TypeError for non-float input and IndexError for a bad ``dim``.
    """
    x, axis = _softmax_args(input, dim, dtype, "softmin")
    neg = -x
    if _fused.has_fused(neg, "softmax"):
        return _on_axis(neg, axis, _fused.fused_softmax)
    return softmax_reference(neg, axis)
