"""Adagrad, RMSprop and Adadelta: torch.optim's per-element adaptive rates, with torch's update rules.

Each keeps per-parameter state tensors in float32 (float64 for float64
parameters), computes the update out of place with the backend's elementwise
kernels in that precision, and rounds once into the parameter's dtype, like
:class:`~ampcore.optim.SGD`.  ``maximize`` steps up the gradient.  torch's
``foreach``, ``capturable`` and ``differentiable`` are accepted and change
nothing (the step is already one pass of primitives; there is no graph
capture of optimizers here).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..creation import full
from ..dispatch import guarded_kernels
from ..tensor import Tensor
from .adam import _widen
from .optimizer import Optimizer, check_hyper, grad_data, state_dtype

__all__ = ["Adagrad", "RMSprop", "Adadelta"]


class _ElementwiseOptimizer(Optimizer):
    """An update ``(p, g, state arrays, step) -> (p, state arrays)`` applied per parameter, then committed."""

    _STATE: tuple[str, ...] = ()

    def _state_names(self, group: dict[str, Any]) -> tuple[str, ...]:
        return self._STATE

    def _state_spec(self, group: dict[str, Any]) -> dict[str, str]:
        return {"step": "step", **dict.fromkeys(self._state_names(group), "tensor")}

    def _initial(self, p: Tensor, name: str, group: dict[str, Any]) -> Tensor:
        return self._new_state_tensor(p)

    def _rule(self, k: Any, group: dict[str, Any], p: Any, g: Any, state: dict[str, Any], step: int) -> Any:
        """The new parameter array (in the state dtype); ``state`` (name -> array) is updated in the dict."""
        raise NotImplementedError

    def _update(self, group: dict[str, Any], params: list[Tensor]) -> Callable[[], Callable[[], None]]:
        names = self._state_names(group)
        staged = []
        for p in params:
            k = guarded_kernels(p._backend, f"{type(self).__name__}.step")
            st = self.state.get(p) or {"step": 0, **{n: self._initial(p, n, group) for n in names}}
            cdt = state_dtype(p)
            g = _widen(k, grad_data(p), cdt)
            if group.get("maximize"):
                g = k.neg(g)
            if group["weight_decay"]:
                g = k.add(g, k.mul(_widen(k, p._data, cdt), float(group["weight_decay"])))
            arrays = {n: st[n]._data for n in names}
            step = int(st["step"]) + 1
            new_p = self._rule(k, group, _widen(k, p._data, cdt), g, arrays, step)
            staged.append((p, st, _widen(k, new_p, p.dtype), arrays, step))

        def commit() -> None:
            for p, st, data, arrays, step in staged:
                p._data = data
                for n, a in arrays.items():
                    st[n]._data = a
                st["step"] = step
                self.state[p] = st

        return lambda: commit  # out of place throughout: nothing to run in the finish phase


class Adagrad(_ElementwiseOptimizer):
    """torch.optim.Adagrad::

    g = g + weight_decay * p
    clr = lr / (1 + (step - 1) * lr_decay)
    sum = sum + g * g                       (starts at initial_accumulator_value)
    p = p - clr * g / (sqrt(sum) + eps)
    """

    _STATE = ("sum",)

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        if fused:
            raise ValueError("Adagrad(fused=True) is not supported: no ampcore backend has a fused Adagrad kernel")
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any]) -> None:
        check_hyper("learning rate", group["lr"])
        check_hyper("lr_decay value", group["lr_decay"])
        check_hyper("weight_decay value", group["weight_decay"])
        check_hyper("initial_accumulator_value value", group["initial_accumulator_value"])
        check_hyper("epsilon value", group["eps"])

    def _initial(self, p: Tensor, name: str, group: dict[str, Any]) -> Tensor:
        return full(p.shape, float(group["initial_accumulator_value"]), dtype=state_dtype(p), device=p.device)

    def _rule(self, k: Any, group: dict[str, Any], p: Any, g: Any, state: dict[str, Any], step: int) -> Any:
        clr = float(group["lr"]) / (1 + (step - 1) * float(group["lr_decay"]))
        state["sum"] = k.add(state["sum"], k.mul(g, g))
        std = k.add(k.sqrt(state["sum"]), float(group["eps"]))
        return k.sub(p, k.mul(k.div(g, std), clr))


class RMSprop(_ElementwiseOptimizer):
    """torch.optim.RMSprop::

    g = g + weight_decay * p
    square_avg = alpha * square_avg + (1 - alpha) * g * g
    if centered: grad_avg = alpha * grad_avg + (1 - alpha) * g
                 avg = sqrt(square_avg - grad_avg * grad_avg) + eps
    else:        avg = sqrt(square_avg) + eps
    if momentum: buf = momentum * buf + g / avg;  p = p - lr * buf
    else:        p = p - lr * g / avg
    """

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            capturable=capturable,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any]) -> None:
        check_hyper("learning rate", group["lr"])
        check_hyper("epsilon value", group["eps"])
        check_hyper("momentum value", group["momentum"])
        check_hyper("weight_decay value", group["weight_decay"])
        check_hyper("alpha value", group["alpha"])

    def _state_names(self, group: dict[str, Any]) -> tuple[str, ...]:
        names: tuple[str, ...] = ("square_avg",)
        if group["momentum"] > 0:
            names += ("momentum_buffer",)
        if group["centered"]:
            names += ("grad_avg",)
        return names

    def _rule(self, k: Any, group: dict[str, Any], p: Any, g: Any, state: dict[str, Any], step: int) -> Any:
        alpha, eps, lr = float(group["alpha"]), float(group["eps"]), float(group["lr"])
        state["square_avg"] = k.add(k.mul(state["square_avg"], alpha), k.mul(k.mul(g, g), 1.0 - alpha))
        if group["centered"]:
            state["grad_avg"] = k.add(k.mul(state["grad_avg"], alpha), k.mul(g, 1.0 - alpha))
            variance = k.sub(state["square_avg"], k.mul(state["grad_avg"], state["grad_avg"]))
            avg = k.add(k.sqrt(variance), eps)
        else:
            avg = k.add(k.sqrt(state["square_avg"]), eps)
        if group["momentum"] > 0:
            state["momentum_buffer"] = k.add(k.mul(state["momentum_buffer"], float(group["momentum"])), k.div(g, avg))
            return k.sub(p, k.mul(state["momentum_buffer"], lr))
        return k.sub(p, k.mul(k.div(g, avg), lr))


class Adadelta(_ElementwiseOptimizer):
    """torch.optim.Adadelta::

    g = g + weight_decay * p
    square_avg = rho * square_avg + (1 - rho) * g * g
    delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g
    acc_delta = rho * acc_delta + (1 - rho) * delta * delta
    p = p - lr * delta
    """

    _STATE = ("square_avg", "acc_delta")

    def __init__(
        self,
        params: Any,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr,
            rho=rho,
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
            capturable=capturable,
            maximize=maximize,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any]) -> None:
        check_hyper("learning rate", group["lr"])
        check_hyper("rho value", group["rho"], high=1.0)
        check_hyper("epsilon value", group["eps"])
        check_hyper("weight_decay value", group["weight_decay"])

    def _rule(self, k: Any, group: dict[str, Any], p: Any, g: Any, state: dict[str, Any], step: int) -> Any:
        rho, eps, lr = float(group["rho"]), float(group["eps"]), float(group["lr"])
        state["square_avg"] = k.add(k.mul(state["square_avg"], rho), k.mul(k.mul(g, g), 1.0 - rho))
        std = k.sqrt(k.add(state["square_avg"], eps))
        delta = k.mul(k.div(k.sqrt(k.add(state["acc_delta"], eps)), std), g)
        state["acc_delta"] = k.add(k.mul(state["acc_delta"], rho), k.mul(k.mul(delta, delta), 1.0 - rho))
        return k.sub(p, k.mul(delta, lr))
