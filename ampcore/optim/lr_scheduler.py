"""Learning-rate schedulers with torch.optim.lr_scheduler's names, signatures and state dicts.

Each scheduler sets ``group["lr"]`` of its optimizer's parameter groups at
construction (epoch 0) and on every ``step()``, from the closed form of its
schedule in ``last_epoch`` and the groups' ``initial_lr`` (``base_lrs``)::

    StepLR              base * gamma ** (epoch // step_size)
    LambdaLR            base * lr_lambda(epoch)
    LinearLR            base * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) / total_iters)
    CosineAnnealingLR   eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
    OneCycleLR          torch's phases (warm-up to max_lr, anneal to max_lr / div_factor / final_div_factor),
                        cycling momentum (SGD's ``momentum``, Adam's ``betas[0]``) the other way
    SequentialLR        the scheduler whose milestone range holds the epoch, restarted at its milestone
    ExponentialLR       base * gamma ** epoch
    MultiStepLR         base * gamma ** (number of milestones <= epoch)

and ``ReduceLROnPlateau``, which follows a metric instead of the epoch
(``step(metric)``: the lr times ``factor`` after ``patience`` epochs without
improvement, then ``cooldown`` epochs of rest, never below ``min_lr``).

torch computes most of these recursively from the previous lr (the "chainable"
form), which agrees with the closed form up to rounding as long as nothing else
changes ``group["lr"]``; ampcore always uses the closed form, so a value set by
hand between steps is overwritten at the next ``step()``.
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
)

from ..hooks import CAPTURE
from ..names import missing_names_getattr as _missing_names_getattr
from .optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "StepLR",
    "LambdaLR",
    "LinearLR",
    "CosineAnnealingLR",
    "OneCycleLR",
    "SequentialLR",
    "ExponentialLR",
    "MultiStepLR",
    "ReduceLROnPlateau",
]


class LRScheduler:
    """Base class: ``optimizer``, ``base_lrs``, ``last_epoch``; ``step()``, ``get_last_lr()``, state dicts.

    With ``last_epoch=-1`` (a fresh start) each group's ``initial_lr`` is set
    to its ``lr`` (unless already there); resuming with another ``last_epoch``
    needs ``initial_lr`` in every group (KeyError otherwise, as torch).
    Subclasses implement :meth:`get_lr` as the closed form in ``self.last_epoch``.
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an ampcore Optimizer")
        if isinstance(last_epoch, bool) or not isinstance(last_epoch, int) or last_epoch < -1:
            raise ValueError(f"last_epoch must be an int >= -1, got {last_epoch!r}")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming an optimizer; "
                        "load the optimizer's state_dict first, or start with last_epoch=-1"
                    )
        self.base_lrs: list[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._last_lr: list[float] = []
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self.step()

    def get_lr(self) -> list[float]:
        """The learning rate of every group at ``self.last_epoch``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement get_lr")

    def get_last_lr(self) -> list[float]:
        """The learning rates the last ``step()`` (or the construction) set, one per group."""
        return list(self._last_lr)

    def step(self) -> None:
        """Advance one epoch (or iteration, for per-batch schedules) and set every group's ``lr``."""
        self._step_count += 1
        self.last_epoch += 1
        self._apply(self.get_lr())

    def _step_to(self, epoch: int) -> None:
        """Jump to ``epoch`` (SequentialLR restarts a scheduler at its milestone this way)."""
        self._step_count += 1
        self.last_epoch = epoch
        self._apply(self.get_lr())

    def _apply(self, lrs: Sequence[float]) -> None:
        recorder = CAPTURE.recorder
        if recorder is not None:  # a captured call's replay runs no Python: the new lr would never be set
            recorder.add_break(
                "an LR scheduler stepped inside the captured call (a replay would not step it): call "
                "scheduler.step() outside the compiled function; the optimizer reads the lr afresh on every replay"
            )
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """Every attribute except the optimizer (torch's format)."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (the optimizer's ``lr`` follows at the next ``step()``)."""
        self.__dict__.update(state_dict)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={self._last_lr})"


