"""Every op of torch's autocast lists that ampcore implements, run inside autocast on the CPU backend
(like PyTorch's AutocastTestLists): the output dtype for bfloat16 and float16, for the CPU table and
the CUDA table; and (hypothesis) the decision depends only on (op, input dtypes, autocast state).

The op calls (``CASES``) live in :mod:`ampcore.conformance.op_cases`, shared with the conformance
suite's autocast check, which runs them on any backend's device."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ampcore
from ampcore import amp
from ampcore import dtypes as dt
from ampcore import policy as P
from ampcore.conformance.op_cases import BANNED_CASES, CASES, Inputs
from ampcore.dispatch import registered_ops

bf16, f16, f32, f64 = dt.bfloat16, dt.float16, dt.float32, dt.float64

TABLES = ("cpu", "cuda")
CALLS = {**CASES, **BANNED_CASES}  # binary_cross_entropy: banned in the cuda table, float32 in the cpu one
LOW = (bf16, f16)


def listed_ops(table: str) -> list[tuple[str, P.Category]]:
    """(op, category) for every op ``table`` lists that ampcore implements (BANNED ones excepted)."""
    policy = P.builtin(table)
    return sorted(
        (op, e.category) for op, e in policy.entries.items() if op in registered_ops() and e.category is not P.BANNED
    )


@pytest.mark.parametrize("table", TABLES)
def test_every_listed_op_ampcore_implements_has_a_case(table):
    missing = [op for op, _ in listed_ops(table) if op not in CALLS]
    assert missing == [], "add a call for each to CASES"
    assert len(listed_ops(table)) >= (18 if table == "cpu" else 40)


def _run(op: str, dtypes: tuple[dt.DType, ...], autocast_dtype: dt.DType, table: str, seed: int = 0) -> Any:
    with ampcore.autocast("cpu", dtype=autocast_dtype, policy=P.builtin(table), trace=True) as region:
        out = CALLS[op](Inputs(dtypes, seed))
    return out, region.trace


CATEGORY_CASES = [(table, op, category, low) for table in TABLES for op, category in listed_ops(table) for low in LOW]


@pytest.mark.parametrize(
    "table, op, category, low", CATEGORY_CASES, ids=[f"{t}-{o}-{d.name}" for t, o, _, d in CATEGORY_CASES]
)
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
@given(
    op=st.sampled_from(sorted(CASES)),
    dtypes=st.lists(st.sampled_from(DTYPE_CHOICES), min_size=1, max_size=3),
    autocast_dtype=st.sampled_from(LOW),
    table=st.sampled_from(TABLES),
    enabled=st.booleans(),
    seeds=st.tuples(st.integers(0, 2**16), st.integers(0, 2**16)),
)
def test_decision_depends_only_on_op_input_dtypes_and_state(op, dtypes, autocast_dtype, table, enabled, seeds):
    """Two runs with different values agree on the decision and output dtype, and the router's
    decision is exactly what the pure ``decide`` function says for (op, input dtypes, state)."""
    results = []
    for seed in seeds:
        with ampcore.autocast(
            "cpu", dtype=autocast_dtype, policy=P.builtin(table), trace=True, enabled=enabled
        ) as region:
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
    # the record's reason is the decision's, plus what ran where an input was left alone (float64)
    decided, _, left_alone = record.reason.partition("; float64 input(s) left as they were")
    assert (record.category, record.cast_to, decided) == (
        expected.category.value,
        expected.target.name if expected.target else None,
        expected.reason,
    )
    assert not left_alone or dt.float64 in input_dtypes


def test_trace_decisions_are_memoised_per_region_without_changing_them():
    with ampcore.autocast("cpu", trace=True) as region:
        for _ in range(3):
            CASES["linear"](Inputs((f32,)))
    assert len({(r.cast_to, r.reason) for r in region.trace if r.op == "linear"}) == 1
    assert list(itertools.islice((r.op for r in region.trace), 3)) == ["linear"] * 3
