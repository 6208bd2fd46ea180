"""Casting one tensor of a linear layer to float8 under a recipe, and the GEMM over two cast operands.

Every GEMM of a linear layer is written ``C = A @ B.T`` with both operands
reducing along their last dimension:

==============  ==========  ===========  ====================
GEMM            A           B            C
==============  ==========  ===========  ====================
output          x (M, K)    w (N, K)     (M, N)
grad_input      g (M, N)    w.T (K, N)   (M, K)
grad_weight     g.T (N, M)  x.T (K, M)   (N, K)
==============  ==========  ===========  ====================

so row-wise and block scales always run along the reduction dimension.
A per-tensor operand's transpose is the transpose of its float8 values
(same scale), so tensorwise and delayed recipes cast each tensor once per
step; row-wise and block recipes cast a tensor again for its transposed use,
as torchao's axiswise recipe does.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes as dt
from ..creation import from_numpy, zeros
from ..ops import cat, matmul
from ..ops import float8 as f8ops
from ..tensor import Tensor
from .recipes import DelayedScaling, MXFP8BlockScaling, Recipe
from .scaling import FP8_MAX, AmaxHistory, current_scale, delayed_scale, mx_scale

__all__ = ["Operand", "TensorCaster", "gemm", "STATS_LENGTH"]

# Steps of amax / scale / saturation kept per tensor for float8_stats().
STATS_LENGTH = 1024


@dataclass
class Operand:
    """One GEMM operand in float8: values ``q`` and the dequantisation scale ``inv_scale`` (1/scale).

    ``inv_scale`` is 0-d (per tensor) or (rows, 1) (row-wise); a block-scaled
    operand carries ``dequantized`` instead (its float8 values times their
    power-of-two block scales, exact in float32).
    """

    q: Tensor | None
    inv_scale: Tensor | None
    dequantized: Tensor | None = None
    scale_text: str = ""

    @property
    def T(self) -> Operand:  # noqa: N802 - Tensor's name for a transpose
        """The transposed operand; only per-tensor operands transpose without a new cast."""
        if self.q is None or self.inv_scale is None or self.inv_scale.ndim != 0:
            raise ValueError("only a per-tensor float8 operand can be transposed; cast the transpose instead")
        return Operand(self.q.t(), self.inv_scale, None, self.scale_text)


@dataclass
class CastStats:
    """Per-step records of one tensor's casts: its amax, the scale applied and how many values saturated."""

    amax: deque[float] = field(default_factory=lambda: deque(maxlen=STATS_LENGTH))
    scale: deque[float] = field(default_factory=lambda: deque(maxlen=STATS_LENGTH))
    saturated: deque[int] = field(default_factory=lambda: deque(maxlen=STATS_LENGTH))

    def as_dict(self) -> dict[str, list[float] | list[int]]:
        return {"amax": list(self.amax), "scale": list(self.scale), "saturated": list(self.saturated)}


def _quantize(x: Tensor, scale: Tensor, dtype: dt.DType) -> tuple[Tensor, Tensor]:
    """The kernel's (q, amax), saturating (every recipe clamps to ±fp8_max, as torchao does)."""
    q, amax = f8ops.quantize_float8(x, scale, dtype, True)
    return q, amax


def _host(t: Tensor) -> np.ndarray:
    return np.asarray(t.numpy(), dtype=np.float32)


def _scale_tensor(scale: np.ndarray | np.floating, like: Tensor) -> Tensor:
    return from_numpy(np.array(scale, dtype=np.float32)).to(device=like.device)  # 0-d stays 0-d


