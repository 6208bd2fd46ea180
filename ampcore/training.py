"""The training run behind ``ampcore train``: an MLP classifying the digits data set, with AMP.

One step is :func:`train_step`: zero the gradients, forward and loss under
``autocast``, ``scaler.scale(loss).backward()``, ``scaler.step`` and
``scaler.update``; by default it is captured (:func:`ampcore.compile`) and
replayed as one program of kernels.  The scaler comes from :meth:`GradScaler.for_dtype`, so it
is active for float16 only (bfloat16 and the float32 baseline need none).

Host syncs: with a float16 GradScaler and a backend with the ``adamw_step_amp``
kernel (cpu), a step reads nothing: the fused AdamW skips on the device (the
found-inf flag and the deferred input checks stay there; the checks are read
every ``ampcore.syncs.MAX_PENDING_CHECKS`` steps or at the next read).  Elsewhere
a step reads the device once (the scaler's skip decision, or the optimizer's
deferred input checks).  Losses are summed on the device and read
when progress is reported (every ``progress_every`` steps, only if someone
listens) and once at the end.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from . import dtypes as dt
from . import nn, optim
from .amp import autocast
from .autograd import no_grad
from .compiler import compile as capture
from .creation import manual_seed, tensor, zeros
from .data import load_digits, train_test_split
from .device import Device
from .float8 import convert_to_float8_training, float8_stats, parse_recipe
from .float8.stats import summarize
from .grad_scaler import GradScaler
from .names import did_you_mean
from .nn import functional as F
from .ops import cat
from .plugins import get_backend, resolve_device
from .syncs import count_host_syncs, read_with_checks
from .tensor import Tensor

__all__ = [
    "TrainConfig",
    "TrainResult",
    "Progress",
    "build_model",
    "train",
    "train_step",
    "evaluate",
    "training_dtype",
    "training_dtype_name",
]

DTYPES = ("float16", "bfloat16", "float32")
DTYPE_ALIASES = ("fp16", "bf16", "fp32", "half", "float")  # as ampcore.dtypes.as_dtype reads them
PROGRESS = "progress"  # the host-sync reason of progress reports (not part of a training step)


@dataclass(frozen=True)
class TrainConfig:
    """What to train and how.  ``device=None`` is the default device (the best available backend).

    ``dtype`` is the autocast dtype (``"float16"`` or ``"bfloat16"``; None
    takes the device's own, as ``autocast`` does); ``amp=False`` or
    ``dtype="float32"`` trains the float32 baseline.  ``float8`` names a
    float8 recipe (``"tensorwise"``, ``"rowwise"``, ``"delayed"``,
    ``"mxfp8"``, with ``,key=value`` fields): the model's Linear layers are
    converted with :func:`ampcore.float8.convert_to_float8_training` and the
    rest runs under autocast as before.  Raises ValueError for an
    unknown dtype and for a non-positive epoch count, batch size, learning
    rate or ``progress_every``.  ``compile`` (the default) captures the training step with
    :func:`ampcore.compile`: after a warm-up step and a recorded one, every step replays the recorded kernels,
    bit-identical to the eager step (``compile=False``, ``ampcore train --eager``).
    """

    device: str | None = None
    dtype: str | None = None
    amp: bool = True
    epochs: int = 20
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 1e-2
    hidden: tuple[int, ...] = (128, 128)
    seed: int = 0
    test_fraction: float = 0.2
    progress_every: int = 8
    float8: str | None = None  # a float8 recipe (ampcore.float8.parse_recipe): the Linear layers train in float8
    compile: bool = True  # capture the training step (ampcore.compile): replayed without the op layer

    def __post_init__(self) -> None:
        if self.float8 is not None:
            object.__setattr__(self, "float8", str(parse_recipe(self.float8)))  # ValueError names a bad recipe
        object.__setattr__(self, "dtype", training_dtype_name(self.dtype))
        for name in ("epochs", "batch_size", "progress_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")


def training_dtype_name(value: str | dt.DType | None) -> str | None:
    """The canonical name of a training dtype given by any of its names (``"fp16"``, ``"bf16"``, ``"half"``,
    ``ampcore.float16``); None stays None (the device's autocast dtype). ValueError naming the valid ones."""
    if value is None:
        return None
    try:
        name = dt.as_dtype(value).name
    except (TypeError, ValueError):
        name = None
    if name not in DTYPES:
        raise ValueError(
            f"dtype {value!r}{did_you_mean(value, DTYPES + DTYPE_ALIASES)} is not a training dtype; choose one of "
            f"{', '.join(map(repr, DTYPES))} (or an alias: 'fp16', 'bf16', 'fp32'), or leave it unset for the "
            "device's autocast dtype"
        )
    return name


def training_dtype(config: TrainConfig, device: Device) -> dt.DType:
    """The dtype the run computes in: float32 without AMP, else ``config.dtype`` or the device's autocast dtype."""
    if not config.amp:
        return dt.float32
    if config.dtype is not None:
        return dt.as_dtype(config.dtype)
    return get_backend(device.type).capabilities(device.index).autocast_dtype or dt.float32


@dataclass(frozen=True)
class Progress:
    """Progress at a report: ``step`` of ``total_steps`` (1-based), the mean loss since the last
    report, the loss scale (None when no scaler is active) and the steps skipped so far."""

    step: int
    total_steps: int
    epoch: int
    epochs: int
    loss: float
    loss_scale: float | None
    skipped_steps: int


@dataclass(frozen=True)
class TrainResult:
    """How a run went: the last step's loss, accuracies on both splits, training time (evaluation and the
    backend's once-per-process loading, :meth:`ampcore.Backend.warm_up`, excluded), the scaler's final
    scale and skipped steps.  ``host_syncs_per_step`` counts the training loop's host reads other than
    progress reports (``host_syncs_by_reason`` has them all).
    Data parallel: ``world_size`` ranks, the payload bytes each rank all-reduced per step and the
    seconds it spent in collectives (0 on one process)."""

    device: str
    dtype: str
    amp: bool
    epochs: int
    steps: int
    final_loss: float
    train_accuracy: float
    test_accuracy: float
    seconds: float
    epoch_losses: tuple[float, ...] = field(default=())
    loss_scale: float | None = None
    skipped_steps: int = 0
    host_syncs_per_step: float = 0.0
    host_syncs_by_reason: dict[str, int] = field(default_factory=dict)
    world_size: int = 1
    allreduce_bytes_per_step: float = 0.0
    collective_seconds: float = 0.0
    float8: str | None = None
    # per layer and role ("0.input", ...): the last amax and scale, saturated values over the run (float8 runs)
    float8_stats: dict[str, dict[str, float | int]] = field(default_factory=dict)
    compiled: bool = False  # the step was captured (ampcore.compile)
    captured_steps: int = 0  # steps that replayed the captured program (the others ran eagerly)

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


def train_step(
    model: Any, optimizer: Any, x: Tensor, y: Tensor, scaler: GradScaler, dtype: dt.DType = dt.float32
) -> Tensor:
    """One optimizer step on a batch, with autocast to ``dtype`` unless it is float32; returns the detached loss.

    ``scaler`` is a GradScaler, disabled (a pass-through) when no scaling is needed.
    """
    optimizer.zero_grad()
    with autocast(x.device.type, dtype=dtype, enabled=dtype != dt.float32):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def evaluate(model: Any, x: Tensor, y: Tensor, batch_size: int = 512) -> float:
    """Fraction of rows of ``x`` whose highest logit is the label in ``y``."""
    was_training = model.training
    model.eval()
    correct = 0
    with no_grad():
        for start in range(0, x.shape[0], batch_size):
            logits = model(x[start : start + batch_size])
            correct += int((logits.argmax(1) == y[start : start + batch_size]).sum().item())
    model.train(was_training)
    return correct / max(x.shape[0], 1)


def train(
    config: TrainConfig = TrainConfig(),
    on_progress: Callable[[Progress], None] | None = None,
    process_group: Any = None,
) -> TrainResult:
    """Train the digits MLP with AdamW per ``config``; ``on_progress`` is called every
    ``config.progress_every`` steps and at the end of each epoch.

    Seeded end to end (split, initialisation, batch order).  Raises the
    device errors of :func:`ampcore.plugins.resolve_device` for a bad ``config.device``.

    ``process_group`` (an ``ampcore.distributed`` communicator): data parallel.
    Every rank must call this with the same config (checked).  The model is
    wrapped in ``DistributedDataParallel``; each global batch of
    ``batch_size x world_size`` rows is split by rank (``batch_size`` rows
    each; the last incomplete global batch of an epoch is dropped, as
    ``DistributedSampler(drop_last=True)`` does), and the scaler agrees on
    skipped steps over the group.  Losses and progress are this rank's.
    """
    device = resolve_device(config.device)
    dtype = training_dtype(config, device)
    manual_seed(config.seed)
    x_all, y_all = load_digits()
    x_tr, y_tr, x_te, y_te = train_test_split(x_all, y_all, config.test_fraction, seed=config.seed)
    x_train, y_train = tensor(x_tr, device=device), tensor(y_tr, device=device)
    x_test, y_test = tensor(x_te, device=device), tensor(y_te, device=device)
    model = build_model(x_tr.shape[1], config.hidden, int(y_all.max()) + 1, device)
    if config.float8 is not None:
        convert_to_float8_training(model, config.float8)
    world, rank = (1, 0) if process_group is None else (process_group.size, process_group.rank)
    if process_group is not None:
        model = _data_parallel(model, config, dtype, process_group)
    # fused=True where the backend has the fused step: under a float16 GradScaler a backend with adamw_step_amp
    # (cpu) then skips overflowed steps on the device, and the step makes no host read at all.
    fused = True if get_backend(device.type).kernels.has("adamw_step") else None
    optimizer = optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=fused)
    scaler = GradScaler.for_dtype(dtype, device, process_group=process_group)
    step_fn: Any = capture(train_step) if config.compile else train_step

    rng = np.random.default_rng(config.seed)
    span = config.batch_size * world  # rows per global batch; this rank's are [rank * batch_size, ...)
    per_epoch = math.ceil(len(y_tr) / config.batch_size) if world == 1 else max(1, len(y_tr) // span)
    total = per_epoch * config.epochs
    step, loss, epoch_sums = 0, zeros((), device=device), []
    backend = get_backend(device.type)
    if process_group is not None:
        process_group.stats.reset()  # count the training's collectives, not the set-up's
    backend.warm_up(device.index)  # the process's one-time loading is no run's training time
    start = time.perf_counter()
    with count_host_syncs() as syncs:
        for epoch in range(1, config.epochs + 1):
            order = rng.permutation(len(y_tr))
            epoch_sum, window, window_steps = zeros((), device=device), zeros((), device=device), 0
            for i in range(per_epoch):
                first = i * span + rank * config.batch_size
                index = tensor(order[first : first + config.batch_size], device=device)
                loss = step_fn(model, optimizer, x_train[index], y_train[index], scaler, dtype)
                epoch_sum, step = epoch_sum + loss, step + 1
                if on_progress is None:
                    continue
                window, window_steps = window + loss, window_steps + 1
                if step % config.progress_every == 0 or i == per_epoch - 1:
                    window_sum, scale, skipped = _read_progress(window, scaler)
                    on_progress(Progress(step, total, epoch, config.epochs, window_sum / window_steps, scale, skipped))
                    window, window_steps = zeros((), device=device), 0
            epoch_sums.append(epoch_sum.reshape(1))
    losses = cat(epoch_sums + [loss.reshape(1)]).numpy()  # epoch sums and the last loss, one read
    backend.synchronize(device.index)
    seconds = time.perf_counter() - start
    by_reason = dict(syncs.by_reason)
    stats = process_group.stats if process_group is not None else None
    return TrainResult(
        device=str(device),
        dtype=dtype.name,
        amp=dtype != dt.float32,
        epochs=config.epochs,
        steps=step,
        final_loss=float(losses[-1]),
        train_accuracy=evaluate(model, x_train, y_train),
        test_accuracy=evaluate(model, x_test, y_test),
        seconds=seconds,
        epoch_losses=tuple(float(v) / per_epoch for v in losses[:-1]),
        loss_scale=scaler.get_scale() if scaler.is_enabled() else None,
        skipped_steps=scaler.skipped_steps,
        host_syncs_per_step=(syncs.count - by_reason.get(PROGRESS, 0)) / max(step, 1),
        host_syncs_by_reason=by_reason,
        world_size=world,
        allreduce_bytes_per_step=stats.bytes_by_op.get("all_reduce", 0) / max(step, 1) if stats else 0.0,
        collective_seconds=stats.seconds if stats else 0.0,
        float8=config.float8,
        float8_stats=summarize(float8_stats(model)) if config.float8 is not None else {},
        compiled=config.compile,
        captured_steps=step_fn._compiled.stats.replays if config.compile else 0,
    )


def _data_parallel(model: Any, config: TrainConfig, dtype: dt.DType, process_group: Any) -> Any:
    """``model`` in DistributedDataParallel, after every rank checked that it trains the same config."""
    from .distributed.ddp import DistributedDataParallel

    process_group.check_consistent("ampcore train", {**asdict(config), "autocast dtype": dtype.name})
    return DistributedDataParallel(model, process_group=process_group)


def _read_progress(window: Tensor, scaler: GradScaler) -> tuple[float, float | None, int]:
    """The summed losses, the loss scale and the skipped steps in one host read (counted under the reason
    ``"progress"``)."""
    scale = scaler._get_scale_async()
    skipped = scaler._skipped_device  # steps a fused optimizer skipped on the device, read in the same transfer
    parts = [window.reshape(1)] + ([scale] if scale is not None else []) + ([skipped] if skipped is not None else [])
    values = read_with_checks(cat(parts), reason=PROGRESS)  # with any queued label checks, in one transfer
    assert values is not None
    if skipped is None:
        total = scaler.skipped_steps  # counted on the host: no read
    else:
        scaler._take_skipped(float(values[-1]))
        total = scaler._skipped_steps
    return float(values[0]), (float(values[1]) if scale is not None else None), total
