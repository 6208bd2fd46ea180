"""GradScaler: dynamic loss scaling with torch.amp.GradScaler's semantics, its math on the device.

float16 gradients of small values underflow to zero.  Scaling the loss by
``S`` before ``backward`` scales every gradient by ``S`` too, lifting them into
float16's range; ``unscale_`` divides them back before the optimizer sees them.
The rule for ``S`` (``update``), as torch and jmp's ``DynamicLossScale``::

    if any gradient of any optimizer was inf/NaN this iteration:
        S = S * backoff_factor;  tracker = 0        (and that step was skipped)
    else:
        tracker += 1
        if tracker == growth_interval:
            S = S * growth_factor if that is finite else S;  tracker = 0
    S = clamp(S, min_scale, max_scale)             (ampcore's optional bounds)

Host syncs per iteration: ``scale``, ``unscale_`` and ``update`` run kernels
only (the inf check and the scale update are backend kernels on the
device); ``step`` reads the found-inf flag once per device, together with any
queued input checks (:mod:`ampcore.syncs`), to decide whether to skip.

bfloat16 has float32's exponent range, so its gradients do not underflow and
need no scaler: :meth:`GradScaler.for_dtype` returns a disabled one for it,
and an enabled scaler warns once when it sees bfloat16 autocast on its device.
"""

from __future__ import annotations

import enum
import math
import warnings
from collections import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..autograd import Function, FunctionCtx
from ..backend import BackendUnavailableError
from ..creation import full
from ..device import Device
from ..dispatch import guarded_kernels
from ..hooks import CAPTURE
from ..plugins import get_backend, get_default_device, resolve_device
from ..syncs import read_with_checks
from ..tensor import Tensor
from .overflow import active
from .state import thread_state

__all__ = ["GradScaler", "OptState"]

_STATE_KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")


class OptState(enum.Enum):
    """Where an optimizer is in the current iteration; ``update()`` resets every optimizer to READY."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


@dataclass
class _PerOptimizer:
    stage: OptState = OptState.READY
    found_inf: dict[Device, Tensor] = field(default_factory=dict)  # per device: 1-element float32, 1.0 if inf/NaN
    skipped: bool | None = None  # known on the host once step() has read found_inf
    failed: bool = False  # unscaling raised: the gradients may be partly unscaled until the next iteration


class _ScaledLoss(Function):
    """``x * scale`` whose backward also tells the scaler that scaled gradients flowed."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: Tensor, scale: Tensor, on_backward: Any) -> Tensor:
        ctx.save_for_backward(scale)
        ctx.on_backward = on_backward
        return x * scale

    @staticmethod
    def backward(ctx: FunctionCtx, grad: Tensor) -> tuple[Tensor, None, None]:
        ctx.on_backward()
        (scale,) = ctx.saved_tensors
        return grad * scale, None, None


def _positive_number(name: str, value: Any, *, above_one: bool = False, below_one: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if ok and above_one:
        ok = value > 1.0
    if ok and below_one:
        ok = value < 1.0
    if not ok:
        bound = " greater than 1" if above_one else " between 0 and 1 (exclusive)" if below_one else " > 0"
        raise ValueError(f"GradScaler: {name} must be a finite number{bound}, got {value!r}")
    return float(value)


_F32_MAX = float(np.finfo(np.float32).max)
_F32_TINY = float(np.finfo(np.float32).smallest_subnormal)


def _scale_value(name: str, value: Any) -> float:
    """A positive number that stays positive and finite as the float32 the scale is stored in."""
    value = _positive_number(name, value)
    if not _F32_TINY <= value <= _F32_MAX:
        raise ValueError(
            f"GradScaler: {name} {value!r} does not fit float32, where the scale lives; "
            f"use a value between {_F32_TINY:g} and {_F32_MAX:g}"
        )
    return value


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"GradScaler: {name} must be a positive integer, got {value!r}")
    return value


