"""Every op of torch's autocast lists that ampcore implements, run inside autocast on the CPU backend
(like PyTorch's AutocastTestLists): the output dtype for bfloat16 and float16, for the CPU table and
the CUDA table; and (hypothesis) the decision depends only on (op, input dtypes, autocast state)."""

from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ampcore
from ampcore import amp
from ampcore import dtypes as dt
from ampcore import policy as P
from ampcore.dispatch import registered_ops
from ampcore.nn import functional as F

bf16, f16, f32, f64 = dt.bfloat16, dt.float16, dt.float32, dt.float64


class Inputs:
    """Makes an op's float tensors: the k-th one in ``dtypes[k % len(dtypes)]``, values in [0.5, 1.5)."""

    def __init__(self, dtypes: tuple[dt.DType, ...], seed: int = 0):
        self.dtypes = dtypes
        self.count = 0
        self.rng = np.random.default_rng(seed)

    def _next_dtype(self) -> dt.DType:
        d = self.dtypes[self.count % len(self.dtypes)]
        self.count += 1
        return d

    def __call__(self, *shape: int) -> ampcore.Tensor:
        return ampcore.tensor(self.rng.uniform(0.5, 1.5, shape), dtype=self._next_dtype())

    def const(self, values: Any) -> ampcore.Tensor:
        return ampcore.tensor(np.asarray(values, dtype=np.float64), dtype=self._next_dtype())


def classes(*values: int) -> ampcore.Tensor:
    return ampcore.tensor(list(values))


# op -> how to call it; every tensor argument comes from ``t``.
CASES: dict[str, Callable[[Inputs], ampcore.Tensor]] = {
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
    "cross_entropy": lambda t: F.cross_entropy(t(3, 4), classes(0, 3, 1)),
    "nll_loss": lambda t: F.nll_loss(t(3, 4), classes(0, 3, 1)),
    "mse_loss": lambda t: F.mse_loss(t(3, 4), t(3, 4)),
    "l1_loss": lambda t: F.l1_loss(t(3, 4), t(3, 4)),
    "smooth_l1_loss": lambda t: F.smooth_l1_loss(t(3, 4), t(3, 4)),
    "huber_loss": lambda t: F.huber_loss(t(3, 4), t(3, 4)),
    "kl_div": lambda t: F.kl_div(t(3, 4), t(3, 4), reduction="batchmean"),
    "binary_cross_entropy_with_logits": lambda t: F.binary_cross_entropy_with_logits(t(3, 4), t.const(
        np.eye(3, 4))),
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

TABLES = ("cpu", "cuda")
LOW = (bf16, f16)


def listed_ops(table: str) -> list[tuple[str, P.Category]]:
    """(op, category) for every op ``table`` lists that ampcore implements (BANNED ones excepted)."""
    policy = P.builtin(table)
    return sorted((op, e.category) for op, e in policy.entries.items()
                  if op in registered_ops() and e.category is not P.BANNED)


@pytest.mark.parametrize("table", TABLES)
def test_every_listed_op_ampcore_implements_has_a_case(table):
    missing = [op for op, _ in listed_ops(table) if op not in CASES]
    assert missing == [], "add a call for each to CASES"
    assert len(listed_ops(table)) >= (18 if table == "cpu" else 40)


def _run(op: str, dtypes: tuple[dt.DType, ...], autocast_dtype: dt.DType, table: str, seed: int = 0) -> Any:
    with ampcore.autocast("cpu", dtype=autocast_dtype, policy=P.builtin(table), trace=True) as region:
        out = CASES[op](Inputs(dtypes, seed))
    return out, region.trace


CATEGORY_CASES = [(table, op, category, low) for table in TABLES for op, category in listed_ops(table)
                  for low in LOW]


@pytest.mark.parametrize("table, op, category, low", CATEGORY_CASES,
                         ids=[f"{t}-{o}-{d.name}" for t, o, _, d in CATEGORY_CASES])
def test_listed_op_output_dtype(table, op, category, low):
    if category is P.LOWER:
        out, trace = _run(op, (f32,), low, table)
        assert out.dtype == low
    elif category is P.FP32:
        for inputs in ((low,), (f32,)):
            out, trace = _run(op, inputs, low, table)
            assert out.dtype == f32, f"{op} on {inputs[0].name} inputs"
    else:  # PROMOTE: all low-precision stays there; any float32 input makes it float32
        out, trace = _run(op, (low,), low, table)
        assert out.dtype == low
        out, trace = _run(op, (low, f32), low, table)
        assert out.dtype == f32
    assert trace[0].op == op and trace[0].category == category.value


# --------------------------------------------------------------------------- decisions are pure
DTYPE_CHOICES = (f32, bf16, f16, f64)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(sorted(CASES)), dtypes=st.lists(st.sampled_from(DTYPE_CHOICES), min_size=1, max_size=3),
       autocast_dtype=st.sampled_from(LOW), table=st.sampled_from(TABLES), enabled=st.booleans(),
       seeds=st.tuples(st.integers(0, 2 ** 16), st.integers(0, 2 ** 16)))
def test_decision_depends_only_on_op_input_dtypes_and_state(op, dtypes, autocast_dtype, table, enabled, seeds):
    """Two runs with different values agree on the decision and output dtype, and the router's
    decision is exactly what the pure ``decide`` function says for (op, input dtypes, state)."""
    results = []
    for seed in seeds:
        with ampcore.autocast("cpu", dtype=autocast_dtype, policy=P.builtin(table), trace=True,
                              enabled=enabled) as region:
            try:
                out = CASES[op](Inputs(tuple(dtypes), seed))
                results.append(("ok", out.dtype, region.trace[0]))
            except (TypeError, ValueError) as exc:  # a dtype mix the op refuses: refused the same way
                results.append(("error", type(exc), str(exc)))
    assert results[0] == results[1]
    if results[0][0] != "ok" or not enabled:
        return
    record = results[0][2]
    input_dtypes = [dt.as_dtype(d) for d in record.input_dtypes]
    expected = amp.decide(P.builtin(table), op, input_dtypes, autocast_dtype)
    assert (record.category, record.cast_to, record.reason) == \
        (expected.category.value, expected.target.name if expected.target else None, expected.reason)


def test_trace_decisions_are_memoised_per_region_without_changing_them():
    with ampcore.autocast("cpu", trace=True) as region:
        for _ in range(3):
            CASES["linear"](Inputs((f32,)))
    assert len({(r.cast_to, r.reason) for r in region.trace if r.op == "linear"}) == 1
    assert list(itertools.islice((r.op for r in region.trace), 3)) == ["linear"] * 3
