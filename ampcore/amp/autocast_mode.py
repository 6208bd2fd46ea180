"""``ampcore.autocast``: torch.autocast's semantics on any backend, plus traces and custom policies.

``with ampcore.autocast("cpu"): ...`` (or as a decorator) makes eligible ops
on that device type run in the backend's preferred low-precision dtype, per
the device type's cast policy.  State is per thread and per device type;
regions nest, an inner ``enabled=False`` turns autocast off for its block,
and leaving a region restores the outer state exactly.  The weight-cast cache
lives until the outermost region of the thread exits.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from .. import dispatch
from .. import dtypes as dt
from ..backend import BackendUnavailableError
from ..dtypes import DType
from ..plugins import UnknownBackendError, registry
from ..plugins.capabilities import capabilities_of
from ..policy import Policy
from ..policy import get as get_policy
from ..policy.resolve import check_device_type, generation
from .decision import Decision, decide
from .state import Region, shared_decisions, thread_state
from .trace import Trace

__all__ = [
    "autocast",
    "is_autocast_enabled",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_cache_enabled",
    "clear_autocast_cache",
    "explain",
    "UnknownDeviceTypeError",
]

F = TypeVar("F", bound=Callable[..., Any])
_INHERIT = object()
# (device type, requested dtype) -> (generation(), fast dtype, fallback ops, the device type's policy, its
# decisions table) of a region that resolved cleanly: ``with autocast("cpu")`` in a training loop resolves
# its backend once, not every step (torch's autocast is a Python object built every step too).  Keyed on
# generation(), so a plugin, backend or policy registered later is seen.
_resolved: dict[
    tuple[str, DType | None], tuple[tuple[int, int, int], DType, frozenset[str], Policy, dict[Any, Any]]
] = {}


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"autocast(): {name} must be True or False, got {value!r}")
    return value


class UnknownDeviceTypeError(UnknownBackendError, RuntimeError):
    """autocast on a device type no installed backend has: torch raises RuntimeError, ampcore raised
    ValueError (UnknownBackendError); this is both, so callers written for either keep working."""


def _backend_record(device_type: str) -> Any:
    """The registry record of ``device_type``; UnknownDeviceTypeError (listing the installed ones) if none."""
    try:
        registry.get_backend(device_type, require_available=False)
    except UnknownBackendError as err:
        raise UnknownDeviceTypeError(err.name, err.known) from None
    return registry.records[device_type]


class autocast:  # noqa: N801 - torch's name
    """Run eligible ops on ``device_type`` in mixed precision for a block or a decorated function.

    ``dtype=None`` takes the backend's preferred dtype (``Capabilities.autocast_dtype``).
    A dtype the device cannot store or compute, or an unavailable backend,
    warns and disables autocast, as torch does; ``strict=True`` raises instead.
    ``policy`` replaces the device type's cast policy for this region
    (``ampcore.policy.get("cpu").override(fp32=["gelu"])``).  ``trace=True``
    records every op call's decision in ``region.trace`` (an inner region
    without ``trace=`` appends to its outer region's trace).
    """

    def __init__(
        self,
        device_type: str,
        dtype: DType | str | None = None,
        enabled: bool = True,
        cache_enabled: bool = True,
        *,
        policy: Policy | None = None,
        trace: bool | Trace | None = None,
        strict: bool = False,
    ):
        self.device_type = check_device_type(device_type)
        if not (type(enabled) is bool and type(cache_enabled) is bool and type(strict) is bool):
            _check_bool(enabled, "enabled")  # raises, naming the first that is not a bool
            _check_bool(cache_enabled, "cache_enabled")
            _check_bool(strict, "strict")
        self._enabled, self._cache_enabled, self._strict = enabled, cache_enabled, strict
        if policy is not None and not isinstance(policy, Policy):
            raise TypeError(
                "autocast(): policy must be an ampcore.policy.Policy, e.g. "
                f"ampcore.policy.get({device_type!r}).override(fp32=[...]), got {policy!r}"
            )
        if trace is None:
            self._trace: Any = _INHERIT
        elif isinstance(trace, Trace):
            self._trace = trace
        elif isinstance(trace, bool):
            self._trace = Trace() if trace else None
        else:
            raise TypeError(f"autocast(): trace must be True, False or an ampcore.amp.Trace, got {trace!r}")
        requested = dt.as_dtype(dtype) if dtype is not None else None
        self._policy = policy
        self._decisions: dict[Any, Any] | None = None  # the policy's shared decisions, once known
        hit = _resolved.get((self.device_type, requested))
        if hit is not None and hit[0] == generation():
            _, self.fast_dtype, self._fallback_ops, default_policy, decisions = hit
            if policy is None:
                self._policy, self._decisions = default_policy, decisions
            return
        self._resolve(requested)

    def _resolve(self, requested: DType | None) -> None:
        """Find the backend, its autocast dtype and policy; disable (warn) where they do not serve."""
        device_type = self.device_type
        record = _backend_record(device_type)
        self.fast_dtype = requested or dt.float16
        self._fallback_ops = frozenset()
        self._clean = True  # _disable clears it: only a clean resolution is remembered
        status = record.availability()
        if not status.ok:
            if self._enabled:
                self._disable(f"backend {device_type!r} is unavailable here: {status.reason}", unavailable=True)
            return
        caps = capabilities_of(record.backend, 0)
        fast = requested or caps.autocast_dtype
        if fast is None:
            self._disable(
                f"backend {device_type!r} declares no autocast dtype; pass dtype=ampcore.bfloat16 "
                "or dtype=ampcore.float16"
            )
            return
        self.fast_dtype = fast
        computable = caps.native | caps.emulated
        if fast not in dt.LOW_PRECISION_DTYPES:
            self._disable(f"autocast on {device_type!r} supports dtype float16 or bfloat16, got {fast.name}")
        elif fast not in caps.storable or fast not in computable:
            supported = sorted(d.name for d in set(dt.LOW_PRECISION_DTYPES) & caps.storable & computable) or ["none"]
            self._disable(
                f"{caps.device_name} (backend {device_type!r}) cannot store and compute {fast.name}; "
                f"it supports {', '.join(supported)}"
            )
        self._fallback_ops = frozenset(caps.fallback_ops.get(fast, ()))
        stamp = generation()
        default_policy = get_policy(device_type)
        if self._policy is None:
            self._policy = default_policy
        if self._clean:
            decisions = shared_decisions(default_policy, fast, self._fallback_ops)
            _resolved[(device_type, requested)] = (stamp, fast, self._fallback_ops, default_policy, decisions)

    def _disable(self, why: str, unavailable: bool = False) -> None:
        self._clean = False
        if not self._enabled:
            return
        if self._strict:
            if unavailable:
                raise BackendUnavailableError(self.device_type, why)
            raise ValueError(f"{why} (strict=True; without it autocast would warn and disable itself)")
        warnings.warn(f"{why}. Disabling autocast.", UserWarning, stacklevel=3)
        self._enabled = False

    @property
    def enabled(self) -> bool:
        """Whether this region autocasts (False if disabled by the caller or by an unsupported dtype)."""
        return self._enabled

    @property
    def policy(self) -> Policy | None:
        return self._policy

    @property
    def trace(self) -> Trace | None:
        """The trace this region records into (None when not tracing)."""
        return None if self._trace is _INHERIT else self._trace

    def __enter__(self) -> autocast:
        frames = thread_state.frames
        device_type = self.device_type
        previous = frames.regions.get(device_type)
        trace = self._trace
        if trace is _INHERIT:
            trace = previous.trace if previous is not None else None
        frames.regions[device_type] = Region(
            device_type,
            self._enabled,
            self.fast_dtype,
            self._cache_enabled,
            self._policy,
            trace,
            self._fallback_ops,
            self._decisions
            if self._decisions is not None
            else shared_decisions(self._policy, self.fast_dtype, self._fallback_ops),
        )
        frames.saved.append((device_type, previous))
        if self._enabled:
            thread_state.last_dtype[device_type] = self.fast_dtype
        frames.nesting += 1
        dispatch.region_opened(+1)
        return self

    def __exit__(self, *exc: Any) -> None:
        frames = thread_state.frames
        device_type, previous = frames.saved.pop()
        if previous is None:
            del frames.regions[device_type]
        else:
            frames.regions[device_type] = previous
        frames.nesting -= 1
        if not frames.nesting:
            frames.cast_cache.clear()
        dispatch.region_opened(-1)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        state = "enabled" if self._enabled else "disabled"
        return f"autocast({self.device_type!r}, dtype={self.fast_dtype.name}, {state})"


def is_autocast_enabled(device_type: str) -> bool:
    """Whether an enabled autocast region for ``device_type`` is open on this thread."""
    region = thread_state.regions.get(check_device_type(device_type))
    return region is not None and region.enabled


def get_autocast_dtype(device_type: str) -> DType:
    """The dtype autocast uses on ``device_type``: the open region's, else the backend's preferred one."""
    region = thread_state.regions.get(check_device_type(device_type))
    if region is not None:
        return region.dtype
    record = _backend_record(device_type)
    preferred = capabilities_of(record.backend, 0).autocast_dtype if record.availability().ok else None
    return preferred or dt.float16


def is_autocast_available(device_type: str) -> bool:
    """Whether ``device_type``, an installed backend, is available with a low-precision autocast dtype;
    an unknown device type raises UnknownDeviceTypeError, as torch raises for one."""
    record = _backend_record(check_device_type(device_type))
    if not record.availability().ok:
        return False
    return capabilities_of(record.backend, 0).autocast_dtype in dt.LOW_PRECISION_DTYPES


def is_autocast_cache_enabled(device_type: str) -> bool:
    """Whether the open region for ``device_type`` on this thread caches weight casts."""
    region = thread_state.regions.get(check_device_type(device_type))
    return region is not None and region.enabled and region.cache_enabled


def clear_autocast_cache() -> None:
    """Drop this thread's cached weight casts now (they are dropped anyway when the outermost region exits)."""
    thread_state.cast_cache.clear()


def explain(
    op: str,
    *input_dtypes: DType | str,
    device_type: str,
    dtype: DType | str | None = None,
    policy: Policy | None = None,
    ineligible: str | None = None,
) -> Decision:
    """What autocast on ``device_type`` would do with ``op`` called on tensors of ``input_dtypes``.

    ``explain("linear", "float32", "float32", device_type="cpu")`` -> a
    Decision (category, target dtype, reason), without running anything.
    """
    region = autocast(device_type, dtype=dtype, policy=policy, strict=True)
    assert region.policy is not None  # strict=True raises rather than leave the region without one
    return decide(
        region.policy,
        op,
        [dt.as_dtype(d) for d in input_dtypes],
        region.fast_dtype,
        ineligible=ineligible,
        fallback_ops=region._fallback_ops,
    )
