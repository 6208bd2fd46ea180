"""Autocast routing on this backend: every op of its effective cast policy, for each low-precision dtype it
computes, comes out in the dtype its category says, and capability fallbacks run in float32 saying why.

The policy is the one autocast uses on the device type (``ampcore.policy.get``: the backend's built-in table,
then plugin layers, then user registrations).  Categories, per torch.autocast:

- ``lower``: the autocast dtype, or float32 where ``capabilities.fallback_ops[dtype]`` lists the op;
- ``fp32``: float32, whatever the inputs;
- ``promote``: the widest floating input (all low precision stays low; any float32 input makes it float32);
- ``unlisted``: not autocast, the inputs' own type;
- ``banned``: refused with ``ampcore.amp.AutocastError``.

Report cells: op = the policy op name, dtype = the autocast dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore import policy as P
from ampcore.amp import AutocastError
from ampcore.conformance.op_cases import BANNED_CASES, CASES, Inputs
from ampcore.dispatch import is_registered

AUTOCAST_DTYPES = [d.name for d in dt.LOW_PRECISION_DTYPES]
CALLS = {**CASES, **BANNED_CASES}  # every op the suite can call, the ones built-in tables ban included
f32 = dt.float32


@dataclass(frozen=True)
class Expect:
    """One run of an op: the input dtypes (k-th tensor in ``inputs[k % len]``) and what autocast must do."""

    inputs: tuple[dt.DType, ...]
    output: dt.DType
    cast_to: dt.DType | None


def expectations(category: P.Category, low: dt.DType, fallback: bool) -> list[Expect]:
    """The runs that pin ``category`` down for autocast dtype ``low`` (float32 inputs, low ones, a mix)."""
    if category is P.LOWER:
        target = f32 if fallback else low
        return [Expect((f32,), target, target), Expect((low, f32), target, target)]
    if category is P.FP32:
        return [Expect((low,), f32, f32), Expect((f32,), f32, f32)]
    if category is P.PROMOTE:
        return [Expect((low,), low, low), Expect((low, f32), f32, f32)]
    if category is P.UNLISTED:
        return [Expect((f32,), f32, None), Expect((low,), low, None)]
    raise AssertionError(f"no expectation for category {category!r}")


def _autocast_dtype(backend: Any, dtype: str) -> dt.DType:
    """``dtype`` if the backend can autocast to it (stores and computes it); skipped as not supported otherwise."""
    backend.require_storage(dtype)
    backend.require_compute(dtype)
    return dt.as_dtype(dtype)


def _run(backend: Any, op: str, inputs: tuple[dt.DType, ...], low: dt.DType) -> tuple[Any, Any]:
    """The op's output and the first trace record, called on the backend's device inside an autocast region."""
    with ampcore.autocast(backend.name, dtype=low, trace=True, strict=True) as region:
        out = CALLS[op](Inputs(inputs, seed=0, device=backend.device))
    trace = region.trace
    assert trace is not None  # trace=True above
    records = [r for r in trace if r.op == op]
    assert records, f"{op}: autocast recorded no call of {op!r} (trace: {trace.ops()})"
    return out, records[0]


@pytest.mark.parametrize("dtype", AUTOCAST_DTYPES)
@pytest.mark.parametrize("op", sorted(CALLS))
def test_policy_op_runs_in_its_category_dtype(backend, op, dtype):
    low = _autocast_dtype(backend, dtype)
    category = P.get(backend.name).category(op)
    if category is P.BANNED:
        with pytest.raises(AutocastError, match=op), ampcore.autocast(backend.name, dtype=low, strict=True):
            CALLS[op](Inputs((f32,), device=backend.device))
        return
    fallback = op in backend.capabilities.fallback_ops.get(low, frozenset())
    for expect in expectations(category, low, fallback):
        names = "/".join(d.name for d in expect.inputs)
        out, record = _run(backend, op, expect.inputs, low)
        where = f"{op} ({category.value}) on {names} inputs under {low.name} autocast"
        assert out.dtype == expect.output, f"{where}: output is {out.dtype.name}, expected {expect.output.name}"
        assert str(out.device) == backend.device, f"{where}: output on {out.device}, expected {backend.device}"
        assert record.category == category.value, (
            f"{where}: trace says category {record.category!r}, the policy says {category.value!r}"
        )
        expected_cast = expect.cast_to.name if expect.cast_to else None
        assert record.cast_to == expected_cast, (
            f"{where}: trace says cast to {record.cast_to}, expected {expected_cast}"
        )
        if fallback and category is P.LOWER:
            assert record.reason.startswith("capability fallback") and low.name in record.reason, (
                f"{where}: a fallback op's trace must say why it ran in float32, got reason {record.reason!r}"
            )


@pytest.mark.conformance(op="policy_coverage")
def test_every_policy_op_has_a_case(backend):
    """The routing of an op the policy lists (and ampcore implements) is only checked if the suite can call it."""
    policy = P.get(backend.name)
    listed = [op for op, entry in policy.entries.items() if is_registered(op)]
    missing = sorted(op for op in listed if op not in CALLS)
    assert not missing, (
        f"{backend.name!r}'s cast policy lists ops {missing} that the conformance suite cannot "
        "call, so their routing is unchecked; add calls to ampcore.conformance.op_cases.CASES"
    )


@pytest.mark.conformance(op="default_dtype")
def test_autocast_without_dtype_uses_the_declared_one(backend):
    """``autocast(device_type)`` computes in ``capabilities.autocast_dtype``; without one it is unavailable."""
    declared = backend.capabilities.autocast_dtype
    assert ampcore.is_autocast_available(backend.name) is (declared is not None), (
        f"is_autocast_available({backend.name!r}) disagrees with capabilities.autocast_dtype = {declared}"
    )
    if declared is None:
        with pytest.raises(ValueError, match="declares no autocast dtype"):
            ampcore.autocast(backend.name, strict=True)
        return
    op = "matmul"
    category = P.get(backend.name).category(op)
    expect = expectations(category, declared, op in backend.capabilities.fallback_ops.get(declared, frozenset()))[0]
    with ampcore.autocast(backend.name, strict=True):
        running = ampcore.get_autocast_dtype(backend.name)
        assert ampcore.is_autocast_enabled(backend.name) and running is declared, (
            f"a region opened without dtype= runs in {running.name}, not the declared {declared.name}"
        )
        out = CALLS[op](Inputs(expect.inputs, device=backend.device))
    assert out.dtype == expect.output, (
        f"{op} on float32 inputs in autocast({backend.name!r}) gave {out.dtype.name}, expected {expect.output.name}"
    )
