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
from ..autograd import grad_mode
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
    found: list[Tensor] = []
    for v in args:
        if isinstance(v, Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(x for x in v if isinstance(x, Tensor))
    if kwargs:
        found.extend(_tensors(tuple(kwargs.values()), {}))
    return found


def autocast_hook(
    name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], ineligible: str | None
) -> Any:
    frames = thread_state.frames
    regions = frames.regions
    if frames.depth or not regions:
        return fn(*args, **kwargs)
    tensors = _tensors(args, kwargs)
    region = regions.get(tensors[0].device.type) if tensors else None
    if region is None or (not region.enabled and region.trace is None):
        if region is None and tensors and ineligible is None:
            _warn_uncovered(regions, name, tensors)
        return fn(*args, **kwargs)
    dtypes = []
    for t in tensors:  # a loop, not a comprehension: that is a function call of its own (Python 3.11)
        dtypes.append(t.dtype)
    input_dtypes = tuple(dtypes)
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
    frames.depth += 1
    try:
        out = fn(*args, **kwargs)
    finally:
        frames.depth -= 1
    if region.trace is not None:
        _record(region.trace, name, tensors, input_dtypes, decision, out, _tensors(args, kwargs))
    return out


def _warn_uncovered(regions: dict[str, Region], name: str, tensors: list[Tensor]) -> None:
    """Warn once per region when an op it would have autocast ran on tensors of a device type it does not
    cover (``autocast("cuda")`` around opencl tensors): torch is silent there, and the op runs in its inputs'
    dtypes, so a mixed-precision run silently is not one."""
    for region in list(regions.values()):
        if region.warned_uncovered or not region.enabled or region.policy is None:
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
        region.warned_uncovered = True
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
    cast_args = []
    for v in args:
        cast_args.append(_cast_input(v, target, region) if isinstance(v, Tensor) else _cast_nested(v, target, region))
    if kwargs:
        kwargs = {k: _cast_nested(v, target, region) for k, v in kwargs.items()}
    return tuple(cast_args), kwargs


def _cast_nested(v: Any, target: dt.DType, region: Region) -> Any:
    """``v`` with its eligible tensors cast, inside lists and tuples too (``cat``'s and ``stack``'s)."""
    if isinstance(v, Tensor):
        return _cast_input(v, target, region)
    if isinstance(v, (list, tuple)) and any(isinstance(x, Tensor) for x in v):
        return type(v)(_cast_nested(x, target, region) for x in v)
    return v


def _cast_input(t: Tensor, target: dt.DType, region: Region) -> Tensor:
    d = t.dtype  # DTypes are interned: identity is equality
    if d is target or not d.is_floating_point or d is dt.float64:
        return t
    cacheable = (
        region.cache_enabled
        and d is dt.float32
        and t.requires_grad
        and t.grad_fn is None
        and target in dt.LOW_PRECISION_DTYPES
    )
    if not cacheable:
        return cast(t, target)
    # A parameter used by several ops in the region is cast once (torch's weight-cast cache).  The
    # key holds the grad mode, so a cast made under no_grad is never reused where gradients must flow;
    # the stored array catches a parameter rebound by an optimizer step inside the region.
    cache = thread_state.frames.cast_cache
    key = (id(t), target, grad_mode.enabled)
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
