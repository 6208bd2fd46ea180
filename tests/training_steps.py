"""A small AMP training step on any device, for the backend tests that count host syncs and compiled kernels."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import ampcore
from ampcore import nn, optim
from ampcore.nn import functional as F


def mlp_step(device: str, amp: bool, dtype: str | None = None) -> Callable[[float], ampcore.Tensor]:
    """A 20-32-5 GELU MLP with AdamW and a GradScaler on ``device``: ``step(lr)`` trains one step
    (under autocast to ``dtype``, default the device's own, when ``amp``) and returns the loss."""
    kind = ampcore.device(device).type
    ampcore.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32, device=device), nn.GELU(), nn.Linear(32, 5, device=device))
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    scaler = ampcore.GradScaler(kind, enabled=amp)
    rng = np.random.default_rng(0)
    x = ampcore.tensor(rng.standard_normal((16, 20), dtype=np.float32), device=device)
    y = ampcore.tensor(rng.integers(0, 5, 16), device=device)

    def step(lr: float) -> ampcore.Tensor:
        for group in opt.param_groups:
            group["lr"] = lr  # a new scalar every step: passed as a kernel argument, never compiled in
        opt.zero_grad()
        with ampcore.autocast(kind, dtype=dtype, enabled=amp):
            loss = F.cross_entropy(F.log_softmax(model(x), dim=-1), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    return step
