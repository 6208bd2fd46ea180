"""How to call every op of the built-in autocast policies that ampcore implements, on any device.

``CASES`` maps a policy op name to a call that builds its tensor arguments
from an :class:`Inputs`, so a check can choose the input dtypes (to see what
autocast makes of float32, low-precision or mixed inputs) and the device (the
backend under test).  The conformance suite's autocast check and ampcore's
own autocast-list tests both run these calls; ``tests/test_autocast_lists.py``
holds the table to covering every op a built-in table lists.

``BANNED_CASES`` are the calls some built-in tables ban (kept apart: under
those tables they raise inside a region instead of returning a tensor):
``binary_cross_entropy`` is banned by the ``cuda`` and ``xpu`` tables and runs
in float32 under the ``cpu`` one, as in torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import ampcore
from ampcore import dtypes as dt
from ampcore.nn import functional as F
from ampcore.ops import declare

__all__ = ["Inputs", "CASES", "BANNED_CASES"]


class Inputs:
    """Makes an op's tensors on ``device`` (None: the default device).

    Float tensors: the k-th one is in ``dtypes[k % len(dtypes)]``, values in
    [0.5, 1.5) (positive and away from zero, so log, rsqrt and divisions are
    defined in every dtype).  Class-index tensors (int64) come from
    :meth:`classes` and are on the same device.
    """

    def __init__(self, dtypes: tuple[dt.DType, ...], seed: int = 0, device: Any = None):
        if not dtypes:
            raise ValueError("Inputs needs at least one dtype")
        self.dtypes = tuple(dt.as_dtype(d) for d in dtypes)
        self.device = device
        self.count = 0
        self.rng = np.random.default_rng(seed)

    def _next_dtype(self) -> dt.DType:
        d = self.dtypes[self.count % len(self.dtypes)]
        self.count += 1
        return d

    def __call__(self, *shape: int) -> ampcore.Tensor:
        """A float tensor of ``shape`` with random values in [0.5, 1.5)."""
        return ampcore.tensor(self.rng.uniform(0.5, 1.5, shape), dtype=self._next_dtype(), device=self.device)

    def const(self, values: Any) -> ampcore.Tensor:
        """A float tensor holding ``values`` (targets, labels of +-1)."""
        return ampcore.tensor(np.asarray(values, dtype=np.float64), dtype=self._next_dtype(), device=self.device)

    def classes(self, *values: int) -> ampcore.Tensor:
        """An int64 tensor of class indices (not autocast: it does not take a float dtype)."""
        return ampcore.tensor(np.asarray(values, dtype=np.int64), dtype=dt.int64, device=self.device)


Case = Callable[[Inputs], ampcore.Tensor]

# op -> how to call it; every tensor argument comes from ``t``.
CASES: dict[str, Case] = {
    # lower precision
    "matmul": lambda t: t(3, 4) @ t(4, 5),
    "mm": lambda t: F.mm(t(3, 4), t(4, 5)),
    "bmm": lambda t: F.bmm(t(2, 3, 4), t(2, 4, 5)),
    "addmm": lambda t: F.addmm(t(3, 5), t(3, 4), t(4, 5)),
    "baddbmm": lambda t: F.baddbmm(t(2, 3, 5), t(2, 3, 4), t(2, 4, 5)),
    "linear": lambda t: F.linear(t(3, 4), t(5, 4), t(5)),
    "conv1d": lambda t: F.conv1d(t(2, 3, 8), t(4, 3, 3), t(4)),
    "conv2d": lambda t: F.conv2d(t(2, 3, 6, 6), t(4, 3, 3, 3), t(4)),
    "prelu": lambda t: F.prelu(t(2, 3, 4), t(3)),
    "scaled_dot_product_attention": lambda t: F.scaled_dot_product_attention(t(2, 4, 8), t(2, 4, 8), t(2, 4, 8)),
    # float32
    "__rtruediv__": lambda t: 1.0 / t(3, 4),
    "__rpow__": lambda t: 2.0 ** t(3, 4),
    "pow": lambda t: t(3, 4) ** 2.0,
    "exp": lambda t: t(3, 4).exp(),
    "log": lambda t: t(3, 4).log(),
    "rsqrt": lambda t: t(3, 4).rsqrt(),
    "sum": lambda t: t(3, 4).sum(),
    "cumsum": lambda t: t(3, 4).cumsum(1),
    "softmax": lambda t: F.softmax(t(3, 4), 1),
    "log_softmax": lambda t: F.log_softmax(t(3, 4), 1),
    "softmin": lambda t: F.softmin(t(3, 4), 1),
    "softplus": lambda t: F.softplus(t(3, 4)),
    "layer_norm": lambda t: F.layer_norm(t(3, 4), (4,), t(4), t(4)),
    "group_norm": lambda t: F.group_norm(t(2, 4, 3), 2, t(4), t(4)),
    "normalize": lambda t: F.normalize(t(3, 4)),
    "cosine_similarity": lambda t: F.cosine_similarity(t(3, 4), t(3, 4)),
    "cross_entropy": lambda t: F.cross_entropy(t(3, 4), t.classes(0, 3, 1)),
    "nll_loss": lambda t: F.nll_loss(t(3, 4), t.classes(0, 3, 1)),
    "mse_loss": lambda t: F.mse_loss(t(3, 4), t(3, 4)),
    "l1_loss": lambda t: F.l1_loss(t(3, 4), t(3, 4)),
    "smooth_l1_loss": lambda t: F.smooth_l1_loss(t(3, 4), t(3, 4)),
    "huber_loss": lambda t: F.huber_loss(t(3, 4), t(3, 4)),
    "kl_div": lambda t: F.kl_div(t(3, 4), t(3, 4), reduction="batchmean"),
    "binary_cross_entropy_with_logits": lambda t: F.binary_cross_entropy_with_logits(t(3, 4), t.const(np.eye(3, 4))),
    "margin_ranking_loss": lambda t: F.margin_ranking_loss(t(5), t(5), t.const([1, -1, 1, 1, -1])),
    "soft_margin_loss": lambda t: F.soft_margin_loss(t(5), t.const([1, -1, 1, 1, -1])),
    "hinge_embedding_loss": lambda t: F.hinge_embedding_loss(t(5), t.const([1, -1, 1, 1, -1])),
    "poisson_nll_loss": lambda t: F.poisson_nll_loss(t(3, 4), t(3, 4)),
    "cosine_embedding_loss": lambda t: F.cosine_embedding_loss(t(3, 4), t(3, 4), t.const([1, -1, 1])),
    "triplet_margin_loss": lambda t: F.triplet_margin_loss(t(3, 4), t(3, 4), t(3, 4)),
    # widest input type
    "cat": lambda t: ampcore.cat([t(2, 3), t(1, 3)]),
    "stack": lambda t: ampcore.stack([t(2, 3), t(2, 3)]),
    "addcmul": lambda t: F.addcmul(t(3, 4), t(3, 4), t(3, 4), value=0.5),
    "addcdiv": lambda t: F.addcdiv(t(3, 4), t(3, 4), t(3, 4), value=0.5),
    "dot": lambda t: F.dot(t(5), t(5)),
    "tensordot": lambda t: F.tensordot(t(2, 3, 4), t(3, 4, 5), dims=2),
    "bilinear": lambda t: F.bilinear(t(3, 4), t(3, 5), t(2, 4, 5), t(2)),
}


def _declared_call(name: str) -> Case:
    """A declared elementwise op's call: its function form on (3, 4) tensors (a bool operand: a fixed mask)."""
    decl = declare.get(name)
    assert decl is not None and decl.program is not None
    kinds = decl.program.inputs

    def call(t: Inputs) -> ampcore.Tensor:
        mask = ampcore.tensor(np.eye(3, 4, dtype=np.bool_), device=t.device)
        return decl.function(*(mask if kind == "b" else t(3, 4) for kind in kinds))

    return call


