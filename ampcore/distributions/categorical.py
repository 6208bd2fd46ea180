"""Categorical: a distribution over ``K`` categories per batch entry, from ``probs`` or ``logits``."""

from __future__ import annotations

import math
from typing import Any

from .. import dtypes as dt
from ..autograd import no_grad
from ..creation import multinomial
from ..nn import functional as F
from ..ops import take_along_dim
from ..tensor import Tensor
from .distribution import Distribution

__all__ = ["Categorical"]


class Categorical(Distribution):
    """``Categorical(probs=None, logits=None, validate_args=None)``, exactly one of ``probs`` / ``logits``.

    ``probs`` (non-negative, any scale along the last dimension) are divided by
    their sum; ``logits`` are normalised to log-probabilities (``logits -
    logsumexp``).  ``sample(sample_shape)`` draws int64 category indices with
    ``ampcore.multinomial`` (seeded by ``ampcore.manual_seed``);
    ``log_prob(value)`` picks each value's log-probability and is
    differentiable in ``probs`` / ``logits``; ``entropy()``.  ValueError for
    both or neither parameter, or one with no category dimension.
    """

    def __init__(self, probs: Tensor | None = None, logits: Tensor | None = None, validate_args: Any = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Categorical needs exactly one of probs or logits")
        given = probs if probs is not None else logits
        if not isinstance(given, Tensor) or given.ndim < 1:
            raise ValueError(f"Categorical's parameter must be a tensor with a category dimension, got {given!r}")
        if probs is not None:
            self.probs = probs / probs.sum(-1, keepdim=True)
            eps = dt.finfo(self.probs.dtype).eps  # as torch: a zero probability's log stays finite, its gradient too
            self.logits = self.probs.clamp(min=eps, max=1.0 - eps).log()
        else:
            assert logits is not None
            self.logits = F.log_softmax(logits, -1)
            self.probs = self.logits.exp()
        self._num_events = given.shape[-1]
        super().__init__(batch_shape=given.shape[:-1])

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self.probs.shape

    @property
    def mode(self) -> Tensor:
        """The most probable category of each batch entry."""
        return self.probs.argmax(-1)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,)
        n = math.prod(shape)
        with no_grad():
            rows = self.probs.detach().reshape(-1, self._num_events)
            draws = multinomial(rows, max(n, 1), replacement=True)  # (batch, n)
            draws = draws.transpose(0, 1)[:n] if n else draws.transpose(0, 1)[:0]
            return draws.reshape(*shape, *self.batch_shape)

    def log_prob(self, value: Tensor) -> Tensor:
        if not isinstance(value, Tensor):
            raise TypeError(f"log_prob takes a tensor of category indices, got {type(value).__name__}")
        index = value.to(dtype=dt.int64)
        logits = self.logits.expand(*index.shape, self._num_events) if index.shape != self.batch_shape else self.logits
        return take_along_dim(logits, index.unsqueeze(-1), -1).squeeze(-1)

    def entropy(self) -> Tensor:
        # 0 * log 0 counts as 0: a zero probability's -inf log-probability is clamped to the dtype's lowest value
        lowest = dt.finfo(self.logits.dtype).min
        return -(self.probs * self.logits.clamp(min=lowest)).sum(-1)
