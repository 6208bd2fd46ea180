"""A short end-to-end training run on the backend's device: AMP tracks float32, learns, and GradScaler skips
exactly the steps where inf/NaN was injected.

The model is an MLP 64 -> 32 -> 10 on the digits images (``ampcore.data``), trained with SGD (momentum
0.9) on fixed batches; parameters start from NumPy values, not the backend's RNG, so every backend (and
every dtype) starts from the same point and sees the same batches.

Tolerance of the AMP loss against the float32 loss, from the suite's composite rule
(:func:`ampcore.conformance.tolerance`): a loss is a result computed from ``n = 64`` terms -- the longest
reduction of a step, the 64 input features of the first layer in forward and the 64 examples of a batch
in the weight gradients -- by a few roundings in the AMP dtype, so at every step the AMP loss may differ
from the float32 one by ``tolerance(dtype, 64) * (|loss| + initial loss)``: relative to the loss, and never
less than relative to the magnitude the run started from (late losses are small, but their errors come from
the whole run).  The final loss (mean of the last 10 steps) may differ by ``tolerance(dtype, 64)`` times
twice its own value.  Both allow 4 eps of the AMP dtype (8 roundings of half an ulp; the float32
accumulation over 64 terms adds at most 0.008 eps), where the CPU backend's runs use at most 0.6 eps (float16) and
0.3 eps (bfloat16): they catch gross errors (lost unscaling, skipped or doubled steps, wrong casts), not
rounding details, which the kernel checks pin down.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import ampcore
from ampcore import nn, optim
from ampcore.autograd import Function
from ampcore.conformance import assert_close
from ampcore.data import load_digits
from ampcore.nn import functional as F

FEATURES, HIDDEN, CLASSES = 64, 32, 10
BATCH = 64
LR, MOMENTUM = 0.1, 0.9
TRACK_STEPS = 100
FINAL_WINDOW = 10


# --------------------------------------------------------------------------- the model and data
@functools.cache
def batches(steps: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """``steps`` fixed batches of digits (images in [0, 1], labels), the same for every run."""
    x, y = load_digits()
    rng = np.random.default_rng(0)
    picks = [rng.choice(len(y), BATCH, replace=False) for _ in range(steps)]
    return tuple((x[p], y[p]) for p in picks)


def initial_parameters() -> dict[str, np.ndarray]:
    """torch's Linear initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn by NumPy."""
    rng = np.random.default_rng(1)
    params = {}
    for name, (fan_in, fan_out) in {"0": (FEATURES, HIDDEN), "3": (HIDDEN, CLASSES)}.items():
        bound = 1.0 / np.sqrt(fan_in)
        params[f"{name}.weight"] = rng.uniform(-bound, bound, (fan_out, fan_in))
        params[f"{name}.bias"] = rng.uniform(-bound, bound, (fan_out,))
    return params


class _PoisonGrad(Function):
    """Identity forward; backward adds inf to one element of the gradient when the module is armed."""

    @staticmethod
    def forward(ctx: Any, x: ampcore.Tensor, module: GradPoison) -> ampcore.Tensor:
        ctx.armed = module.armed
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, grad: ampcore.Tensor) -> tuple[ampcore.Tensor, None]:
        if not ctx.armed:
            return grad, None
        poison = np.zeros(grad.shape)
        poison[(0,) * grad.ndim] = np.inf
        return grad + ampcore.tensor(poison, dtype=grad.dtype, device=grad.device), None


class GradPoison(nn.Module):
    """After the first layer: when ``armed``, its gradients (only) get an inf (and NaN from inf * 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False

    def forward(self, x: ampcore.Tensor) -> ampcore.Tensor:
        return _PoisonGrad.apply(x, self)


@dataclass
class Run:
    """A model on the backend's device with its optimizer (and the injection point)."""

    model: Any
    optimizer: Any
    poison: GradPoison
    losses: list[float] = field(default_factory=list)

    def parameters(self) -> list[np.ndarray]:
        return [np.array(p.numpy(), copy=True) for p in self.model.parameters()]  # snapshots, never views


def new_run(backend: Any) -> Run:
    poison = GradPoison()
    dev = backend.device
    # The poison sits before the ReLU, whose backward would drop an inf at an inactive unit.
    model = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN, device=dev), poison, nn.ReLU(), nn.Linear(HIDDEN, CLASSES, device=dev)
    )
    model.load_state_dict({k: ampcore.tensor(v, dtype="float32", device=dev) for k, v in initial_parameters().items()})
    return Run(model, optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM), poison)


def forward_loss(backend: Any, run: Run, x: np.ndarray, y: np.ndarray, dtype: str) -> ampcore.Tensor:
    """Cross-entropy of a batch, under autocast to ``dtype`` unless it is float32."""
    xs = ampcore.tensor(x, dtype="float32", device=backend.device)
    ys = ampcore.tensor(y, dtype="int64", device=backend.device)
    with ampcore.autocast(
        backend.name, dtype=None if dtype == "float32" else dtype, enabled=dtype != "float32", strict=dtype != "float32"
    ):
        return F.cross_entropy(run.model(xs), ys)


def train(backend: Any, dtype: str, steps: int) -> tuple[Run, Any]:
    """``steps`` steps in ``dtype`` (GradScaler active for float16 only, as ``GradScaler.for_dtype`` gives)."""
    run = new_run(backend)
    scaler = ampcore.GradScaler.for_dtype(dtype, backend.device)
    for x, y in batches(steps):
        run.optimizer.zero_grad()
        loss = forward_loss(backend, run, x, y, dtype)
        scaler.scale(loss).backward()
        scaler.step(run.optimizer)
        scaler.update()
        run.losses.append(float(loss.item()))
    return run, scaler


