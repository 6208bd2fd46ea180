"""The base class of ampcore's distributions: torch.distributions.Distribution's shape vocabulary."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor

__all__ = ["Distribution"]


class Distribution:
    """``batch_shape`` (independent distributions side by side) and ``event_shape`` (one draw's shape);
    subclasses implement ``sample``, ``log_prob`` and ``entropy``."""

    def __init__(self, batch_shape: tuple[int, ...] = (), event_shape: tuple[int, ...] = ()) -> None:
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple[int, ...]:
        return self._event_shape

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """Draws of shape ``sample_shape + batch_shape + event_shape``, without gradient."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample")

    def log_prob(self, value: Tensor) -> Tensor:
        """The log-probability (or density) of ``value``; differentiable in the parameters."""
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def entropy(self) -> Tensor:
        """The entropy of each distribution in the batch."""
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_shape={self.batch_shape})"
