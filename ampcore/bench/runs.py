"""One benchmark configuration's training run in ampcore (torch's: :mod:`.torch_reference`), one interface.

A run owns its model (loaded with the shared initial weights), AdamW, a
GradScaler when its precision is float16, and the batches on its device.
``step()`` trains one step and waits for the device, so a clock around it
sees the work.  Losses and loss scales are kept as device values and read
once, by ``history()``, after the timing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import dtypes as dt
from .. import optim
from ..amp import autocast
from ..autograd import saved_bytes
from ..compiler import compile as capture
from ..creation import from_numpy
from ..float8 import convert_to_float8_training
from ..grad_scaler import GradScaler
from ..nn import functional as F
from ..ops import cat
from ..plugins import get_backend, resolve_device
from ..syncs import count_host_syncs
from . import torch_reference
from .config import LR, Config, History
from .models import ModelSpec

__all__ = ["AmpcoreRun", "make_run", "footprint", "train_step"]


class AmpcoreRun:
    """``config`` trained in ampcore on its device."""

    def __init__(
        self,
        spec: ModelSpec,
        config: Config,
        weights: Mapping[str, np.ndarray],
        batches: list[tuple[np.ndarray, np.ndarray]],
    ):
        self.config = config
        self.device = resolve_device(config.device)
        self.backend = get_backend(self.device.type)
        self.dtype = dt.as_dtype(config.precision)
        self.model = spec.build(self.device)
        self.model.load_state_dict(weights)
        if config.float8 is not None:
            convert_to_float8_training(self.model, config.float8)
        self.optimizer = optim.AdamW(self.model.parameters(), lr=LR)
        self.scaler = GradScaler.for_dtype(self.dtype, self.device)
        self.batches = [(from_numpy(x, device=self.device), from_numpy(y, device=self.device)) for x, y in batches]
        self.steps = 0
        self._compiled = capture(train_step) if config.compiled else None
        self._losses: list[Any] = []
        self._scales: list[Any] = []
        self._host_syncs = 0

    def forward(self) -> Any:
        """The loss of the next batch, computed under autocast for an AMP precision."""
        x, y = self.batches[self.steps % len(self.batches)]
        with autocast(self.device.type, dtype=self.dtype, enabled=self.config.amp):
            return F.cross_entropy(self.model(x), y)

    def finish(self, loss: Any) -> None:
        """Backward, the optimizer step (skipped on overflow) and the scale update, as torch.amp's recipe."""
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.steps += 1
        self._losses.append(loss.detach().reshape(1))
        scale = self.scaler._get_scale_async()
        if scale is not None:
            self._scales.append(scale.reshape(1) * 1.0)  # a copy: update() may change the scale in place

    def zero_grad(self) -> None:
        self.optimizer.zero_grad()

    def synchronize(self) -> None:
        self.backend.synchronize(self.device.index)

    def saved_bytes(self, loss: Any) -> int:
        return saved_bytes(loss, self.model.parameters())

    def step(self) -> None:
        if self._compiled is not None:
            return self._captured_step()
        with count_host_syncs() as syncs:
            self.zero_grad()
            self.finish(self.forward())
            self.synchronize()
        self._host_syncs += syncs.count
        return None

    def _captured_step(self) -> None:
        """The same step, captured (``ampcore.compile``): forward, backward, the scaler and the optimizer step
        replayed as one program; the loss and the scale are kept as device values, as the eager step keeps them."""
        assert self._compiled is not None
        with count_host_syncs() as syncs:
            x, y = self.batches[self.steps % len(self.batches)]
            loss = self._compiled(self.model, self.optimizer, self.scaler, x, y, self.dtype, self.config.amp)
            self.steps += 1
            self._losses.append(loss.reshape(1))
            scale = self.scaler._get_scale_async()
            if scale is not None:
                self._scales.append(scale.reshape(1) * 1.0)
            self.synchronize()
        self._host_syncs += syncs.count

    def history(self) -> History:
        losses = [float(v) for v in cat(self._losses).numpy()] if self._losses else []
        scales = [float(v) for v in cat(self._scales).numpy()] if self._scales else None
        return History(losses, scales, self.scaler.skipped_steps, self._host_syncs)


def train_step(model: Any, optimizer: Any, scaler: Any, x: Any, y: Any, dtype: Any, amp: bool) -> Any:
    """One training step as :class:`AmpcoreRun`'s eager one (zero_grad, forward under autocast, scaled
    backward, the scaler's step and update), returning the detached loss: what ``--compile`` captures."""
    optimizer.zero_grad()
    with autocast(x.device.type, dtype=dtype, enabled=amp):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def footprint(
    spec: ModelSpec, config: Config, weights: Mapping[str, np.ndarray], batches: list[tuple[np.ndarray, np.ndarray]]
) -> tuple[int | None, int]:
    """Peak device memory of building ``config`` and training two steps (None where it cannot be measured),
    and the bytes the second step's graph saved for backward, parameters not counted.

    Measured on a fresh run, so call it with no other configuration alive:
    their weights and optimizer state would not count, but their freed
    buffers could be reused and hide this one's.  One untraced step of a
    throwaway run comes first, so what a process pays once (a lazy import,
    numba loading its compiled loops from the disk cache, an OpenCL build)
    is not counted as this configuration's memory: the cpu backend's float16
    rows measured 1.4-1.9x float32's peak from that alone.
    """
    if config.compiled:  # a captured step's first two calls run eagerly: their memory is the eager row's
        return None, 0
    saved = 0
    warm = make_run(spec, config, weights, batches)
    warm.step()
    del warm

    def two_steps() -> None:
        nonlocal saved
        run = make_run(spec, config, weights, batches)
        run.step()
        run.zero_grad()
        loss = run.forward()
        saved = run.saved_bytes(loss)
        run.finish(loss)
        run.synchronize()

    if config.framework == "torch":
        return torch_reference.peak_memory(config.device, two_steps), saved
    device = resolve_device(config.device)
    return get_backend(device.type).peak_memory(two_steps, device.index), saved


def make_run(
    spec: ModelSpec, config: Config, weights: Mapping[str, np.ndarray], batches: list[tuple[np.ndarray, np.ndarray]]
) -> Any:
    """A fresh run of ``config``: the model loaded with ``weights``, the batches on its device."""
    if config.framework == "torch":
        return torch_reference.TorchRun(spec, config, weights, batches)
    return AmpcoreRun(spec, config, weights, batches)