@pytest.fixture(scope="module")
def float32_losses(backend: Any) -> np.ndarray:
    """The float32 baseline's loss per step (run once per backend)."""
    return np.array(train(backend, "float32", TRACK_STEPS)[0].losses)


# --------------------------------------------------------------------------- AMP tracks float32
@pytest.mark.conformance(op="amp_tracks_float32")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_amp_loss_tracks_float32_and_learns(backend, dtype, request):
    backend.require_storage(dtype, "int32")  # int32: GradScaler's growth tracker (float16)
    backend.require_compute(dtype)
    reference = request.getfixturevalue("float32_losses")  # after the skip: no baseline run for nothing
    run, scaler = train(backend, dtype, TRACK_STEPS)
    losses = np.array(run.losses)
    assert np.isfinite(losses).all(), (
        f"{dtype} training produced non-finite losses at steps {(np.flatnonzero(~np.isfinite(losses)) + 1).tolist()}"
    )
    assert_close(
        losses,
        reference,
        dtype,
        n=FEATURES,
        scale=float(reference[0]),
        what=f"{dtype} AMP loss per step (index = step - 1) vs the float32 run",
    )
    final, final_ref = losses[-FINAL_WINDOW:].mean(), reference[-FINAL_WINDOW:].mean()
    assert_close(
        np.array([final]),
        np.array([final_ref]),
        dtype,
        n=FEATURES,
        scale=float(final_ref),
        what=f"{dtype} final loss (mean of the last {FINAL_WINDOW} steps) vs float32's",
    )
    for name, series in (("float32", reference), (dtype, losses)):
        assert series[-FINAL_WINDOW:].mean() < series[0] / 4, (
            f"{name} run did not learn: loss {series[0]:.4f} at the start, {series[-FINAL_WINDOW:].mean():.4f} "
            f"at the end (expected below a quarter of the start)"
        )
    if scaler.is_enabled():
        assert scaler.skipped_steps == 0 and scaler.get_scale() == 2.0**16, (
            f"float16 steps on clean digits never overflow at scale 2**16, but the scaler skipped "
            f"{scaler.skipped_steps} steps and ended at scale {scaler.get_scale()}"
        )


# --------------------------------------------------------------------------- injected inf/NaN
SKIP_STEPS = 24
INIT_SCALE, GROWTH, BACKOFF, INTERVAL = 2.0**8, 2.0, 0.5, 4
# step (1-based) -> how inf/NaN gets into the gradients
INJECT = {
    1: "loss * inf",
    5: "loss * nan",
    6: "inf in the first layer's gradients",
    13: "loss * -inf",
    20: "inf in the first layer's gradients",
}
LOSS_FACTOR = {"loss * inf": np.inf, "loss * nan": np.nan, "loss * -inf": -np.inf}


def expected_scales() -> list[tuple[float, int]]:
    """(scale, growth tracker) after each step: back off where injected, grow after INTERVAL clean steps."""
    scale, tracker, out = INIT_SCALE, 0, []
    for step in range(1, SKIP_STEPS + 1):
        if step in INJECT:
            scale, tracker = scale * BACKOFF, 0
        elif tracker + 1 == INTERVAL:
            scale, tracker = scale * GROWTH, 0
        else:
            tracker += 1
        out.append((scale, tracker))
    return out


@pytest.mark.conformance(op="scaler_skips_injected")
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_scaler_skips_exactly_the_injected_steps(backend, dtype):
    """float16: autocast with the scaler, as AMP runs; float32: the same scaler on a plain float32 run."""
    backend.require_storage(dtype, "int32")  # int32: GradScaler's growth tracker
    backend.require_compute(dtype)
    run = new_run(backend)
    scaler = ampcore.GradScaler(
        backend.name, init_scale=INIT_SCALE, growth_factor=GROWTH, backoff_factor=BACKOFF, growth_interval=INTERVAL
    )
    for step, ((x, y), (want_scale, want_tracker)) in enumerate(zip(batches(SKIP_STEPS), expected_scales()), 1):
        how = INJECT.get(step)
        run.poison.armed = how == "inf in the first layer's gradients"
        run.optimizer.zero_grad()
        loss = forward_loss(backend, run, x, y, dtype)
        if how in LOSS_FACTOR:
            loss = loss * float(LOSS_FACTOR[how])
        before = run.parameters()
        scaler.scale(loss).backward()
        stepped = scaler.step(run.optimizer)
        scaler.update()
        after = run.parameters()
        where = f"step {step} ({how or 'clean'})"
        assert stepped is (how is None), f"{where}: scaler.step returned {stepped}, expected {how is None}"
        if how is None:
            assert any(not np.array_equal(a, b) for a, b in zip(after, before)), f"{where}: no parameter changed"
            assert all(np.isfinite(a).all() for a in after), f"{where}: a parameter became non-finite"
        else:
            changed = [i for i, (a, b) in enumerate(zip(after, before)) if a.tobytes() != b.tobytes()]
            assert not changed, f"{where}: a skipped step changed parameters {changed}"
        assert (scaler.get_scale(), scaler.get_growth_tracker()) == (want_scale, want_tracker), (
            f"{where}: scale {scaler.get_scale()}, tracker {scaler.get_growth_tracker()}; expected scale "
            f"{want_scale}, tracker {want_tracker} (back off x{BACKOFF} on inf, grow x{GROWTH} every {INTERVAL} clean)"
        )
    assert scaler.skipped_steps == len(INJECT), (
        f"scaler.skipped_steps is {scaler.skipped_steps}, expected {len(INJECT)} (steps {sorted(INJECT)})"
    )
