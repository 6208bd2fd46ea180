"""The training run behind ``ampcore train``: an MLP classifying the digits data set.

One step is :func:`train_step`: zero the gradients, forward, loss, backward,
optimizer step.  Mixed precision (issue #4) slots in there and nowhere else:
the forward and loss under ``autocast(device.type)``, the backward on
``scaler.scale(loss)`` and the step through ``scaler.step`` / ``scaler.update``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from . import nn, optim
from .autograd import no_grad
from .creation import manual_seed, tensor
from .data import load_digits, train_test_split
from .device import Device
from .nn import functional as F
from .plugins import get_backend, resolve_device
from .tensor import Tensor

__all__ = ["TrainConfig", "TrainResult", "StepInfo", "build_model", "train", "train_step", "evaluate"]

SUPPORTED_DTYPES = ("float32",)
AMP_NOT_YET = "mixed precision arrives with issue #4 (AMP); only dtype 'float32' is supported for now"


@dataclass(frozen=True)
class TrainConfig:
    """What to train and how.  ``device=None`` is the default device (the best available backend).

    Raises ValueError for a non-positive epoch count, batch size or learning
    rate, and for any dtype but ``"float32"`` (until AMP arrives).
    """

    device: str | None = None
    dtype: str = "float32"
    epochs: int = 20
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 1e-2
    hidden: tuple[int, ...] = (128, 128)
    seed: int = 0
    test_fraction: float = 0.2

    def __post_init__(self) -> None:
        if self.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"dtype {self.dtype!r} is not supported: {AMP_NOT_YET}")
        for name in ("epochs", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")


@dataclass(frozen=True)
class StepInfo:
    """Progress after one optimizer step (1-based ``step`` and ``epoch``)."""

    step: int
    total_steps: int
    epoch: int
    epochs: int
    loss: float


@dataclass(frozen=True)
class TrainResult:
    """How a run went: the last step's loss, accuracies on both splits, and training time (evaluation excluded)."""

    device: str
    dtype: str
    epochs: int
    steps: int
    final_loss: float
    train_accuracy: float
    test_accuracy: float
    seconds: float
    epoch_losses: tuple[float, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_model(in_features: int, hidden: tuple[int, ...], classes: int, device: Device | str | None = None) -> Any:
    """An MLP ``in -> hidden... -> classes`` with ReLU between layers, on ``device``."""
    layers: list[Any] = []
    width = in_features
    for h in hidden:
        layers += [nn.Linear(width, h, device=device), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, classes, device=device))
    return nn.Sequential(*layers)


def train_step(model: Any, optimizer: Any, x: Tensor, y: Tensor) -> Tensor:
    """One optimizer step on a batch; returns the (detached) loss.

    This is where AMP goes: ``with autocast(...)`` around the forward and loss,
    ``scaler.scale(loss).backward()``, ``scaler.step(optimizer)``, ``scaler.update()``.
    """
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


def evaluate(model: Any, x: Tensor, y: Tensor, batch_size: int = 512) -> float:
    """Fraction of rows of ``x`` whose highest logit is the label in ``y``."""
    was_training = model.training
    model.eval()
    correct = 0
    with no_grad():
        for start in range(0, x.shape[0], batch_size):
            logits = model(x[start:start + batch_size])
            correct += int((logits.argmax(1) == y[start:start + batch_size]).sum().item())
    model.train(was_training)
    return correct / max(x.shape[0], 1)


def train(config: TrainConfig = TrainConfig(), on_step: Callable[[StepInfo], None] | None = None) -> TrainResult:
    """Train the digits MLP with AdamW per ``config``, calling ``on_step`` after every step.

    Seeded end to end (split, initialisation, batch order).  Raises the
    device errors of :func:`ampcore.plugins.resolve_device` for a bad ``config.device``.
    """
    device = resolve_device(config.device)
    manual_seed(config.seed)
    x_all, y_all = load_digits()
    x_tr, y_tr, x_te, y_te = train_test_split(x_all, y_all, config.test_fraction, seed=config.seed)
    x_train, y_train = tensor(x_tr, device=device), tensor(y_tr, device=device)
    x_test, y_test = tensor(x_te, device=device), tensor(y_te, device=device)
    model = build_model(x_tr.shape[1], config.hidden, int(y_all.max()) + 1, device)
    optimizer = optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)

    rng = np.random.default_rng(config.seed)
    per_epoch = math.ceil(len(y_tr) / config.batch_size)
    total = per_epoch * config.epochs
    step, loss, epoch_losses = 0, math.nan, []
    backend = get_backend(device.type)
    start = time.perf_counter()
    for epoch in range(1, config.epochs + 1):
        order = rng.permutation(len(y_tr))
        epoch_sum = 0.0
        for i in range(per_epoch):
            index = tensor(order[i * config.batch_size:(i + 1) * config.batch_size], device=device)
            loss = train_step(model, optimizer, x_train[index], y_train[index]).item()
            step += 1
            epoch_sum += loss
            if on_step is not None:
                on_step(StepInfo(step, total, epoch, config.epochs, loss))
        epoch_losses.append(epoch_sum / per_epoch)
    backend.synchronize(device.index)
    seconds = time.perf_counter() - start
    return TrainResult(
        device=str(device), dtype=config.dtype, epochs=config.epochs, steps=step, final_loss=loss,
        train_accuracy=evaluate(model, x_train, y_train), test_accuracy=evaluate(model, x_test, y_test),
        seconds=seconds, epoch_losses=tuple(epoch_losses),
    )
