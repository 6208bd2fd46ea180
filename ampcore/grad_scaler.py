"""GradScaler's old home: it lives in :mod:`ampcore.amp.grad_scaler` (``ampcore.GradScaler`` and
``ampcore.amp.GradScaler`` are the same class)."""

from .amp.grad_scaler import GradScaler, OptState

__all__ = ["GradScaler", "OptState"]
