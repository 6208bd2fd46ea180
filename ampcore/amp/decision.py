"""The autocast decision for one op call, as a pure function of what it depends on.

``decide(policy, op, input_dtypes, autocast_dtype, ...)`` is all the router
consults: the op's policy category, the dtypes of its tensor inputs, the
region's dtype, why the call may be ineligible, and which ops the device
cannot run in low precision.  Values, shapes and the thread never enter, so
``explain()`` can answer "what would happen" without running anything.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from .. import dtypes as dt
from ..dtypes import DType
from ..policy import BANNED_REASONS, Category, Policy

__all__ = ["Decision", "decide"]


@dataclass(frozen=True)
class Decision:
    """What autocast does with one op call: cast eligible inputs to ``target`` (None: leave them), and why."""

    op: str
    category: Category
    target: DType | None
    reason: str


def _eligible(d: DType) -> bool:
    """torch's rule: floating inputs other than float64 are autocast; ints, bools and float64 are not."""
    return d.is_floating_point and d != dt.float64


def decide(
    policy: Policy,
    op: str,
    input_dtypes: Iterable[DType],
    autocast_dtype: DType,
    *,
    ineligible: str | None = None,
    fallback_ops: frozenset[str] = frozenset(),
) -> Decision:
    """The decision for ``op`` called on tensors of ``input_dtypes`` in a region computing in ``autocast_dtype``.

    ``ineligible`` names why this call is not autocast (``"in-place"``,
    ``"explicit dtype="``, ``"out="``); ``fallback_ops`` are the ops the
    device cannot run in ``autocast_dtype`` (they run in float32 instead).
    A BANNED op's decision carries the error message as its reason.
    """
    entry = policy.decision(op)
    category = entry.category
    if category is Category.BANNED:
        return Decision(
            op,
            category,
            None,
            BANNED_REASONS.get(
                op,
                f"{op} is banned inside autocast regions by policy {policy.name!r} ({entry.source}); "
                "call it with autocast(device_type, enabled=False) and float32 inputs",
            ),
        )
    if ineligible is not None:
        return Decision(op, category, None, f"not autocast: {ineligible} call ({category.value} op)")
    if category is Category.UNLISTED:
        return Decision(op, category, None, "unlisted: runs in its inputs' types")
    floats = [d for d in input_dtypes if _eligible(d)]
    if not floats:
        return Decision(op, category, None, "not autocast: no float16/bfloat16/float32 inputs")
    if category is Category.LOWER:
        if op in fallback_ops:
            return Decision(
                op,
                category,
                dt.float32,
                f"capability fallback: the device has no {autocast_dtype.name} {op}, runs in float32",
            )
        return Decision(op, category, autocast_dtype, f"policy {policy.name!r}: lower ({entry.source})")
    if category is Category.FP32:
        return Decision(op, category, dt.float32, f"policy {policy.name!r}: fp32 ({entry.source})")
    widest = functools.reduce(dt.promote_types, floats)
    return Decision(op, category, widest, f"policy {policy.name!r}: promote to widest input ({entry.source})")
