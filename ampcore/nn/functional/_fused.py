"""Ops that run a backend's optional fused kernels (softmax, log-softmax, GELU).

Each forward is one kernel call and each backward one more; the public
functions use them only when ``x._backend.kernels.has(name)``, and otherwise
fall back to the reference composition of primitives in :mod:`.activation`.
"""

from __future__ import annotations

from ...dispatch import call
from ...ops.base import Op
from ...tensor import Tensor


class _NormalizedExp(Op):
    """softmax / log_softmax: the backward needs only the output, so the forward saves it."""

    def __init__(self, name: str):
        self.name = name
        self._backward_name = f"{name}_backward"

    def forward(self, ctx, k, x, *, axis):
        y = getattr(k, self.name)(x, axis)
        ctx.y, ctx.axis = y, axis
        return y

    def backward(self, ctx, k, g):
        return (getattr(k, self._backward_name)(ctx.y, g, ctx.axis),)


class Gelu(Op):
    name = "gelu"

    def forward(self, ctx, k, x, *, approximate):
        ctx.x, ctx.approximate = x, approximate
        return k.gelu(x, approximate)

    def backward(self, ctx, k, g):
        return (k.gelu_backward(ctx.x, g, ctx.approximate),)


SOFTMAX, LOG_SOFTMAX, GELU = _NormalizedExp("softmax"), _NormalizedExp("log_softmax"), Gelu()


def has_fused(x: Tensor, name: str) -> bool:
    """Whether ``x``'s backend implements the fused kernel ``name``."""
    return bool(x._backend.kernels.has(name))


def fused_softmax(x: Tensor, axis: int) -> Tensor:
    return call(SOFTMAX, x, axis=axis)


def fused_log_softmax(x: Tensor, axis: int) -> Tensor:
    return call(LOG_SOFTMAX, x, axis=axis)


def fused_gelu(x: Tensor, approximate: str) -> Tensor:
    return call(GELU, x, approximate=approximate)