def _per_group(optimizer: Optimizer, name: str, value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} values for {name}, got {len(value)}")
        return list(value)
    return [value] * len(optimizer.param_groups)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


class StepLR(LRScheduler):
    """Decay each group's lr by ``gamma`` every ``step_size`` epochs: ``base * gamma ** (epoch // step_size)``."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.step_size = _positive_int("step_size", step_size)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """``base * lr_lambda(epoch)``; ``lr_lambda`` is one function or one per group.

    The state dict keeps callable *objects'* attributes; functions and
    lambdas are not saved (None), as in torch.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        self.lr_lambdas: list[Callable[[int], float]] = _per_group(optimizer, "lr_lambda", lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda must be callable, got {fn!r}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else dict(fn.__dict__) for fn in self.lr_lambdas
        ]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class LinearLR(LRScheduler):
    """Scale lr linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs, then hold."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 < start_factor <= 1:
            raise ValueError(f"start_factor must be in (0, 1], got {start_factor!r}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"end_factor must be in [0, 1], got {end_factor!r}")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = _positive_int("total_iters", total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        factor = self.start_factor + (self.end_factor - self.start_factor) * frac
        return [base * factor for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2`` (SGDR without restarts)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:  # noqa: N803 - torch's name
        self.T_max = _positive_int("T_max", T_max)
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        cos = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cos for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin), stepped once per batch, with torch's arguments and phases.

    The lr rises from ``max_lr / div_factor`` to ``max_lr`` over the first
    ``pct_start`` of ``total_steps`` (or ``epochs * steps_per_epoch``), then
    anneals to ``max_lr / div_factor / final_div_factor`` (``three_phase``:
    back to the start first).  With ``cycle_momentum`` the momentum (SGD's
    ``momentum`` or Adam's ``betas[0]``) moves between ``max_momentum`` and
    ``base_momentum`` the other way.  ValueError when stepped past ``total_steps``.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | Sequence[float] = 0.85,
        max_momentum: float | Sequence[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an ampcore Optimizer")
        if total_steps is not None:
            self.total_steps = _positive_int("total_steps", total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = _positive_int("epochs", epochs) * _positive_int("steps_per_epoch", steps_per_epoch)
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, (int, float)) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        t = self.total_steps
        self._schedule_phases: list[dict[str, Any]]
        if three_phase:
            self._schedule_phases = [
                {"end_step": float(pct_start * t) - 1, "lr": ("initial_lr", "max_lr"), "m": ("max", "base")},
                {"end_step": float(2 * pct_start * t) - 2, "lr": ("max_lr", "initial_lr"), "m": ("base", "max")},
                {"end_step": t - 1, "lr": ("initial_lr", "min_lr"), "m": ("max", "max")},
            ]
        else:
            self._schedule_phases = [
                {"end_step": float(pct_start * t) - 1, "lr": ("initial_lr", "max_lr"), "m": ("max", "base")},
                {"end_step": t - 1, "lr": ("max_lr", "min_lr"), "m": ("base", "max")},
            ]
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group, lr in zip(groups, _per_group(optimizer, "max_lr", max_lr)):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            bases = _per_group(optimizer, "base_momentum", base_momentum)
            maxes = _per_group(optimizer, "max_momentum", max_momentum)
            if last_epoch == -1:
                for group, m_max, m_base in zip(groups, maxes, bases):
                    self._set_momentum(group, m_max)
                    group["max_momentum"], group["base_momentum"] = m_max, m_base
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"Tried to step {step} times. The specified number of total steps is {self.total_steps}; "
                "make total_steps (or epochs * steps_per_epoch) cover every step"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["lr"][0]], group[phase["lr"][1]], pct)
                    if self.cycle_momentum:
                        m0, m1 = (group[f"{which}_momentum"] for which in phase["m"])
                        self._set_momentum(group, self._anneal(m0, m1, pct))
                    break
                start_step = end_step
            lrs.append(lr)
        return lrs


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another: ``schedulers[i]`` from ``milestones[i - 1]`` on, restarted at 0 there."""

    def __init__(
        self, optimizer: Optimizer, schedulers: Sequence[LRScheduler], milestones: Sequence[int], last_epoch: int = -1
    ) -> None:
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler")
        for i, s in enumerate(schedulers):
            if not isinstance(s, LRScheduler):
                raise TypeError(f"SequentialLR: schedulers[{i}] is {type(s).__name__}, not an LRScheduler")
            if s.optimizer is not optimizer:
                raise ValueError(
                    f"SequentialLR expects all schedulers to belong to the same optimizer, but schedulers[{i}] "
                    "has a different one"
                )
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "SequentialLR expects number of schedulers provided to be one more than the number of milestone "
                f"points, but got {len(schedulers)} schedulers and {len(milestones)} milestones"
            )
        self.optimizer = optimizer
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self._step_count = 1
        for group in optimizer.param_groups:  # undo the schedulers' initial steps, then make the first one's
            group["lr"] = group["initial_lr"]
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        for s in self._schedulers:
            s.last_epoch -= 1
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def get_lr(self) -> list[float]:
        return self.get_last_lr()

    def step(self) -> None:
        self._step_count += 1
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._step_to(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, sd in zip(self._schedulers, saved):
            s.load_state_dict(sd)


class ExponentialLR(LRScheduler):
    """Decay each group's lr by ``gamma`` every epoch: ``base * gamma ** epoch``."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Decay each group's lr by ``gamma`` at each of ``milestones``: ``base * gamma ** (milestones passed)``."""

    def __init__(
        self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.milestones = sorted(int(m) for m in milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * self.gamma ** bisect_right(self.milestones, self.last_epoch) for base in self.base_lrs]


class ReduceLROnPlateau(LRScheduler):
    """Lower the lr when a metric stops improving: ``scheduler.step(val_loss)`` once per epoch.

    ``mode`` "min" (a lower metric is better) or "max"; an epoch improves on
    the best so far by more than ``threshold`` (relative, or absolute with
    ``threshold_mode="abs"``).  After ``patience`` epochs without improvement
    every group's lr becomes ``max(lr * factor, min_lr)`` (unless that changes
    it by less than ``eps``), then ``cooldown`` epochs pass before counting
    again.  torch's rules and state dict.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | Sequence[float] = 0.0,
        eps: float = 1e-8,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an ampcore Optimizer")
        if not 0 <= factor < 1.0:
            raise ValueError(f"Factor should be < 1.0, got factor={factor!r}")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode!r} is unknown; use 'min' or 'max'")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode!r} is unknown; use 'rel' or 'abs'")
        self.optimizer = optimizer
        self.min_lrs = [float(v) for v in _per_group(optimizer, "min_lr", min_lr)]
        self.factor, self.patience, self.cooldown, self.eps = factor, patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def is_better(self, a: float, best: float) -> bool:
        """Whether metric ``a`` improves on ``best`` by more than the threshold."""
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (1.0 + self.threshold) if self.threshold_mode == "rel" else best + self.threshold)

    def step(self, metrics: Any = None) -> None:  # torch's signature: the metric
        """Record this epoch's ``metrics`` (a number or a one-element tensor) and lower the lr if it stalled."""
        if metrics is None:
            raise TypeError("ReduceLROnPlateau.step() needs the metric: scheduler.step(val_loss)")
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        self.last_epoch += 1
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, floor in zip(self.optimizer.param_groups, self.min_lrs):
                new_lr = max(group["lr"] * self.factor, floor)
                if group["lr"] - new_lr > self.eps:
                    group["lr"] = new_lr
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_lr(self) -> list[float]:
        return list(self._last_lr)


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
