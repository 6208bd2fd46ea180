"""``ampcore.distributed.optim``: torch.distributed.optim's ZeroRedundancyOptimizer (ZeRO stage 1, see :mod:`.zero`)."""

from __future__ import annotations

from .zero import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
