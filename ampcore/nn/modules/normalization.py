"""LayerNorm, GroupNorm and BatchNorm2d."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import dtypes as dt
from ...autograd import no_grad
from ...creation import ones, tensor, zeros
from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from ..parameter import Parameter

__all__ = ["LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


def add_affine_and_running_stats(
    module: Module, num_features: int, affine: bool, bias: bool, track_running_stats: bool, device: Any, dtype: Any
) -> None:
    """torch's per-channel state of batch and instance norm: ``weight`` (ones) and ``bias`` (zeros, unless ``bias``
    is False) when ``affine``; float32 ``running_mean``/``running_var`` and an int64 ``num_batches_tracked`` when
    ``track_running_stats``; the absent ones registered as None, as torch does."""
    module.affine, module.track_running_stats = affine, track_running_stats
    weight = Parameter(ones(num_features, device=device, dtype=dtype)) if affine else None
    module.register_parameter("weight", weight)
    module.register_parameter(
        "bias", Parameter(zeros(num_features, device=device, dtype=dtype)) if affine and bias else None
    )
    if track_running_stats:
        module.register_buffer("running_mean", zeros(num_features, device=device, dtype=dt.float32))
        module.register_buffer("running_var", ones(num_features, device=device, dtype=dt.float32))
        module.register_buffer("num_batches_tracked", tensor(0, dtype=dt.int64, device=device))
    else:
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            module.register_buffer(name, None)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dimensions, then scale and shift
    (``weight`` ones, ``bias`` zeros)."""

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(*shape, device=device, dtype=dtype))
            self.register_parameter("bias", Parameter(zeros(*shape, device=device, dtype=dtype)) if bias else None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalise (N, C, ...) input over ``num_groups`` groups of channels; per-channel affine."""

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(ones(num_channels, device=device, dtype=dtype))
            self.bias = Parameter(zeros(num_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _BatchNorm(Module):
    """Batch normalisation over every axis but the channels (axis 1); subclasses say which ranks they take.

    ``running_mean`` / ``running_var`` are float32 buffers (zeros / ones) and
    ``num_batches_tracked`` an int64 buffer.  In training the batch statistics
    are used and the running ones updated with ``momentum`` (a cumulative
    average when ``momentum`` is None); in eval the running statistics are used.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        add_affine_and_running_stats(self, num_features, affine, True, track_running_stats, device, dtype)

    def reset_running_stats(self) -> None:
        """Running mean to zeros, variance to ones, batch count to 0."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            self.num_batches_tracked.zero_()

    _RANKS: tuple[int, ...] = ()
    _LAYOUT = ""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        if input.ndim not in self._RANKS:
            raise ValueError(f"{type(self).__name__} expects {self._LAYOUT} input, got shape {input.shape}")
        counting = self.training and self.track_running_stats
        factor = 0.0 if self.momentum is None else self.momentum
        if counting and self.momentum is None:
            factor = 1.0 / float(self.num_batches_tracked.item() + 1)
        use_batch_stats = self.training or self.running_mean is None
        # torch's rule: pass the running stats in eval (to use them) and in training when tracked (to update them).
        running = not self.training or self.track_running_stats
        out = F.batch_norm(
            input,
            self.running_mean if running else None,
            self.running_var if running else None,
            self.weight,
            self.bias,
            use_batch_stats,
            factor,
            self.eps,
        )
        if counting:  # only after a forward that succeeded, so a refused batch changes no state
            with no_grad():
                self.num_batches_tracked.add_(1)
        return out

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) input over N (and L); as BatchNorm2d otherwise."""

    _RANKS = (2, 3)
    _LAYOUT = "2-D or 3-D (N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) input over N, H and W.

    ``running_mean`` / ``running_var`` are float32 buffers (zeros / ones) and
    ``num_batches_tracked`` an int64 buffer.  In training the batch statistics
    are used and the running ones updated with ``momentum`` (a cumulative
    average when ``momentum`` is None); in eval the running statistics are used.
    """

    _RANKS = (4,)
    _LAYOUT = "4-D (N, C, H, W)"


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of (N, C, D, H, W) input over N, D, H and W; as BatchNorm2d otherwise."""

    _RANKS = (5,)
    _LAYOUT = "5-D (N, C, D, H, W)"
