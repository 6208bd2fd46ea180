"""Observability: each Float8Linear's per-step amax, scale and saturated-value count, and converting a model.

``float8_stats(model)`` (also ``model.float8_stats()`` on a converted
model) returns ``{layer fqn: {role: {"amax": [...], "scale": [...],
"saturated": [...]}}}`` for the roles ``input``, ``weight`` and
``grad_output``: one entry per training step (the last
:data:`~ampcore.float8.casting.STATS_LENGTH`), oldest first.  ``scale`` is
the multiplier the cast applied (for row-wise and block recipes the
smallest of the tensor's scales, the one its amax met; ``amax`` their
largest).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..nn.module import Module
from ..nn.modules.linear import Linear
from .linear import Float8Linear, Float8LinearConfig, as_config
from .recipes import Recipe

__all__ = ["float8_stats", "summarize", "convert_to_float8_training"]

Stats = dict[str, dict[str, dict[str, list[Any]]]]


def float8_stats(model: Module) -> Stats:
    """Per Float8Linear of ``model`` (by fqn), per role: the amax, scale and saturated-count history."""
    if not isinstance(model, Module):
        raise TypeError(f"float8_stats needs an ampcore.nn.Module, got {type(model).__name__}")
    return {
        (name or mod.fqn or type(mod).__name__): {role: c.stats.as_dict() for role, c in mod.casters.items()}
        for name, mod in model.named_modules()
        if isinstance(mod, Float8Linear)
    }


def summarize(stats: Stats) -> dict[str, dict[str, float | int]]:
    """One row per layer and role: the latest amax and scale, and the saturated values summed over all steps."""
    rows: dict[str, dict[str, float | int]] = {}
    for layer, roles in stats.items():
        for role, hist in roles.items():
            if hist["amax"]:
                rows[f"{layer}.{role}"] = {
                    "amax": hist["amax"][-1],
                    "scale": hist["scale"][-1],
                    "saturated": int(sum(hist["saturated"])),
                    "steps": len(hist["amax"]),
                }
    return rows


def convert_to_float8_training(
    model: Module,
    config: Float8LinearConfig | Recipe | str | None = None,
    module_filter_fn: Callable[[Module, str], bool] | None = None,
) -> Module:
    """Swap every ``nn.Linear`` in ``model`` for a :class:`Float8Linear`, in place; returns ``model``.

    torchao's function: ``module_filter_fn(module, fqn)`` returning False
    keeps that layer as it is.  ``config`` is a :class:`Float8LinearConfig`,
    a recipe or a recipe's string (``"tensorwise"`` by default).  The
    converted model gains a ``float8_stats()`` method (:func:`float8_stats`).
    A model that is itself a Linear is returned as a new Float8Linear.
    """
    if not isinstance(model, Module):
        raise TypeError(f"convert_to_float8_training needs an ampcore.nn.Module, got {type(model).__name__}")
    cfg = as_config(config)
    if type(model) is Linear:
        if module_filter_fn is None or module_filter_fn(model, ""):
            model = Float8Linear.from_float(model, cfg, "")
    else:
        for fqn, mod in list(model.named_modules()):
            for name, child in list(mod.named_children()):
                child_fqn = f"{fqn}.{name}" if fqn else name
                if type(child) is Linear and (module_filter_fn is None or module_filter_fn(child, child_fqn)):
                    setattr(mod, name, Float8Linear.from_float(child, cfg, child_fqn))
    object.__setattr__(model, "float8_stats", types.MethodType(float8_stats, model))
    return model
