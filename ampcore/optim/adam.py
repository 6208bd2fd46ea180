"""Adam and AdamW, through the backend's fused ``adamw_step`` kernel when it has one.

The rule (torch's), for step t of a parameter p with gradient g, in float32
(float64 for float64 parameters)::

    if decoupled (AdamW):  p = p * (1 - lr * weight_decay)
    else (Adam):           g = g + weight_decay * p
    m = m + (1 - beta1) * (g - m)            # m.lerp_(g, 1 - beta1)
    v = beta2 * v + (1 - beta2) * g * g
    v_hat = max(v_hat, v) if amsgrad else v
    denom = sqrt(v_hat) / sqrt(1 - beta2**t) + eps
    p = p - (lr / (1 - beta1**t)) * (m / denom)

A low-precision parameter is widened to float32, updated, and rounded once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from .. import dtypes as dt
from ..capture.dynamic import dynamic
from ..creation import full
from ..dispatch import guarded_kernels
from ..plugins.capabilities import capabilities_of
from ..tensor import Tensor
from .optimizer import Optimizer, check_foreach_fused, check_hyper, grad_data

__all__ = ["Adam", "AdamW", "adamw_step_amp_reference", "adamw_step_reference"]


def _storable(p: Tensor) -> frozenset[Any]:
    return capabilities_of(p._backend, p.device.index).storable


def _widen(k: Any, x: Any, dtype: Any) -> Any:
    return x if k.dtype_of(x) == dtype else k.cast(x, dtype)


def adamw_step_reference(
    k: Any,
    params: Sequence[Any],
    grads: Sequence[Any],
    exp_avgs: Sequence[Any],
    exp_avg_sqs: Sequence[Any],
    *,
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
    max_exp_avg_sqs: Sequence[Any] | None = None,
) -> tuple[list[Any], ...]:
    """The fused ``adamw_step`` kernel's contract composed from primitive kernels ``k``.

    Per tensor, in the moments' dtype ``c`` (:func:`ampcore.kernels.adamw_moment_dtype`
    of the parameter's; parameter and gradient widened to ``c``)::

        if weight_decay:
            if decoupled: p = p * (1 - lr * weight_decay)     # AdamW: decay the parameter
            else:         g = g + weight_decay * p            # Adam: L2 term in the gradient
        m = m + (g - m) * (1 - beta1)
        v = v * beta2 + g * g * (1 - beta2)
        v_hat = max(max_exp_avg_sq, v) if amsgrad else v      # max_exp_avg_sqs given
        denom = sqrt(v_hat) / sqrt(1 - beta2 ** step) + eps
        p = p - (m / denom) * (lr / (1 - beta1 ** step))      # rounded once to p's dtype

    ``step`` >= 1 is the step number.  Returns new ``(params, exp_avgs,
    exp_avg_sqs)`` arrays (plus ``max_exp_avg_sqs`` when given, for amsgrad);
    the inputs are not modified (a fused kernel may update them in place).
    Arguments are not checked here: the optimizers validate them, and a fused
    kernel calls :func:`ampcore.kernels.check_adamw_step`.
    """
    bias_correction1 = 1.0 - beta1**step
    bc2_sqrt = math.sqrt(1.0 - beta2**step)
    step_size = lr / bias_correction1
    new_p, new_m, new_v, new_max = [], [], [], []
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        pc, m, v = _decay_and_moments(k, p, g, m, v, lr, beta1, beta2, weight_decay, decoupled)
        v_hat = v
        if max_exp_avg_sqs is not None:
            v_hat = k.maximum(max_exp_avg_sqs[i], v)
            new_max.append(v_hat)
        denom = k.add(k.div(k.sqrt(v_hat), bc2_sqrt), eps)
        pc = k.sub(pc, k.mul(k.div(m, denom), step_size))
        new_p.append(_widen(k, pc, k.dtype_of(p)))
        new_m.append(m)
        new_v.append(v)
    if max_exp_avg_sqs is not None:
        return new_p, new_m, new_v, new_max
    return new_p, new_m, new_v


def _decay_and_moments(
    k: Any, p: Any, g: Any, m: Any, v: Any, lr: float, beta1: float, beta2: float, weight_decay: float, decoupled: bool
) -> tuple[Any, Any, Any]:
    """(parameter widened to the moments' dtype and decayed, new first moment, new second moment): the part of
    one Adam step the synced and the sync-free reference compositions share."""
    cdt = k.dtype_of(m)
    pc, gc = _widen(k, p, cdt), _widen(k, g, cdt)
    if weight_decay:
        if decoupled:
            pc = k.mul(pc, 1.0 - lr * weight_decay)
        else:
            gc = k.add(gc, k.mul(pc, weight_decay))
    m = k.add(m, k.mul(k.sub(gc, m), 1.0 - beta1))
    v = k.add(k.mul(v, beta2), k.mul(k.mul(gc, gc), 1.0 - beta2))
    return pc, m, v


def adamw_step_amp_reference(
    k: Any,
    params: Sequence[Any],
    grads: Sequence[Any],
    exp_avgs: Sequence[Any],
    exp_avg_sqs: Sequence[Any],
    steps: Any,
    skip: Any,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
) -> tuple[list[Any], list[Any], list[Any], Any]:
    """The fused ``adamw_step_amp`` kernel's contract composed from primitive kernels ``k``, with no host read.

    ``steps`` and ``skip`` are 1-element float32 arrays (steps taken; nonzero
    to skip).  The step is :func:`adamw_step_reference`'s with ``step = steps + 1``,
    its bias corrections computed on the device in float64 (as the host
    computes them) and rounded once to the moments' dtype; every output is
    then selected with ``where(skip == 0, new, old)``, so a skipped step
    returns its inputs' values (and ``steps`` unchanged).  Needs float64
    storage for the bias corrections (cpu and cuda have it).
    """
    go = k.eq(skip, 0.0)
    t_new = k.add(steps, 1.0)
    t64 = k.cast(t_new, dt.float64)
    step_size64 = k.div(lr, k.sub(1.0, k.pow(beta1, t64)))
    bc2_sqrt64 = k.sqrt(k.sub(1.0, k.pow(beta2, t64)))
    consts: dict[Any, tuple[Any, Any]] = {}
    new_p, new_m, new_v = [], [], []
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        cdt = k.dtype_of(m)
        if cdt not in consts:
            consts[cdt] = (_widen(k, step_size64, cdt), _widen(k, bc2_sqrt64, cdt))
        step_size, bc2_sqrt = consts[cdt]
        pc, m2, v2 = _decay_and_moments(k, p, g, m, v, lr, beta1, beta2, weight_decay, decoupled)
        denom = k.add(k.div(k.sqrt(v2), bc2_sqrt), eps)
        pc = k.sub(pc, k.mul(k.div(m2, denom), step_size))
        new_p.append(k.where(go, _widen(k, pc, k.dtype_of(p)), p))
        new_m.append(k.where(go, m2, m))
        new_v.append(k.where(go, v2, v))
    return new_p, new_m, new_v, k.where(go, t_new, steps)


class Adam(Optimizer):
    """Adam (torch.optim.Adam): ``weight_decay`` is an L2 term added to the gradient.

    ``step()`` uses the backend's fused ``adamw_step`` when it has one (not for
    ``amsgrad``), else :func:`adamw_step_reference`.  The fused kernel may
    update in place, so its calls run after every out-of-place computation
    (reference compositions, other backends, other groups) has succeeded, and
    step counts change only once all have; a failing step leaves parameters
    and state bit-identical (except for an internal error inside a fused kernel
    after another fused call wrote; see :mod:`ampcore.optim.optimizer`).
    State per parameter:
    ``step`` (int), ``exp_avg``, ``exp_avg_sq`` (and ``max_exp_avg_sq`` with
    amsgrad), float32 for float32/float16/bfloat16 parameters.
    ValueError for lr < 0, eps < 0, betas outside [0, 1) or weight_decay < 0.

    ``foreach`` and ``fused`` are torch's options.  ``foreach`` changes
    nothing here (every group is one multi-tensor step already).
    ``fused=None`` (default) uses the backend's fused kernel where there is
    one; ``fused=False`` always runs the reference composition (the same
    bits on the cpu backend); ``fused=True`` requires the fused kernel
    (ValueError naming the backends without one, or for ``amsgrad``).  Under a
    GradScaler a ``fused=True`` optimizer on backends with ``adamw_step_amp``
    (cpu, opencl and cuda) is stepped with ``found_inf`` on the device: the step is skipped
    there, with no host read, and the step counts become 1-element float32
    device tensors (as torch's fused state); ``scaler.step`` then returns None.
    """

    decoupled = False

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        check_foreach_fused(type(self).__name__, foreach, fused)
        defaults = dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, foreach=foreach, fused=fused
        )
        super().__init__(params, defaults)

    @property
    def _step_supports_amp_scaling(self) -> bool:
        """True when every group is ``fused=True`` and every parameter's backend has ``adamw_step_amp``: then
        ``GradScaler.step`` hands this optimizer ``found_inf`` and the step is skipped on the device (torch's
        fused path, no host read)."""
        return all(
            group["fused"] and all(p._backend.kernels.has("adamw_step_amp") for p in group["params"])
            for group in self.param_groups
        )

    @property
    def _captures_amp_step(self) -> bool:
        """A compiled step (ampcore.compile) steps on the device (``adamw_step_amp``, or its reference
        composition where a backend lacks it and stores float64), except with amsgrad."""
        return not any(group["amsgrad"] for group in self.param_groups) and all(
            p._backend.kernels.has("adamw_step_amp") or dt.float64 in _storable(p)
            for g in self.param_groups
            for p in g["params"]
        )

    def _validate_group(self, group: dict[str, Any]) -> None:
        check_hyper("learning rate", group["lr"])
        check_hyper("epsilon value", group["eps"])
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"invalid betas {betas!r}: must be a pair (beta1, beta2)")
        check_hyper("beta parameter at index 0", betas[0], 0.0, 1.0, high_open=True)
        check_hyper("beta parameter at index 1", betas[1], 0.0, 1.0, high_open=True)
        check_hyper("weight_decay value", group["weight_decay"])
        group["betas"] = (float(betas[0]), float(betas[1]))
        name = type(self).__name__
        group.setdefault("foreach", None)
        group.setdefault("fused", None)
        check_foreach_fused(name, group["foreach"], group["fused"])
        if group["fused"]:
            if group["amsgrad"]:
                raise ValueError(
                    f"{name}(fused=True) does not support amsgrad=True: the backends' fused adamw_step has no "
                    "max_exp_avg_sq; pass fused=None (or False) with amsgrad"
                )
            lacking = sorted({p._backend.name for p in group["params"] if not p._backend.kernels.has("adamw_step")})
            if lacking:
                raise ValueError(
                    f"{name}(fused=True): backend(s) {lacking} have no fused adamw_step kernel; pass fused=None "
                    "(the fused kernel where there is one) or fused=False"
                )

    def _state_spec(self, group: dict[str, Any]) -> dict[str, str]:
        spec = {"step": "step", "exp_avg": "tensor", "exp_avg_sq": "tensor"}
        if group["amsgrad"]:
            spec["max_exp_avg_sq"] = "tensor"
        return spec

    def _update(self, group: dict[str, Any], params: list[Tensor]) -> Callable[[], Callable[[], None]]:
        amsgrad = bool(group["amsgrad"])
        states = {}
        for p in params:
            st = self.state.get(p)
            if not st:
                st = {"step": 0, "exp_avg": self._new_state_tensor(p), "exp_avg_sq": self._new_state_tensor(p)}
                if amsgrad:
                    st["max_exp_avg_sq"] = self._new_state_tensor(p)
            states[p] = st
        if self._skip is not None:
            return self._update_on_device(group, params, states, self._skip)
        for st in states.values():
            if isinstance(st["step"], Tensor):  # counted on the device by an earlier fused AMP step
                st["step"] = int(st["step"].item())
        # One kernel call per backend and step count (usually one for the whole group).
        buckets: dict[tuple[int, int], list[Tensor]] = {}
        for p in params:
            buckets.setdefault((id(p._backend), states[p]["step"] + 1), []).append(p)
        # The fused kernel may write p, m and v in place, so it runs in the finish phase, after every
        # out-of-place computation of every group has succeeded (see the optimizer module's docstring).
        use_fused = group["fused"] is not False and not amsgrad
        fused = [key for key, ps in buckets.items() if use_fused and ps[0]._backend.kernels.has("adamw_step")]
        results = {
            key: self._run(group, ps, states, key[1], fused=False) for key, ps in buckets.items() if key not in fused
        }

        def finish() -> Callable[[], None]:
            for key in fused:
                results[key] = self._run(group, buckets[key], states, key[1], fused=True)
            return commit

        def commit() -> None:
            for key, ps in buckets.items():
                arrays = results[key]
                for i, p in enumerate(ps):
                    st = states[p]
                    p._data, st["exp_avg"]._data, st["exp_avg_sq"]._data = arrays[0][i], arrays[1][i], arrays[2][i]
                    if amsgrad:
                        st["max_exp_avg_sq"]._data = arrays[3][i]
                    st["step"] = key[1]
                    self.state[p] = st
                    self._mark_owned(p)

        return finish

    def _update_on_device(
        self,
        group: dict[str, Any],
        params: list[Tensor],
        states: dict[Tensor, dict[str, Any]],
        skip: dict[Any, Tensor],
    ) -> Callable[[], Callable[[], None]]:
        """The fused AMP step: ``adamw_step_amp`` per (device, step counter), skipped on the device where
        ``skip`` is nonzero.  Step counts live on the device as 1-element float32 tensors (torch's fused
        state), one tensor shared by the parameters that have taken the same number of steps."""
        shared: dict[tuple[Any, int], Tensor] = {}
        for p in params:
            st = states[p]
            if not isinstance(st["step"], Tensor):
                key = (p.device, int(st["step"]))
                if key not in shared:
                    shared[key] = full((1,), float(st["step"]), dtype=dt.float32, device=p.device)
                st["step"] = shared[key]
        buckets: dict[int, list[Tensor]] = {}
        for p in params:
            buckets.setdefault(id(states[p]["step"]), []).append(p)
        results: dict[int, tuple[Any, ...]] = {}

        def finish() -> Callable[[], None]:
            for key, ps in buckets.items():
                k = guarded_kernels(ps[0]._backend, f"{type(self).__name__}.step")
                beta1, beta2 = group["betas"]
                flag = skip.get(ps[0].device)
                if flag is None:
                    raise RuntimeError(
                        f"{type(self).__name__}.step: the GradScaler found no gradients on {str(ps[0].device)!r}"
                    )
                fused = ps[0]._backend.kernels.has("adamw_step_amp")
                step = k.adamw_step_amp if fused else functools.partial(adamw_step_amp_reference, k)
                results[key] = step(
                    [self._private(p) if fused else p._data for p in ps],
                    [grad_data(p) for p in ps],
                    [states[p]["exp_avg"]._data for p in ps],
                    [states[p]["exp_avg_sq"]._data for p in ps],
                    states[ps[0]]["step"]._data,
                    flag._data,
                    # read afresh by every replay of a compiled step: a scheduler may change it between steps
                    lr=dynamic(float(group["lr"]), functools.partial(group.__getitem__, "lr")),
                    beta1=beta1,
                    beta2=beta2,
                    eps=float(group["eps"]),
                    weight_decay=float(group["weight_decay"]),
                    decoupled=self.decoupled,
                )
            return commit

        def commit() -> None:
            for key, ps in buckets.items():
                new_p, new_m, new_v, steps = results[key]
                for i, p in enumerate(ps):
                    st = states[p]
                    p._data, st["exp_avg"]._data, st["exp_avg_sq"]._data = new_p[i], new_m[i], new_v[i]
                    self.state[p] = st
                    self._mark_owned(p)
                states[ps[0]]["step"]._data = steps

        return finish

    def _run(
        self, group: dict[str, Any], ps: list[Tensor], states: dict[Tensor, dict[str, Any]], step: int, fused: bool
    ) -> tuple[list[Any], ...]:
        """New ``(params, exp_avgs, exp_avg_sqs[, max_exp_avg_sqs])`` arrays for one bucket: the backend's
        fused kernel (in place on arrays this optimizer owns) or the out-of-place reference composition."""
        k = guarded_kernels(ps[0]._backend, f"{type(self).__name__}.step")
        beta1, beta2 = group["betas"]
        hyper = dict(
            step=step,
            lr=float(group["lr"]),
            beta1=beta1,
            beta2=beta2,
            eps=float(group["eps"]),
            weight_decay=float(group["weight_decay"]),
            decoupled=self.decoupled,
        )
        grads = [grad_data(p) for p in ps]
        m = [states[p]["exp_avg"]._data for p in ps]
        v = [states[p]["exp_avg_sq"]._data for p in ps]
        if fused:
            return k.adamw_step([self._private(p) for p in ps], grads, m, v, **hyper)
        vmax = [states[p]["max_exp_avg_sq"]._data for p in ps] if group["amsgrad"] else None
        return adamw_step_reference(k, [p._data for p in ps], grads, m, v, max_exp_avg_sqs=vmax, **hyper)


class AdamW(Adam):
    """AdamW (torch.optim.AdamW): decoupled weight decay ``p *= 1 - lr * weight_decay``
    before the Adam update; ``weight_decay`` defaults to 1e-2.  Otherwise as :class:`Adam`."""

    decoupled = True

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            foreach=foreach,
            fused=fused,
        )