def _example_call(name: str) -> Case:
    """A declared composite op's call: its example's inputs (floats from ``t``) and params."""
    decl = declare.get(name)
    assert decl is not None and decl.example is not None
    ex = decl.example

    def call(t: Inputs) -> ampcore.Tensor:
        args = []
        for i in ex.inputs:
            if i.kind == "float":
                args.append(t(*i.shape))
            elif i.kind == "int64":
                values = np.arange(int(np.prod(i.shape)), dtype=np.int64).reshape(i.shape) % i.high
                args.append(ampcore.tensor(values, dtype=dt.int64, device=t.device))  # made whole: no op to trace
            else:
                args.append(ampcore.tensor(np.arange(int(np.prod(i.shape))).reshape(i.shape) % 2 == 0, device=t.device))
        return ex.run(decl.function, *args)

    return call


# Every declared op (ampcore/ops/decls) not written out above: elementwise ops of a float result (comparisons give
# bool whatever autocast does: nothing to check), and composites with an example; a new op's routing is checked
# as declared.
for _name, _decl in declare.declarations().items():
    if _name in CASES:
        continue
    if _decl.program is not None and _decl.program.result == "T":
        CASES[_name] = _declared_call(_name)
    elif _decl.kind == "composite" and _decl.example is not None and _decl.differentiable:
        CASES[_name] = _example_call(_name)  # (a non-differentiable one gives bool or indices: nothing to route)

# op -> a call that autocast must refuse (probabilities in (0, 1), so only the ban can make it fail).
BANNED_CASES: dict[str, Case] = {
    "binary_cross_entropy": lambda t: F.binary_cross_entropy(t.const(np.full((3, 4), 0.25)), t.const(np.eye(3, 4))),
}
