"""Ops that run a backend's optional fused kernels (softmax, log-softmax, GELU).

Each forward is one kernel call and each backward one more; the public
functions use them only when ``x._backend.kernels.has(name)``, and otherwise
fall back to the reference composition of primitives in :mod:`.activation`.
"""

from __future__ import annotations

from ...dispatch import call
from ...ops.base import Op
from ...tensor import Tensor


class Softmax(Op):
    name = "softmax"

    def forward(self, ctx, k, x, *, axis):
        y = k.softmax(x, axis)
        ctx.y, ctx.axis = y, axis
        return y

    def backward(self, ctx, k, g):
        return (k.softmax_backward(ctx.y, g, ctx.axis),)


class LogSoftmax(Op):
    name = "log_softmax"

    def forward(self, ctx, k, x, *, axis):
        y = k.log_softmax(x, axis)
        ctx.y, ctx.axis = y, axis
        return y

    def backward(self, ctx, k, g):
        return (k.log_softmax_backward(ctx.y, g, ctx.axis),)


class Gelu(Op):
    name = "gelu"

    def forward(self, ctx, k, x, *, approximate):
        ctx.x, ctx.approximate = x, approximate
        return k.gelu(x, approximate)

    def backward(self, ctx, k, g):
        return (k.gelu_backward(ctx.x, g, ctx.approximate),)


SOFTMAX, LOG_SOFTMAX, GELU = Softmax(), LogSoftmax(), Gelu()


def has_fused(x: Tensor, name: str) -> bool:
    """Whether ``x``'s backend implements the fused kernel ``name``."""
    return bool(x._backend.kernels.has(name))


def fused_softmax(x: Tensor, axis: int) -> Tensor:
    return call(SOFTMAX, x, axis=axis)


def fused_log_softmax(x: Tensor, axis: int) -> Tensor:
    return call(LOG_SOFTMAX, x, axis=axis)


def fused_gelu(x: Tensor, approximate: str) -> Tensor:
    return call(GELU, x, approximate=approximate)
