"""Array-level ops behind the binary cross-entropy losses, with torch's own backward rules.

There is no log1p kernel, so :func:`log1p` builds it from ``log`` and exact
float operations.  Both ops take operands of one (already promoted) dtype.
"""

from __future__ import annotations

from typing import Any

from ...ops.base import Op

LOG_CLAMP = -100.0  # torch clamps BCE's logs here so p = 0 or 1 gives a finite loss
_GRAD_EPS = 1e-12  # torch's floor on p (1 - p) in BCE's backward


def log1p(k: Any, x: Any) -> Any:
    """log(1 + x) for x >= -1, accurate even where 1 + x rounds away most of x (Goldberg's identity).

    With u = fl(1 + x), u - 1 is exact and is the part of x that survived the
    rounding, so log(u) * x / (u - 1) corrects log(u) for what was lost.  Where
    u rounds to 1, log1p(x) = x to working precision.
    """
    u = k.add(x, 1.0)
    lost = k.sub(u, 1.0)
    tiny = k.eq(lost, 0.0)
    return k.where(tiny, x, k.mul(k.log(u), k.div(x, k.where(tiny, 1.0, lost))))


class Log1p(Op):
    """log(1 + x) (see :func:`log1p`); the gradient is g / (1 + x)."""

    name = "log1p"

    def forward(self, ctx, k, x):
        ctx.x = x
        return log1p(k, x)

    def backward(self, ctx, k, g):
        return (k.div(g, k.add(ctx.x, 1.0)),)


class BinaryCrossEntropy(Op):
    """Elementwise -(y max(log p, -100) + (1 - y) max(log1p(-p), -100)), as torch's kernel.

    Backward is torch's rule, not the derivative of the clamp: the input gets
    g (p - y) / max(p (1 - p), 1e-12), so a saturated wrong prediction (p = 0
    with y = 1) still gets a large gradient; the target gets -g logit(p).
    """

    name = "binary_cross_entropy"

    def forward(self, ctx, k, p, y):
        ctx.p, ctx.y = p, y
        log_p = k.maximum(k.log(p), LOG_CLAMP)
        log_q = k.maximum(log1p(k, k.neg(p)), LOG_CLAMP)
        return k.sub(k.mul(k.sub(y, 1.0), log_q), k.mul(y, log_p))

    def backward(self, ctx, k, g):
        p, y = ctx.p, ctx.y
        gp = gy = None
        if ctx.needs_input_grad[0]:
            gp = k.div(k.mul(g, k.sub(p, y)), k.maximum(k.mul(p, k.sub(1.0, p)), _GRAD_EPS))
        if ctx.needs_input_grad[1]:
            gy = k.neg(k.mul(g, k.log(k.div(p, k.sub(1.0, p)))))
        return gp, gy


LOG1P, BINARY_CROSS_ENTROPY = Log1p(), BinaryCrossEntropy()
