"""The autocast router: what an op boundary does while a region is open.

Installed as ``ampcore.dispatch.autocast_hook``.  For a top-level op call on
a device type with an open region it asks :func:`~.decision.decide` what to
do, casts the eligible inputs (floating, not float64; inside lists too, for
``cat``/``stack``), runs the op body with routing suspended (the ops a
composite is built from run on what its boundary decided) and records the
call in the region's trace.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from .. import dtypes as dt
from ..autograd import is_grad_enabled
from ..ops.elementwise import cast
from ..policy import Category
from ..tensor import Tensor
from .decision import decide
from .state import Region, thread_state
from .trace import Trace, TraceRecord

__all__ = ["AutocastError", "autocast_hook"]


class AutocastError(RuntimeError):
    """An op that must not run inside an autocast region was called in one."""


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Tensor]:
    found = []
    for v in (*args, *kwargs.values()):
        if isinstance(v, Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(x for x in v if isinstance(x, Tensor))
    return found


def autocast_hook(
    name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], ineligible: str | None
) -> Any:
    tls = thread_state
    if tls.depth or not tls.regions:
        return fn(*args, **kwargs)
    tensors = _tensors(args, kwargs)
    region = tls.regions.get(tensors[0].device.type) if tensors else None
    if region is None or (not region.enabled and region.trace is None):
        if region is None and tensors and ineligible is None:
            _warn_uncovered(tls.regions, name, tensors)
        return fn(*args, **kwargs)
    input_dtypes = tuple(t.dtype for t in tensors)
    if not region.enabled:
        decision = None
    else:
        key = (name, input_dtypes, ineligible)
        decision = region.decisions.get(key)
        if decision is None:
            assert region.policy is not None  # autocast gives every region it leaves enabled a policy
            decision = region.decisions[key] = decide(
                region.policy, name, input_dtypes, region.dtype, ineligible=ineligible, fallback_ops=region.fallback_ops
            )
        if decision.category is Category.BANNED:
            raise AutocastError(decision.reason)
        if decision.target is not None:
            args, kwargs = _cast_arguments(args, kwargs, decision.target, region)
    tls.depth += 1
    try:
        out = fn(*args, **kwargs)
    finally:
        tls.depth -= 1
    if region.trace is not None:
        _record(region.trace, name, tensors, input_dtypes, decision, out, _tensors(args, kwargs))
    return out


def _warn_uncovered(regions: dict[str, Region], name: str, tensors: list[Tensor]) -> None:
    """Warn once per region when an op it would have autocast ran on tensors of a device type it does not
    cover (``autocast("cuda")`` around opencl tensors): torch is silent there, and the op runs in its inputs'
    dtypes, so a mixed-precision run silently is not one."""
    for region in list(regions.values()):
        if region.uncovered or not region.enabled or region.policy is None:
            continue
        if not any(t.dtype.is_floating_point and t.dtype != dt.float64 for t in tensors):
            continue
        try:
            category = region.policy.decision(name).category
        except KeyError:  # an op the region's policy has no entry for and the dispatcher does not know
            continue
        if category is Category.UNLISTED:
            continue
        device_type = tensors[0].device.type
        region.uncovered.add(device_type)
        warnings.warn(
            f"autocast({region.device_type!r}) does not cover {device_type!r} tensors: {name!r} and the ops after it "
            f"on {device_type!r} run in their inputs' dtypes, not {region.dtype.name}; open "
            f"autocast({device_type!r}) for them (autocast(x.device.type) follows the data). "
            "Warned once per region.",
            UserWarning,
            stacklevel=5,  # the op's caller: past this, the router, route and the op boundary
        )


def _cast_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any], target: dt.DType, region: Region
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    def convert(v: Any) -> Any:
        if isinstance(v, Tensor):
            return _cast_input(v, target, region)
        if isinstance(v, (list, tuple)) and any(isinstance(x, Tensor) for x in v):
            return type(v)(convert(x) for x in v)
        return v

    return tuple(convert(a) for a in args), {k: convert(v) for k, v in kwargs.items()}


def _cast_input(t: Tensor, target: dt.DType, region: Region) -> Tensor:
    d = t.dtype
    if d == target or not d.is_floating_point or d == dt.float64:
        return t
    cacheable = (
        region.cache_enabled
        and d == dt.float32
        and target in dt.LOW_PRECISION_DTYPES
        and t.requires_grad
        and t.grad_fn is None
    )
    if not cacheable:
        return cast(t, target)
    # A parameter used by several ops in the region is cast once (torch's weight-cast cache).  The
    # key holds the grad mode, so a cast made under no_grad is never reused where gradients must flow;
    # the stored array catches a parameter rebound by an optimizer step inside the region.
    cache = thread_state.cast_cache
    key = (id(t), target, is_grad_enabled())
    hit = cache.get(key)
    if hit is not None and hit[0] is t and hit[1] is t._data:
        return hit[2]
    out = cast(t, target)
    cache[key] = (t, t._data, out)
    return out


def _record(
    trace: Trace,
    name: str,
    tensors: list[Tensor],
    input_dtypes: tuple[dt.DType, ...],
    decision: Any,
    out: Any,
    ran: list[Tensor],
) -> None:
    outputs = (
        [out]
        if isinstance(out, Tensor)
        else [o for o in out if isinstance(o, Tensor)]
        if isinstance(out, (list, tuple))
        else []
    )
    if decision is None:
        category, target, reason = "-", None, "autocast disabled in this block"
    else:
        category, target, reason = decision.category.value, decision.target, decision.reason
        if target is not None:  # say what ran: torch autocasts only float32, float16 and bfloat16 inputs
            left = sorted({t.dtype.name for t in ran if t.dtype.is_floating_point and t.dtype != target})
            if left:
                reason += f"; {', '.join(left)} input(s) left as they were (only float32/16 and bfloat16 are cast)"
    trace.append(
        TraceRecord(
            op=name,
            device=str(tensors[0].device),
            input_dtypes=tuple(d.name for d in input_dtypes),
            cast_to=target.name if target is not None else None,
            output_dtypes=tuple(o.dtype.name for o in outputs),
            category=category,
            reason=reason,
        )
    )
