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

Nothing here reads the device: amaxes, scales, the delayed recipe's history
and the per-step stats stay device tensors (:mod:`ampcore.float8.device_scaling`);
the stats are read when :func:`ampcore.float8.float8_stats` asks for them, and a
scale only when an autocast trace prints it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..creation import zeros
from ..hooks import keep_device_values
from ..kernels import KernelGate
from ..ops import cat
from ..ops import float8 as f8ops
from ..syncs import to_host
from ..tensor import Tensor
from ..tensor_base import wrap
from .device_scaling import AmaxHistory, current_scale, delayed_scale, mx_scale
from .recipes import DelayedScaling, MXFP8BlockScaling, Recipe
from .scaling import AMAX_EPS, FP8_MAX

__all__ = ["Operand", "TensorCaster", "CastStats", "current_cast", "gemm", "STATS_LENGTH"]

# Steps of amax / scale / saturation kept per tensor for float8_stats().
STATS_LENGTH = 1024
STATS_READ = "float8 stats"  # the host-sync reason of reading them (ampcore.syncs.count_host_syncs)
TRACE_READ = "float8 trace"  # ... and of a scale an autocast trace prints


@dataclass
class Operand:
    """One GEMM operand in float8: values ``q`` and their float32 dequantisation scales (1/scale).

    ``inv_scale`` is 0-d (per tensor) or (rows, 1) (row-wise); a block-scaled
    operand has ``block_inv`` instead, (rows, K / 32): one power of two per
    32 values along K.  ``scale`` is what the cast multiplied by, for traces.
    """

    q: Tensor
    inv_scale: Tensor | None
    scale: Tensor
    block_inv: Tensor | None = None

    @property
    def T(self) -> Operand:  # noqa: N802 - Tensor's name for a transpose
        """The transposed operand; only per-tensor operands transpose without a new cast."""
        if self.inv_scale is None or self.inv_scale.ndim != 0:
            raise ValueError("only a per-tensor float8 operand can be transposed; cast the transpose instead")
        return Operand(self.q.t(), self.inv_scale, self.scale)

    def scale_text(self) -> str:
        """The scale for a trace line; reads it from the device (only tracing asks)."""
        s = np.asarray(to_host(self.scale, TRACE_READ), dtype=np.float32)
        if s.size == 1:
            return f"scale={float(s.reshape(())):.6g}"
        return f"{s.size} scales in [{float(s.min()):.6g}, {float(s.max()):.6g}]"


@dataclass
class CastStats:
    """Per-step records of one tensor's casts: its amax, the scale applied and how many values saturated.

    A cast records device tensors (:meth:`record`); :meth:`as_dict` reads those not read yet, all in one
    transfer (two when a recipe counts saturation), and keeps the numbers.
    """

    amax: deque[float] = field(default_factory=lambda: deque(maxlen=STATS_LENGTH))
    scale: deque[float] = field(default_factory=lambda: deque(maxlen=STATS_LENGTH))
    saturated: deque[int] = field(default_factory=lambda: deque(maxlen=STATS_LENGTH))
    # The records not read yet, as backend arrays (amax, scale, saturated count or None), and where they live.
    pending: deque[tuple[Any, Any, Any]] = field(default_factory=lambda: deque(maxlen=STATS_LENGTH))
    place: tuple[Any, Any] | None = field(default=None, repr=False)

    def record(self, amax: Tensor, scale: Tensor, saturated: Tensor | None) -> None:
        """One step's 0-d device amax and scale, and its saturated count (None: the recipe cannot saturate).

        Kept through :func:`ampcore.hooks.keep_device_values` as arrays (no tensor per value per step), so a
        captured step's replays record theirs too, and :meth:`flush` wraps them when it reads them.
        """
        self.place = (amax.device, amax._backend)
        keep_device_values(self._keep, amax, scale, *(() if saturated is None else (saturated,)), arrays=True)

    def _keep(self, amax: Any, scale: Any, saturated: Any = None) -> None:
        self.pending.append((amax, scale, saturated))

    def flush(self) -> None:
        """Read the pending records to the host."""
        if not self.pending:
            return
        entries = list(self.pending)
        self.pending.clear()
        assert self.place is not None  # set by the record that made the first entry
        device, backend = self.place
        values = [wrap(v, device, backend).reshape(1) for a, s, _ in entries for v in (a, s)]
        read = to_host(cat(values), STATS_READ).astype(np.float64)
        counts = [wrap(n, device, backend).reshape(1) for _, _, n in entries if n is not None]
        numbers = iter(to_host(cat(counts), STATS_READ).tolist() if counts else [])
        for i, (_, _, n) in enumerate(entries):
            self.amax.append(float(read[2 * i]))
            self.scale.append(float(read[2 * i + 1]))
            self.saturated.append(0 if n is None else int(next(numbers)))

    def as_dict(self) -> dict[str, list[float] | list[int]]:
        self.flush()
        return {"amax": list(self.amax), "scale": list(self.scale), "saturated": list(self.saturated)}