class GradScaler:
    """Dynamic loss scaling for float16 mixed precision (``torch.amp.GradScaler``)::

        scaler = ampcore.GradScaler("cpu")
        with ampcore.autocast("cpu", dtype="float16"):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)          # unscales, skips the step if a gradient is inf/NaN
        scaler.update()           # backs off or grows the scale

    ``device`` is the device type (or a device) the loss lives on; None means
    the default device.  ``min_scale`` / ``max_scale`` bound the scale;
    ``stall_warning_after`` warns when the scale backed off that many
    iterations in a row (every step skipped: something overflows at any
    scale).  ``enabled=False`` makes every method a pass-through.  If the
    device's backend is unavailable the scaler warns and disables itself, as
    torch's does.

    ``process_group`` (an ``ampcore.distributed`` communicator; torch's
    ``ShardedGradScaler`` argument): ``step`` all-reduces ``found_inf`` with
    MAX over its ranks before deciding, so every rank skips the same steps
    even when ranks see different gradients; the ranks' scaler settings are
    checked equal at construction.  An optimizer with a ``process_group``
    attribute (``ZeroRedundancyOptimizer``) brings its own.  Either way it is
    one tiny extra collective and still one host read per step.
    """

    def __init__(
        self,
        device: str | Device | None = None,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
        *,
        min_scale: float | None = None,
        max_scale: float | None = None,
        stall_warning_after: int | None = 20,
        process_group: Any = None,
    ) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"GradScaler: enabled must be True or False, got {enabled!r}")
        self._device_type = self._checked_device_type(device)
        self._init_scale = _scale_value("init_scale", init_scale)
        self._growth_factor = _positive_number("growth_factor", growth_factor, above_one=True)
        self._backoff_factor = _positive_number("backoff_factor", backoff_factor, below_one=True)
        self._growth_interval = _positive_int("growth_interval", growth_interval)
        self._min_scale = None if min_scale is None else _scale_value("min_scale", min_scale)
        self._max_scale = None if max_scale is None else _scale_value("max_scale", max_scale)
        if self._min_scale is not None and self._max_scale is not None and self._min_scale > self._max_scale:
            raise ValueError(f"GradScaler: min_scale {min_scale!r} is greater than max_scale {max_scale!r}")
        self._check_bounds("init_scale", self._init_scale)
        self._stall_after = (
            None if stall_warning_after is None else _positive_int("stall_warning_after", stall_warning_after)
        )
        self._init_growth_tracker = 0
        self._enabled = enabled and self._backend_available()
        self._scale: Tensor | None = None
        self._growth_tracker: Tensor | None = None
        self._per_optimizer: dict[int, _PerOptimizer] = {}
        self._scaled_backward_seen = False
        self._warned: set[str] = set()
        self._skipped_steps = 0
        self._skipped_device: Tensor | None = None  # skipped steps of fused optimizers, counted on the device
        self._backoffs_in_a_row = 0
        if process_group is not None and not all(
            hasattr(process_group, m) for m in ("all_reduce_host", "check_consistent")
        ):
            raise TypeError(
                "GradScaler: process_group must be an ampcore.distributed communicator (what "
                f"ampcore.distributed.init() returns), got {type(process_group).__name__}"
            )
        self._process_group = process_group
        self._checked_groups: set[int] = set()
        if process_group is not None:
            self._group_for(None)  # every rank checks the others' settings now, at construction

    @classmethod
    def for_dtype(cls, dtype: Any, device: str | Device | None = None, **kwargs: Any) -> GradScaler:
        """A scaler for autocast to ``dtype`` on ``device``: enabled for float16 only.

        bfloat16 (and float32) keep float32's exponent range, so their
        gradients need no scaling and the scaler is a pass-through.
        ``dtype=None`` takes the device's autocast dtype
        (``Capabilities.autocast_dtype``).  Other arguments go to the constructor.
        """
        if dtype is None:
            target = resolve_device(device) if device is not None else get_default_device()
            dtype = get_backend(target.type).capabilities(target.index).autocast_dtype or dt.float32
        enabled = kwargs.pop("enabled", True) and dt.as_dtype(dtype) == dt.float16
        return cls(device, enabled=enabled, **kwargs)

    # ------------------------------------------------------------------ set-up helpers
    @staticmethod
    def _checked_device_type(device: str | Device | None) -> str:
        if device is None:
            return get_default_device().type
        if isinstance(device, Device):
            return device.type
        if not isinstance(device, str):
            raise TypeError(f"GradScaler: device must be a device type such as 'cpu' or 'cuda', got {device!r}")
        return device.split(":", 1)[0]

    def _backend_available(self) -> bool:
        try:
            get_backend(self._device_type)
        except BackendUnavailableError as err:
            warnings.warn(f"GradScaler is enabled, but {err}; disabling it", UserWarning, stacklevel=3)
            return False
        return True

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, UserWarning, stacklevel=3)

    # ------------------------------------------------------------------ scale
    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or nested lists/tuples of them) multiplied by the scale, types preserved.

        The first call creates the scale and growth tracker on the outputs'
        device.  Float16 outputs are scaled in float32 (as torch's promotion
        does), so a scaled loss cannot overflow where the loss did not.
        """
        if not self._enabled:
            return outputs
        return self._scale_tree(outputs)

    def _scale_tree(self, value: Any) -> Any:
        if isinstance(value, Tensor):
            return self._scale_tensor(value)
        if isinstance(value, (list, tuple)):
            items = [self._scale_tree(v) for v in value]
            if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
                return type(value)(*items)
            return type(value)(items)
        raise TypeError(
            f"GradScaler.scale() takes a Tensor or (nested) lists/tuples of Tensors, got {type(value).__name__}"
        )

    def _scale_tensor(self, t: Tensor) -> Tensor:
        if t.device.type != self._device_type:
            raise ValueError(
                f"GradScaler for {self._device_type!r} got a tensor on {str(t.device)!r}; "
                f"create the scaler with GradScaler({t.device.type!r})"
            )
        if not t.dtype.is_floating_point:
            raise TypeError(f"GradScaler.scale() needs floating tensors, got {t.dtype.name}")
        self._warn_if_bfloat16_autocast()
        scale = self._lazy_init(t.device)
        wide = dt.float64 if t.dtype == dt.float64 else dt.float32
        scale = scale.to(device=t.device, dtype=wide).reshape(())
        return _ScaledLoss.apply(t.to(dtype=wide), scale, self._note_scaled_backward)

    def _note_scaled_backward(self) -> None:
        self._scaled_backward_seen = True

    def _warn_if_bfloat16_autocast(self) -> None:
        # (recipe, autocast dtype or None), set by this step's float8 forward
        seen = thread_state.float8_recipe.pop(self._device_type, None)
        if seen is not None and seen[1] != dt.float16:
            recipe = seen[0]
            self._warn_once(
                "float8",
                (
                    f"GradScaler: float8 layers (recipe {recipe!r}) on {self._device_type!r} scale their gradients "
                    "themselves (grad_output gets its own scale) and the other ops run in bfloat16 or float32, "
                    "whose gradients do not underflow: loss scaling only costs time. Use enabled=False "
                    "(scaling is for float16 autocast)"
                ),
            )
        if thread_state.last_dtype.get(self._device_type) == dt.bfloat16:
            self._warn_once(
                "bfloat16",
                (
                    f"GradScaler: autocast on {self._device_type!r} runs in bfloat16, which has float32's exponent "
                    "range: its gradients do not underflow, so loss scaling only costs time. Use "
                    "GradScaler.for_dtype('bfloat16') or enabled=False (scaling is for float16)"
                ),
            )

    def _lazy_init(self, device: Device) -> Tensor:
        if self._scale is None:
            self._scale = full((1,), self._init_scale, dtype=dt.float32, device=device)
            self._growth_tracker = full((1,), self._init_growth_tracker, dtype=dt.int32, device=device)
        return self._scale

    def _require_scale(self, method: str) -> Tensor:
        if self._scale is None:
            raise RuntimeError(
                f"GradScaler.{method}() was called before scale(): compute the loss, then "
                "scaler.scale(loss).backward(), before unscale_/step/update"
            )
        return self._scale

    # ------------------------------------------------------------------ unscale_ and step
    def _state(self, optimizer: Any) -> _PerOptimizer:
        return self._per_optimizer.setdefault(id(optimizer), _PerOptimizer())

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale in place and record whether any was inf/NaN.

        Once per optimizer per iteration, before ``step`` (for clipping:
        ``unscale_``, then ``clip_grad_norm_``, then ``step``).  One fused
        kernel call per (device, dtype) of gradients; 1/scale is computed in
        float32 on the device (IEEE division is correctly rounded, so it is
        the float32 nearest to 1/S: no float64 needed).  ValueError for
        float16 gradients: keep float32 master weights and let autocast cast.
        """
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state.stage is OptState.UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update(); "
                "call it once per optimizer per iteration"
            )
        if state.stage is OptState.STEPPED:
            raise RuntimeError(
                "unscale_() is being called after step(); unscale_ must come before step "
                "(step unscales by itself if unscale_ was not called)"
            )
        self._refuse_after_failure(state, "unscale_")
        scale = self._require_scale("unscale_")
        try:
            state.found_inf = self._unscale_grads(optimizer, scale)
        except BaseException:
            state.failed = True
            self._scaled_backward_seen = False  # a new scaled backward marks fresh gradients
            raise
        state.stage = OptState.UNSCALED

    def _refuse_after_failure(self, state: _PerOptimizer, method: str) -> None:
        """After unscale_ raised, the gradients may be partly unscaled: refuse them until fresh ones arrive."""
        if not state.failed:
            return
        if self._scaled_backward_seen:
            state.failed = False
            return
        raise RuntimeError(
            f"GradScaler.{method}(): unscaling this optimizer's gradients failed earlier in this "
            "iteration, so they may be partly unscaled; redo the iteration (zero_grad, forward, "
            "scaler.scale(loss).backward()), with or without scaler.update() first"
        )

    def _unscale_grads(self, optimizer: Any, scale: Tensor) -> dict[Device, Tensor]:
        groups: dict[tuple[Device, dt.DType], list[Tensor]] = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.dtype == dt.float16:
                    raise ValueError(
                        "GradScaler cannot unscale float16 gradients: their parameters are float16. "
                        "Keep the parameters (master weights) in float32 and let autocast run ops in "
                        "float16"
                    )
                groups.setdefault((g.device, g.dtype), []).append(g)
        found: dict[Device, Tensor] = {}
        inv: dict[Device, Any] = {}  # 1/scale, once per device
        for (device, _), grads in groups.items():
            k = guarded_kernels(grads[0]._backend, "GradScaler.unscale_")
            if device not in found:
                s = scale if scale.device == device else scale.to(device)
                inv[device] = k.div(1.0, s._data)
                found[device] = full((1,), 0.0, dtype=dt.float32, device=device)
            new, flag = k.unscale_and_check([g._data for g in grads], inv[device], found[device]._data)
            for g, a in zip(grads, new):
                g._data = a
            found[device]._data = flag
        return found

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscale (unless done) and step ``optimizer``, unless a gradient was inf/NaN.

        Returns True if it stepped, False if it skipped (parameters and
        optimizer state untouched).  One host read per gradient device: the
        skip decision.  A disabled scaler returns ``optimizer.step(*args, **kwargs)``.

        An optimizer whose ``_step_supports_amp_scaling`` is true (torch's
        flag; ``Adam``/``AdamW(fused=True)`` on a backend with the
        ``adamw_step_amp`` kernel) gets ``found_inf`` instead and skips on the
        device: no host read at all, and the result is the optimizer's (None),
        as in torch.  Not with a process group or inside ``detect_overflow()``,
        which need the flag on the host.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if args or "closure" in kwargs:
            raise RuntimeError(
                "GradScaler.step() does not support a closure: compute the loss, call "
                "scaler.scale(loss).backward(), then scaler.step(optimizer)"
            )
        self._require_scale("step")
        state = self._state(optimizer)
        self._refuse_after_failure(state, "step")
        if state.stage is OptState.STEPPED:
            raise RuntimeError(
                "step() has already been called on this optimizer since the last update(); "
                "call scaler.update() once per iteration, after every optimizer's step"
            )
        if state.stage is OptState.READY:
            self.unscale_(optimizer)
        if not state.found_inf:
            raise RuntimeError(
                "GradScaler.step(): no parameter of this optimizer has a gradient; call "
                "scaler.scale(loss).backward() before step()"
            )
        if not self._scaled_backward_seen:
            self._warn_once(
                "unscaled",
                (
                    "GradScaler.step(): these gradients did not come from backward() through a scaled loss in this "
                    "iteration, so unscaling divides real gradients by the loss scale. Use "
                    "scaler.scale(loss).backward() instead of loss.backward()"
                ),
            )
        group = self._group_for(optimizer)
        on_device = getattr(optimizer, "_step_supports_amp_scaling", False) or (
            CAPTURE.active and getattr(optimizer, "_captures_amp_step", False)
        )
        if group is None and active() is None and on_device:
            return self._step_on_device(optimizer, state, kwargs)
        skipped = self._skip_decision(state, group)
        state.skipped = skipped
        if skipped:
            self._skipped_steps += 1
            self._report_overflow()
        else:
            optimizer.step(**kwargs)
        state.stage = OptState.STEPPED
        return not skipped

    def _step_on_device(self, optimizer: Any, state: _PerOptimizer, kwargs: dict[str, Any]) -> Any:
        """torch's fused path: the optimizer gets ``found_inf`` (per device) and skips on the device; no host read.

        The gradients are already unscaled, so ``grad_scale`` is None.  The
        count of skipped steps is kept on the device too (read by
        :attr:`skipped_steps`).  Returns the optimizer's ``step()`` result (None).
        """
        # As torch: the devices' flags summed on the scaler's device, so an inf anywhere skips every device's step.
        home = self._require_scale("step").device
        total: Tensor | None = None
        for flag in state.found_inf.values():
            f = flag if flag.device == home else flag.to(home)  # a transfer only with gradients on several devices
            total = f if total is None else total + f
        assert total is not None
        optimizer.grad_scale = None
        optimizer.found_inf = {d: total if d == home else total.to(d) for d in state.found_inf}
        try:
            result = optimizer.step(**kwargs)
        finally:
            del optimizer.grad_scale, optimizer.found_inf
        count = (total > 0).to(dtype=dt.float32).reshape(1)
        if self._skipped_device is None:
            self._skipped_device = count
        else:  # in place: a captured step reads and writes this one tensor (ampcore.compile)
            self._skipped_device._data = (self._skipped_device + count)._data
        state.stage = OptState.STEPPED
        return result

    def _take_skipped(self, value: float) -> None:
        """Move ``value`` steps skipped on the device (just read from :attr:`_skipped_device`) to the host count,
        and restart the device count from zero in place."""
        counter = self._skipped_device
        if counter is None:
            return
        self._skipped_steps += int(value)
        if value:
            counter._data = guarded_kernels(counter._backend, "GradScaler").full(
                (1,), 0.0, dt.float32, counter.device.index
            )

    def _group_for(self, optimizer: Any) -> Any:
        """The process group whose ranks must agree on skipping: the scaler's, else a sharded optimizer's."""
        group = self._process_group if self._process_group is not None else getattr(optimizer, "process_group", None)
        if group is not None and id(group) not in self._checked_groups:
            group.check_consistent("GradScaler", self._settings())
            self._checked_groups.add(id(group))
        return group

    def _skip_decision(self, state: _PerOptimizer, group: Any) -> bool:
        """Read found_inf (the one host sync); with a process group, agree on it with MAX over the ranks.

        The agreed flag replaces the local one on the device, so ``update()``
        backs the scale off on every rank alike.
        """
        if group is None:
            return any(read_with_checks(flag)[0] != 0 for flag in state.found_inf.values())
        local = max(float(read_with_checks(flag)[0] != 0) for flag in state.found_inf.values())
        agreed = float(group.all_reduce_host(np.array([local], dtype=np.float32), "max")[0])
        if agreed != local:
            state.found_inf = {d: full((1,), agreed, dtype=dt.float32, device=d) for d in state.found_inf}
        return agreed != 0.0

    def _settings(self) -> dict[str, Any]:
        return {
            "enabled": self._enabled,
            "device type": self._device_type,
            "init_scale": self._init_scale,
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "min_scale": self._min_scale,
            "max_scale": self._max_scale,
        }

    def _report_overflow(self) -> None:
        """Inside ``ampcore.amp.detect_overflow()``: say which op the skipped step's inf/NaN came from."""
        watch = active()
        if watch is None:
            return
        where = (
            str(watch.first)
            if watch.first
            else "no op output went non-finite from finite inputs (the "
            "inputs, parameters or loss were already non-finite)"
        )
        warnings.warn(f"GradScaler skipped step {self._skipped_steps}: {where}", RuntimeWarning, stacklevel=3)
        watch.reset()

    # ------------------------------------------------------------------ update
    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back off or grow the scale per the rule in the module docstring, on the device (no host sync).

        ``new_scale`` sets the scale instead and keeps the growth tracker: a
        float is checked (positive, fits float32, within min/max_scale); a
        1-element tensor is copied on the device unread, as torch does.
        Every optimizer is READY again afterwards.
        """
        if not self._enabled:
            return
        scale = self._require_scale("update")
        if new_scale is not None:
            scale._data = self._checked_new_scale(new_scale, scale.device)._data
        else:
            self._apply_rule(scale)
        self._per_optimizer = {}
        self._scaled_backward_seen = False

    def _apply_rule(self, scale: Tensor) -> None:
        flags = [f for st in self._per_optimizer.values() for f in st.found_inf.values()]
        if not flags and any(st.failed for st in self._per_optimizer.values()):
            return  # the iteration failed before any inf/NaN check: keep the scale, start the next one afresh
        if not flags:
            raise RuntimeError(
                "GradScaler.update(): no inf/NaN checks were recorded in this iteration; call "
                "scaler.step(optimizer) (or unscale_) for each optimizer before update()"
            )
        k = guarded_kernels(scale._backend, "GradScaler.update")
        total = flags[0]._data if flags[0].device == scale.device else flags[0].to(scale.device)._data
        for f in flags[1:]:
            total = k.add(total, (f if f.device == scale.device else f.to(scale.device))._data)
        assert self._growth_tracker is not None
        new, tracker = k.update_scale(
            scale._data,
            self._growth_tracker._data,
            total,
            self._growth_factor,
            self._backoff_factor,
            self._growth_interval,
        )
        if self._min_scale is not None:
            new = k.maximum(new, self._min_scale)
        if self._max_scale is not None:
            new = k.minimum(new, self._max_scale)
        # In place (torch's _amp_update_scale_ is too): a captured step reads and writes these same tensors.
        scale._data = new
        self._growth_tracker._data = tracker
        self._watch_for_stall()

    def _watch_for_stall(self) -> None:
        known = [st.skipped for st in self._per_optimizer.values()]
        if not known or any(s is None for s in known):
            return  # an optimizer was unscaled but not stepped: whether it overflowed was never read
        if not any(known):
            self._backoffs_in_a_row = 0
            self._warned.discard("stall")
            return
        self._backoffs_in_a_row += 1
        if self._stall_after is not None and self._backoffs_in_a_row >= self._stall_after:
            self._warn_once(
                "stall",
                (
                    f"GradScaler: the loss scale backed off {self._backoffs_in_a_row} iterations in a row (now "
                    f"{self.get_scale():g}) and every step was skipped: the gradients are inf/NaN at any scale. "
                    "Look for inf/NaN in the inputs or loss, a diverged learning rate, or an op that overflows in "
                    "float16 (autocast(..., trace=True) shows what ran in float16)"
                ),
            )

    def _check_bounds(self, name: str, value: float) -> None:
        low = self._min_scale if self._min_scale is not None else 0.0
        high = self._max_scale if self._max_scale is not None else math.inf
        if not low <= value <= high:
            raise ValueError(
                f"GradScaler: {name} {value!r} is outside [min_scale, max_scale] = "
                f"[{self._min_scale!r}, {self._max_scale!r}]"
            )

    def _checked_new_scale(self, new_scale: Any, device: Device) -> Tensor:
        if not isinstance(new_scale, Tensor):
            value = _scale_value("new_scale", new_scale)
            self._check_bounds("new_scale", value)
            return full((1,), value, dtype=dt.float32, device=device)
        if new_scale.numel() != 1 or new_scale.requires_grad or not new_scale.dtype.is_floating_point:
            raise ValueError(
                "GradScaler.update(new_scale): a tensor new_scale must be a 1-element floating "
                f"tensor that does not require grad, got shape {new_scale.shape}, dtype "
                f"{new_scale.dtype.name}, requires_grad={new_scale.requires_grad}"
            )
        # Copied on the device, unread (no host sync, as torch): its value is the caller's to get right.
        return new_scale.detach().to(device=device, dtype=dt.float32).reshape(1).clone()

    # ------------------------------------------------------------------ getters, setters, state
    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (a host read), ``init_scale`` before the first ``scale()``, 1.0 if disabled."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def _get_scale_async(self) -> Tensor | None:
        """The scale as a 1-element device tensor, without a host read (torch's name); None before ``scale()``."""
        return self._scale if self._enabled else None

    def get_growth_tracker(self) -> int:
        """Clean iterations since the scale last changed (a host read once the scaler is in use)."""
        if not self._enabled:
            return 0
        tracker = self._growth_tracker
        return self._init_growth_tracker if tracker is None else int(tracker.item())

    _get_growth_tracker = get_growth_tracker  # torch's (private) name

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = _positive_number("growth_factor", new_factor, above_one=True)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = _positive_number("backoff_factor", new_factor, below_one=True)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = _positive_int("growth_interval", new_interval)

    @property
    def skipped_steps(self) -> int:
        """Optimizer steps skipped for inf/NaN gradients since this scaler was made (or loaded).

        Steps a fused optimizer skipped on the device are counted there; reading them is a host read."""
        if self._skipped_device is not None:
            self._take_skipped(float(self._skipped_device.item()))
        return self._skipped_steps

    def state_dict(self) -> dict[str, Any]:
        """torch's keys (``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``,
        ``_growth_tracker``) plus ``skipped_steps``; empty when disabled."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self.get_growth_tracker(),
            "skipped_steps": self.skipped_steps,
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a :meth:`state_dict` (also one saved by torch); works before the first ``scale()``.

        Every value is checked before anything changes.  RuntimeError for an
        empty dict (saved from a disabled scaler); ValueError for a missing
        key or a bad value.
        """
        if not self._enabled:
            return
        if not isinstance(state_dict, abc.Mapping):
            raise TypeError(f"GradScaler.load_state_dict() needs a mapping, got {type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise RuntimeError("the GradScaler state dict is empty, probably saved from a disabled GradScaler")
        missing = [key for key in _STATE_KEYS if key not in state_dict]
        if missing:
            raise ValueError(f"GradScaler state dict lacks {missing}; it needs {list(_STATE_KEYS)}")
        scale = _scale_value("scale", state_dict["scale"])
        self._check_bounds("scale", scale)
        growth = _positive_number("growth_factor", state_dict["growth_factor"], above_one=True)
        backoff = _positive_number("backoff_factor", state_dict["backoff_factor"], below_one=True)
        interval = _positive_int("growth_interval", state_dict["growth_interval"])
        tracker = state_dict["_growth_tracker"]
        if isinstance(tracker, bool) or not isinstance(tracker, int) or not 0 <= tracker < interval:
            raise ValueError(
                f"GradScaler: _growth_tracker must be an int in [0, growth_interval={interval}), got {tracker!r}"
            )
        skipped = state_dict.get("skipped_steps", 0)
        if isinstance(skipped, bool) or not isinstance(skipped, int) or skipped < 0:
            raise ValueError(f"GradScaler: skipped_steps must be a non-negative int, got {skipped!r}")
        self._init_scale, self._growth_factor, self._backoff_factor = scale, growth, backoff
        self._growth_interval, self._init_growth_tracker = interval, tracker
        self._skipped_steps = skipped
        if self._skipped_device is not None:  # the device count restarts (in place, as _take_skipped)
            self._skipped_device._data = full((1,), 0.0, dtype=dt.float32, device=self._skipped_device.device)._data
        if self._scale is not None and self._growth_tracker is not None:
            device = self._scale.device  # rebound in place: a captured step reads these tensors
            self._scale._data = full((1,), scale, dtype=dt.float32, device=device)._data
            self._growth_tracker._data = full((1,), tracker, dtype=dt.int32, device=device)._data

    def __repr__(self) -> str:
        if not self._enabled:
            return f"GradScaler({self._device_type!r}, enabled=False)"
        return (
            f"GradScaler({self._device_type!r}, scale={self.get_scale():g}, growth_factor={self._growth_factor}, "
            f"backoff_factor={self._backoff_factor}, growth_interval={self._growth_interval})"
        )
