"""The array-level op behind the binary cross-entropy loss, with torch's own backward rule.

The op takes operands of one (already promoted) dtype; its log(1 - p) is the declared ``log1p``'s kernel.
"""

from __future__ import annotations

from ...ops import elementwise as ew
from ...ops.base import Op

LOG_CLAMP = -100.0  # torch clamps BCE's logs here so p = 0 or 1 gives a finite loss
_GRAD_EPS = 1e-12  # torch's floor on p (1 - p) in BCE's backward


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
        log_q = k.maximum(k.log1p(k.neg(p)), LOG_CLAMP)
        return k.sub(k.mul(k.sub(y, 1.0), log_q), k.mul(y, log_p))

    def backward(self, ctx, k, g):
        p, y = ctx.p, ctx.y
        gp = gy = None
        if ctx.needs_input_grad[0]:
            gp = k.div(k.mul(g, k.sub(p, y)), k.maximum(k.mul(p, k.sub(1.0, p)), _GRAD_EPS))
        if ctx.needs_input_grad[1]:
            gy = k.neg(k.mul(g, k.log(k.div(p, k.sub(1.0, p)))))
        return gp, gy


BINARY_CROSS_ENTROPY = BinaryCrossEntropy()
LOG1P = ew.OPS["log1p"]  # the declared op (ampcore/ops/decls/math.py): the losses' log1p(exp(-|z|))
