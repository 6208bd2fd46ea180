"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..dispatch import guarded_kernels
from ..tensor import Tensor
from .adam import _widen
from .optimizer import Optimizer, check_foreach_fused, check_hyper, grad_data, state_dtype

__all__ = ["SGD"]


class SGD(Optimizer):
    """torch.optim.SGD.  For each parameter p with gradient g, in float32 (float64 for
    float64 parameters)::

        g = g + weight_decay * p
        if momentum:
            buf = g                                         (first step)
            buf = momentum * buf + (1 - dampening) * g      (later steps)
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g

    State: ``momentum_buffer`` (float32 for float32/float16/bfloat16
    parameters) once momentum is used.  ValueError for lr, momentum or
    weight_decay < 0, or nesterov without momentum or with dampening.
    ``foreach`` (torch's option) changes nothing here; ``fused=True`` raises
    ValueError (no backend has a fused SGD kernel).
    """

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        check_foreach_fused("SGD", foreach, fused)
        if fused:
            raise ValueError(
                "SGD(fused=True) is not supported: no ampcore backend has a fused SGD kernel; pass fused=None "
                "(the update is already one pass over each group's primitives)"
            )
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            foreach=foreach,
            fused=fused,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any]) -> None:
        check_hyper("learning rate", group["lr"])
        check_hyper("momentum value", group["momentum"])
        check_hyper("dampening value", group["dampening"])
        check_hyper("weight_decay value", group["weight_decay"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(
                f"Nesterov momentum needs a momentum > 0 and zero dampening, got "
                f"momentum={group['momentum']!r}, dampening={group['dampening']!r}"
            )

    def _state_spec(self, group: dict[str, Any]) -> dict[str, str]:
        return {"momentum_buffer": "optional_tensor"}

    def _update(self, group: dict[str, Any], params: list[Tensor]) -> Callable[[], Callable[[], None]]:
        lr, momentum, dampening = float(group["lr"]), float(group["momentum"]), float(group["dampening"])
        weight_decay, nesterov = float(group["weight_decay"]), bool(group["nesterov"])
        new = []
        for p in params:
            k = guarded_kernels(p._backend, f"{type(self).__name__}.step")
            st = self.state.get(p, {})
            buf_t = st.get("momentum_buffer")
            cdt = state_dtype(p)
            pc, g = _widen(k, p._data, cdt), _widen(k, grad_data(p), cdt)
            if weight_decay:
                g = k.add(g, k.mul(pc, weight_decay))
            buf = None
            if momentum:
                buf = (
                    k.cast(g, cdt) if buf_t is None else k.add(k.mul(buf_t._data, momentum), k.mul(g, 1.0 - dampening))
                )
                g = k.add(g, k.mul(buf, momentum)) if nesterov else buf
            new.append((_widen(k, k.sub(pc, k.mul(g, lr)), p.dtype), buf))

        def commit() -> None:
            for p, (data, buf) in zip(params, new):
                p._data = data
                if buf is not None:
                    st = self.state.setdefault(p, {})
                    if st.get("momentum_buffer") is None:
                        st["momentum_buffer"] = Tensor._wrap(buf, p.device, p._backend)
                    else:
                        st["momentum_buffer"]._data = buf

        return lambda: commit  # no in-place kernels: nothing to run in the finish phase