def _quantize(x: Tensor, scale: Tensor, dtype: dt.DType) -> tuple[Tensor, Tensor]:
    """The kernel's (q, amax), saturating (every recipe clamps to ±fp8_max, as torchao does)."""
    q, amax = f8ops.quantize_float8(x, scale, dtype, True)
    return q, amax


def current_cast(x: Tensor, dtype_name: str, rowwise: bool, round_pow2: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(q, scale, 1 / scale, amax)``: ``x`` (2-D) cast to float8 with current scaling, per tensor or per row.

    One kernel where the backend has ``quantize_float8_current`` (the kernel contract), else its composition:
    abs and max, the scale rule (:func:`.device_scaling.current_scale`), ``quantize_float8`` and the inverse.
    """
    dtype = dt.as_dtype(dtype_name)
    backend = x._backend
    if backend.kernels.has("quantize_float8_current"):
        gate = KernelGate.of(backend, "quantize_float8_current")
        arrays = gate.quantize_float8_current(x._data, dtype, float(AMAX_EPS), rowwise, round_pow2)
        q, scale, inv, amax = (wrap(a, x.device, backend) for a in arrays)
        return q, scale, inv, amax
    amax = _float32(x.abs().amax(dim=1, keepdim=True) if rowwise else x.abs().amax())
    scale = current_scale(amax, dtype_name, round_pow2)
    q, _ = _quantize(x, scale, dtype)
    return q, scale, 1.0 / scale, amax


def _float32(t: Tensor) -> Tensor:
    return t if t.dtype is dt.float32 else t.to(dtype=dt.float32)  # exact from bfloat16 / float16


class TensorCaster:
    """Casts one role (``"input"``, ``"weight"`` or ``"grad_output"``) of one layer under ``recipe``.

    Holds the delayed recipe's amax history and the role's :class:`CastStats`.
    Saturated values are counted where a recipe can saturate (delayed scaling,
    whose scale lags the data, and MX blocks, whose largest element may land
    above fp8_max); current scaling maps the amax onto fp8_max, so it records 0
    without an extra pass.  Every amax and scale is a device tensor.
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
        q, scale, inv, amax = current_cast(x, self.dtype_name, rowwise, self.recipe.round_scales_to_power_of_2)
        if record:
            self.stats.record(amax.amax() if rowwise else amax, scale.min() if rowwise else scale, None)
        return Operand(q, inv, scale)

    def _delayed_scale(self, amax: Tensor, previous: Tensor | float) -> Tensor:
        recipe = self.recipe
        assert isinstance(recipe, DelayedScaling)
        return delayed_scale(
            amax, previous, self.dtype_name, margin=recipe.margin, round_to_pow2=recipe.round_scales_to_power_of_2
        )

    def _cast_delayed(self, x: Tensor, record: bool) -> Operand:
        recipe = self.recipe
        assert isinstance(recipe, DelayedScaling) and self.history is not None
        hist = self.history
        if hist.scale is None:  # torchao's enable_amax_init: the first cast scales by its own amax
            hist.scale = self._delayed_scale(_float32(x.abs().amax()), 1.0)
        scale = hist.scale.detach()  # this step's scale: the update below writes the next one in place
        q, amax = _quantize(x, scale, self.dtype)
        saturated = (x.abs() * scale > self.fp8_max).sum() if record else None
        hist.append(amax)
        hist.scale.copy_(self._delayed_scale(hist.amax(recipe.amax_compute_algo), scale))
        if record:
            self.stats.record(amax, scale, saturated)
        return Operand(q, 1.0 / scale, scale)

    def _cast_blocks(self, x: Tensor, record: bool) -> Operand:
        rows, k = x.shape
        size = MXFP8BlockScaling.block_size
        pad = -k % size
        if pad:  # zeros change neither a block's amax nor the product
            x = cat([x, zeros(rows, pad, dtype=x.dtype, device=x.device)], dim=1)
        blocks = x.reshape(rows * (k + pad) // size, size)
        amax = _float32(blocks.abs().amax(dim=1, keepdim=True))
        scale = mx_scale(amax, self.dtype_name)
        q, _ = _quantize(blocks, scale, self.dtype)
        if record:
            self.stats.record(amax.amax(), scale.min(), (amax * scale > self.fp8_max).sum())
        inv = (1.0 / scale).reshape(rows, (k + pad) // size)  # powers of two: exact
        return Operand(q.reshape(rows, k + pad), None, scale, inv)


def gemm(a: Operand, b: Operand, out_dtype: dt.DType, use_fast_accum: bool = False) -> Tensor:
    """``A @ B.T`` from two cast operands, accumulated in float32 and rounded once to ``out_dtype``."""
    if a.block_inv is not None and b.block_inv is not None:
        return f8ops.scaled_mm_mx(a.q, b.q.t(), a.block_inv, b.block_inv.t(), out_dtype, None, use_fast_accum)
    assert a.inv_scale is not None and b.inv_scale is not None
    scale_b = b.inv_scale if b.inv_scale.ndim == 0 else b.inv_scale.reshape(1, b.inv_scale.shape[0])
    return f8ops.scaled_mm(a.q, b.q.t(), a.inv_scale, scale_b, out_dtype, None, use_fast_accum)