class TensorCaster:
    """Casts one role (``"input"``, ``"weight"`` or ``"grad_output"``) of one layer under ``recipe``.

    Holds the delayed recipe's amax history and the role's :class:`CastStats`.
    Saturated values are counted where a recipe can saturate (delayed scaling,
    whose scale lags the data, and MX blocks, whose largest element may land
    above fp8_max); current scaling maps the amax onto fp8_max, so it records 0
    without an extra pass.
    """

    def __init__(self, recipe: Recipe, role: str) -> None:
        self.recipe = recipe
        self.role = role
        self.dtype_name = recipe.fp8_format.dtype_name(role)
        self.dtype = dt.as_dtype(self.dtype_name)
        self.fp8_max = FP8_MAX[self.dtype_name]
        self.history = AmaxHistory(recipe.amax_history_len) if isinstance(recipe, DelayedScaling) else None
        self.stats = CastStats()

    def cast(self, x: Tensor, record: bool = True) -> Operand:
        """``x`` (2-D) in float8; ``record`` adds this cast to the stats (one primary cast per role and step)."""
        granularity = self.recipe.granularity
        if granularity == "block":
            return self._cast_blocks(x, record)
        if self.history is not None:
            return self._cast_delayed(x, record)
        rowwise = granularity == "rowwise"
        amax = _host(x.abs().amax(dim=1, keepdim=True) if rowwise else x.abs().amax())
        scale = current_scale(amax, self.dtype_name, self.recipe.round_scales_to_power_of_2)
        q, _ = _quantize(x, _scale_tensor(scale, x), self.dtype)
        if record:
            self._record(float(amax.max()), float(scale.min()), 0)
        return Operand(q, _scale_tensor(np.float32(1.0) / scale, x), None, _describe(scale))

    def _cast_delayed(self, x: Tensor, record: bool) -> Operand:
        recipe = self.recipe
        assert isinstance(recipe, DelayedScaling) and self.history is not None
        hist = self.history
        if len(hist) == 0:  # torchao's enable_amax_init: the first cast scales by its own amax
            hist.scale = float(
                delayed_scale(
                    [float(_host(x.abs().amax()))],
                    self.dtype_name,
                    1.0,
                    margin=recipe.margin,
                    round_to_pow2=recipe.round_scales_to_power_of_2,
                )
            )
        scale = np.float32(hist.scale)
        q, amax_t = _quantize(x, _scale_tensor(scale, x), self.dtype)
        amax = float(_host(amax_t))
        # Counting needs a pass only when something saturated: the amax the cast returned tells.
        over = amax * float(scale) > self.fp8_max
        saturated = int(_host((x.abs() * float(scale) > self.fp8_max).sum())) if over else 0
        hist.append(amax)
        hist.scale = float(
            delayed_scale(
                hist.values,
                self.dtype_name,
                hist.scale,
                algo=recipe.amax_compute_algo,
                margin=recipe.margin,
                round_to_pow2=recipe.round_scales_to_power_of_2,
            )
        )
        if record:
            self._record(amax, float(scale), saturated)
        return Operand(q, _scale_tensor(np.float32(1.0) / scale, x), None, _describe(scale))

    def _cast_blocks(self, x: Tensor, record: bool) -> Operand:
        rows, k = x.shape
        size = MXFP8BlockScaling.block_size
        pad = -k % size
        if pad:  # zeros change neither a block's amax nor the product
            x = cat([x, zeros(rows, pad, dtype=x.dtype, device=x.device)], dim=1)
        blocks = x.reshape(rows * (k + pad) // size, size)
        amax = _host(blocks.abs().amax(dim=1, keepdim=True))
        scale = mx_scale(amax, self.dtype_name)
        q, _ = _quantize(blocks, _scale_tensor(scale, x), self.dtype)
        inv = _scale_tensor(np.float32(1.0) / scale, x)
        dequantized = (q.to(dtype=dt.float32) * inv).reshape(rows, k + pad)
        if record:
            saturated = int(np.count_nonzero(amax * scale > self.fp8_max))
            self._record(float(amax.max()), float(scale.min()), saturated)
        return Operand(None, None, dequantized, _describe(scale))

    def _record(self, amax: float, scale: float, saturated: int) -> None:
        self.stats.amax.append(amax)
        self.stats.scale.append(scale)
        self.stats.saturated.append(saturated)


def _describe(scale: np.ndarray | np.float32) -> str:
    s = np.asarray(scale)
    if s.size == 1:
        return f"scale={float(s.reshape(())):.6g}"
    return f"{s.size} scales in [{float(s.min()):.6g}, {float(s.max()):.6g}]"


def gemm(a: Operand, b: Operand, out_dtype: dt.DType, use_fast_accum: bool = False) -> Tensor:
    """``A @ B.T`` from two cast operands, accumulated in float32 and rounded once to ``out_dtype``."""
    if a.dequantized is not None and b.dequantized is not None:
        return matmul(a.dequantized, b.dequantized.t()).to(dtype=out_dtype)
    assert a.q is not None and b.q is not None and a.inv_scale is not None and b.inv_scale is not None
    scale_b = b.inv_scale if b.inv_scale.ndim == 0 else b.inv_scale.reshape(1, b.inv_scale.shape[0])
    return f8ops.scaled_mm(a.q, b.q.t(), a.inv_scale, scale_b, out_dtype, None, use_fast_accum)
