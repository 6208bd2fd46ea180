"""InstanceNorm1d/2d/3d: each sample's channels normalised over their own spatial elements (torch.nn's names,
defaults and state-dict entries: ``weight``/``bias`` with ``affine=True``, ``running_mean``/``running_var``/
``num_batches_tracked`` with ``track_running_stats=True``)."""

from __future__ import annotations

from typing import Any

from ...autograd import no_grad
from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from .normalization import add_affine_and_running_stats

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(Module):
    """``(num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, *, bias=True)``
    (``bias=False`` keeps an affine weight without a shift); the input is (N, C, *spatial) or unbatched (C,
    *spatial)."""

    _SPATIAL = 0

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        add_affine_and_running_stats(self, num_features, affine, bias, track_running_stats, device, dtype)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        n = self._SPATIAL
        if input.ndim not in (n + 1, n + 2):
            raise ValueError(
                f"{type(self).__name__} expects a {n + 2}-D (batched) or {n + 1}-D (unbatched) input, got shape "
                f"{input.shape}"
            )
        batched = input.ndim == n + 2
        x = input if batched else input.unsqueeze(0)
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels, got input {input.shape}")
        use_input_stats = self.training or not self.track_running_stats
        factor = 0.1 if self.momentum is None else self.momentum
        out = F.instance_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, use_input_stats, factor, self.eps
        )
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
        return out if batched else out.squeeze(0)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """torch.nn.InstanceNorm1d over (N, C, L) or (C, L) input."""

    _SPATIAL = 1


class InstanceNorm2d(_InstanceNorm):
    """torch.nn.InstanceNorm2d over (N, C, H, W) or (C, H, W) input."""

    _SPATIAL = 2


class InstanceNorm3d(_InstanceNorm):
    """torch.nn.InstanceNorm3d over (N, C, D, H, W) or (C, D, H, W) input."""

    _SPATIAL = 3
