"""Fault injection in AMP training: long runs with inf/NaN injected, float16 forward overflow, a kernel that
raises mid-step, and checkpoint/resume over long runs with injected infs.

Scenario count (each scenario is one pytest case unless said otherwise):

- 2 long fault-injected runs, 1000 steps each (AdamW with growth 2 / backoff 0.5 / interval 25;
  SGD-momentum with growth 1.5 / backoff 0.7 / interval 20, so the float32 rounding of the scale matters),
  50 poisoned steps each (100 in all) with +inf, -inf or NaN in the loss, in one activation (a tiny
  autograd Function in the forward) or in one gradient (the same Function in the backward): 3 sites x 3
  values, every poisoned step checked bit for bit, the scale and tracker after every step against a
  pure-Python model of torch's rule;
- 4 float16 forward overflows (an input past 65504, a matmul output past 65504, a weight that makes the
  hidden layer overflow, a weight that makes the output layer overflow);
- 14 kernel failures mid-step on the fake backend (``fail_on=(kernel, k)``): forward, backward (2),
  unscale_ (2, and 2 more recovering without update()), the optimizer's update for AdamW and SGD-momentum
  at the kernel's first / middle / last call in the step (6), and update() itself;
- 3 checkpoints of a 300-step run with 15 injected infs (before the first scale(), right after a skipped
  step, one clean step before the scale grows) resumed in fresh objects (one test), plus a pickle round trip.

In all: 24 fault scenarios over about 3,200 training steps, plus in-place ``mul_``/``add_`` on a leaf
Parameter under ``no_grad()`` keeping ``requires_grad``.  (The bugs these tests found are fixed: update()
after a failed unscale_, pickling a checkpoint, in-place changes under no_grad clearing requires_grad.)
"""

from __future__ import annotations

import copy
import math
import pickle
import struct

import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore import nn, optim
from ampcore.amp.state import thread_state
from ampcore.autograd import Function
from ampcore.dispatch import KernelError
from ampcore.grad_scaler import GradScaler

INF, NAN = float("inf"), float("nan")


@pytest.fixture(autouse=True)
def _seed_and_no_bfloat16_history(monkeypatch):
    ampcore.manual_seed(0)
    monkeypatch.setattr(thread_state, "last_dtype", {})


# --------------------------------------------------------------------------- the tiny model and helpers
class Inject(Function):
    """Identity, except: ``fwd`` (a value) replaces element ``pos`` of the output, ``bwd`` element ``pos`` of
    the gradient.  Both None: the input passes through untouched (bit for bit) both ways."""

    @staticmethod
    def forward(ctx, h, fwd, bwd, pos):
        ctx.bwd, ctx.pos = bwd, pos
        return h if fwd is None else h + _spike(h, pos, fwd)

    @staticmethod
    def backward(ctx, g):
        return (g if ctx.bwd is None else g + _spike(g, ctx.pos, ctx.bwd)), None, None, None


def _spike(t, pos, value):
    arr = np.zeros(t.shape, dtype=np.float32)
    arr[pos] = value
    return ampcore.tensor(arr, dtype=t.dtype, device=t.device)


class Net(nn.Module):
    """Linear(8, 16) - ReLU - Linear(16, 4), with an injection point before and after the ReLU."""

    def __init__(self, device=None):
        super().__init__()
        self.lin1 = nn.Linear(8, 16, device=device)
        self.lin2 = nn.Linear(16, 4, device=device)
        self.fault = {}  # {"fwd": value} poisons the hidden activation, {"bwd": value} its gradient

    def forward(self, x):
        pos = self.fault.get("pos", (0, 0))
        z = Inject.apply(self.lin1(x), None, self.fault.get("bwd"), pos)
        h = Inject.apply(nn.functional.relu(z), self.fault.get("fwd"), None, pos)
        return self.lin2(h)


def problem(seed=0, n=32, device=None):
    """Fixed inputs and learnable targets (a fixed random linear teacher plus a kink)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 8))
    y = x @ rng.standard_normal((8, 4)) * 0.5 + np.abs(x[:, :4]) * 0.5
    return (ampcore.tensor(x, dtype=dt.float32, device=device), ampcore.tensor(y, dtype=dt.float32, device=device))


def amp_loss(model, x, y, device_type="cpu", loss_factor=None):
    with ampcore.autocast(device_type, dtype="float16"):
        out = model(x)
    loss = ((out.float() - y) ** 2).mean()
    if loss_factor is not None:
        loss = loss * loss_factor
    return loss


def f32_loss(model, x, y):
    with ampcore.no_grad():
        return float((((model(x) - y) ** 2).mean()).item())


def params_of(model):
    return [p.numpy().copy() for p in model.parameters()]


def opt_state_of(opt):
    """Every state entry of every parameter: numpy copies of tensors, step counts as they are."""
    out = {}
    for i, p in enumerate(opt.param_groups[0]["params"]):
        for key, value in opt.state.get(p, {}).items():
            out[(i, key)] = value.numpy().copy() if isinstance(value, ampcore.Tensor) else value
    return out


def assert_bit_identical(actual, expected, what):
    if isinstance(actual, dict):
        assert actual.keys() == expected.keys(), what
        actual, expected = list(actual.values()), list(expected.values())
    assert len(actual) == len(expected), what
    for a, e in zip(actual, expected):
        if isinstance(e, np.ndarray):
            assert a.dtype == e.dtype and a.shape == e.shape, what
            assert a.tobytes() == e.tobytes(), what  # bit for bit, NaN payloads and signed zeros included
        else:
            assert a == e, what


def round_f32(x):
    """``x`` rounded to the nearest float32 (inf past float32's range), in pure Python."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(INF, x)


def scale_rule(scale, tracker, found_inf, growth, backoff, interval):
    """torch's GradScaler update rule, the products rounded once to float32 (torch's float * double)."""
    if found_inf:
        return round_f32(scale * backoff), 0
    tracker += 1
    if tracker == interval:
        grown = round_f32(scale * growth)
        return (grown if math.isfinite(grown) else scale), 0
    return scale, tracker


def poison_schedule(steps, rate, seed):
    """{step: (site, value)} for about ``rate`` of the steps; every site and value occurs."""
    rng = np.random.default_rng(seed)
    chosen = sorted(int(i) for i in rng.choice(np.arange(5, steps), size=int(steps * rate), replace=False))
    sites, values = ("loss", "activation", "gradient"), (INF, -INF, NAN)
    return {step: (sites[j % 3], values[(j // 3) % 3]) for j, step in enumerate(chosen)}


def set_fault(model, fault):
    """Arm ``fault`` = (site, value) on the model for one step; returns the loss factor (for "loss")."""
    model.fault = {}
    if fault is None:
        return None
    site, value = fault
    if site == "loss":
        return ampcore.tensor(value, dtype=dt.float32)
    model.fault = {"fwd" if site == "activation" else "bwd": value, "pos": (3, 5)}
    return None


# --------------------------------------------------------------------------- 1. long runs with injected inf/NaN
LONG_RUNS = [
    # id, optimizer, init_scale, growth_factor, backoff_factor, growth_interval, steps, poison rate
    ("adamw", lambda ps: optim.AdamW(ps, lr=3e-3), 2.0**10, 2.0, 0.5, 25, 1000, 0.05),
    ("sgd-momentum", lambda ps: optim.SGD(ps, lr=0.02, momentum=0.9), 1000.0, 1.5, 0.7, 20, 1000, 0.05),
]


@pytest.mark.parametrize(
    "name, make_opt, init, growth, backoff, interval, steps, rate", LONG_RUNS, ids=[r[0] for r in LONG_RUNS]
)
def test_long_run_skips_exactly_the_poisoned_steps_bit_for_bit_and_still_converges(
    name, make_opt, init, growth, backoff, interval, steps, rate
):
    x, y = problem()
    model = Net()
    opt = make_opt(list(model.parameters()))
    scaler = GradScaler(
        "cpu",
        init_scale=init,
        growth_factor=growth,
        backoff_factor=backoff,
        growth_interval=interval,
        stall_warning_after=None,
    )
    bad = poison_schedule(steps, rate, seed=len(name))
    assert {site for site, _ in bad.values()} == {"loss", "activation", "gradient"}
    initial_loss = f32_loss(model, x, y)

    want_scale, want_tracker = init, 0
    stepped, expected_stepped, scales, expected_scales = [], [], [], []
    for i in range(steps):
        opt.zero_grad()
        factor = set_fault(model, bad.get(i))
        before_params, before_state = params_of(model), (opt_state_of(opt) if i in bad else None)
        scaler.scale(amp_loss(model, x, y, loss_factor=factor)).backward()
        stepped.append(scaler.step(opt))
        if i in bad:
            assert_bit_identical(params_of(model), before_params, f"parameters changed by skipped step {i}")
            assert_bit_identical(opt_state_of(opt), before_state, f"optimizer state changed by skipped step {i}")
        else:
            assert any(a.tobytes() != b.tobytes() for a, b in zip(params_of(model), before_params)), i
        scaler.update()
        want_scale, want_tracker = scale_rule(want_scale, want_tracker, i in bad, growth, backoff, interval)
        expected_stepped.append(i not in bad)
        scales.append((scaler.get_scale(), scaler.get_growth_tracker()))
        expected_scales.append((want_scale, want_tracker))
    model.fault = {}

    assert stepped == expected_stepped
    assert scales == expected_scales
    assert scaler.skipped_steps == len(bad)
    grown = sum(1 for (a, _), (b, _) in zip(scales, scales[1:]) if b > a)
    assert grown >= 5 and len(bad) >= 50  # both directions of the rule were exercised many times
    if name == "adamw":
        assert all(st["step"] == steps - len(bad) for st in opt.state.values())
    final_loss = f32_loss(model, x, y)
    assert math.isfinite(final_loss) and final_loss < 0.05 * initial_loss, (initial_loss, final_loss)


# --------------------------------------------------------------------------- 2. float16 forward overflow
def _big_input(model, x):
    arr = x.numpy().copy()
    arr[2] = 7.0e4  # finite in float32, past float16's 65504: autocast's cast to float16 overflows
    return model, ampcore.tensor(arr, dtype=dt.float32)


def _big_matmul(model, x):
    arr = x.numpy().copy()
    w = model.lin1.weight.numpy()
    row = np.sign(w[0]) * 6.0e4 / np.abs(w[0]).sum() * 1.5  # every element fits float16, x @ w.T does not
    arr[2] = row
    return model, ampcore.tensor(arr, dtype=dt.float32)


def _scaled_weight(layer):
    def make(model, x):
        weight = getattr(model, layer).weight
        w = weight.numpy()
        with ampcore.no_grad():  # the largest weight becomes 6e4: every weight still fits float16
            weight.copy_(ampcore.tensor(w * (6.0e4 / np.abs(w).max())))
        return model, x

    return make


FP16_OVERFLOWS = [
    ("input-cast", _big_input),
    ("matmul-output", _big_matmul),
    ("hidden-weight", _scaled_weight("lin1")),
    ("output-weight", _scaled_weight("lin2")),
]


@pytest.mark.parametrize("make", [m for _, m in FP16_OVERFLOWS], ids=[n for n, _ in FP16_OVERFLOWS])
def test_float16_forward_overflow_is_skipped_like_an_injected_inf(make):
    x, y = problem()
    model = Net()
    opt = optim.AdamW(model.parameters(), lr=3e-3)
    scaler = GradScaler("cpu", init_scale=2.0**8, growth_interval=1000)
    for _ in range(3):  # some optimizer state to keep
        opt.zero_grad()
        scaler.scale(amp_loss(model, x, y)).backward()
        assert scaler.step(opt) is True
        scaler.update()
    clean_params = params_of(model)
    model, bad_x = make(model, x)
    with ampcore.no_grad():
        assert np.isfinite(model(bad_x).numpy()).all()  # the float32 forward is fine: it is float16's range
        with ampcore.autocast("cpu", dtype="float16"):
            assert not np.isfinite(model(bad_x).float().numpy()).all()
    opt.zero_grad()
    params, state = params_of(model), opt_state_of(opt)
    scaler.scale(amp_loss(model, bad_x, y)).backward()
    assert scaler.step(opt) is False
    assert_bit_identical(params_of(model), params, "parameters")
    assert_bit_identical(opt_state_of(opt), state, "optimizer state")
    scaler.update()
    assert scaler.get_scale() == 2.0**7 and scaler.skipped_steps == 1
    # Undo the bad input / weight: the next iteration steps normally.
    with ampcore.no_grad():
        for p, a in zip(model.parameters(), clean_params):
            p.copy_(ampcore.tensor(a))
    opt.zero_grad()
    scaler.scale(amp_loss(model, x, y)).backward()
    assert scaler.step(opt) is True
    assert all(st["step"] == 4 for st in opt.state.values())


@pytest.mark.parametrize("inplace", ["mul_", "add_"])
def test_a_parameter_changed_in_place_under_no_grad_keeps_requiring_grad(inplace):
    model = Net()
    with ampcore.no_grad():
        getattr(model.lin1.weight, inplace)(2.0)
    assert model.lin1.weight.requires_grad
    x, y = problem()
    ((model(x) - y) ** 2).mean().backward()
    assert model.lin1.weight.grad is not None


# --------------------------------------------------------------------------- 3. a kernel that raises mid-step
OPTIMIZERS = {
    "adamw": lambda ps: optim.AdamW(ps, lr=1e-2),
    "sgd-momentum": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
}
WARMUP, AFTER = 2, 2  # clean iterations before the failing one, and after the recovery

# (optimizer, phase, kernel, which call of that kernel within the phase)
KERNEL_FAILURES = [
    ("adamw", "forward", "matmul", "first"),
    ("adamw", "backward", "matmul", "last"),
    ("adamw", "unscale", "div", "first"),
    ("adamw", "unscale", "unscale_and_check", "first"),
    ("adamw", "optimizer", "sqrt", "first"),
    ("adamw", "optimizer", "sqrt", "middle"),
    ("adamw", "optimizer", "sqrt", "last"),
    ("sgd-momentum", "optimizer", "mul", "first"),
    ("sgd-momentum", "optimizer", "mul", "middle"),
    ("sgd-momentum", "optimizer", "mul", "last"),
    ("sgd-momentum", "update", "update_scale", "first"),
    ("sgd-momentum", "backward", "where", "first"),
]


def iteration_phases(model, opt, scaler, x, y, device_type):
    """One AMP iteration split where a user could see an exception: (name, callable) in order."""
    held = {}

    def forward():
        opt.zero_grad()
        held["loss"] = amp_loss(model, x, y, device_type)

    return [
        ("forward", forward),
        ("backward", lambda: scaler.scale(held["loss"]).backward()),
        ("unscale", lambda: scaler.unscale_(opt)),
        ("optimizer", lambda: held.setdefault("stepped", scaler.step(opt))),
        ("update", lambda: scaler.update()),
    ]


def setup_on(backend, opt_name):
    ampcore.manual_seed(0)
    x, y = problem(device=backend.name)
    model = Net(device=backend.name)
    opt = OPTIMIZERS[opt_name](list(model.parameters()))
    scaler = GradScaler(backend.name, init_scale=2.0**8, growth_interval=1000)
    return model, opt, scaler, x, y


def run_iteration(model, opt, scaler, x, y, device_type):
    for _, fn in iteration_phases(model, opt, scaler, x, y, device_type):
        fn()


def reference_run(register_fake, opt_name, target_phase):
    """A failure-free run on a fake backend: each kernel's call count when ``target_phase`` of iteration
    WARMUP starts and ends, and the (params, optimizer state) after every iteration."""
    backend = register_fake()
    model, opt, scaler, x, y = setup_on(backend, opt_name)
    snapshots, window = [(params_of(model), opt_state_of(opt))], None
    for i in range(WARMUP + 1 + AFTER + 1):
        for phase, fn in iteration_phases(model, opt, scaler, x, y, backend.name):
            start = dict(backend.calls)
            fn()
            if i == WARMUP and phase == target_phase:
                window = (start, dict(backend.calls))
        snapshots.append((params_of(model), opt_state_of(opt)))
    return window, snapshots


@pytest.mark.parametrize(
    "opt_name, phase, kernel, which",
    KERNEL_FAILURES,
    ids=["-".join(getattr(case, "values", case)) for case in KERNEL_FAILURES],
)
def test_a_kernel_failing_mid_step_names_itself_applies_all_or_nothing_and_training_recovers(
    register_fake, opt_name, phase, kernel, which
):
    (start, end), snapshots = reference_run(register_fake, opt_name, phase)
    in_phase = end.get(kernel, 0) - start.get(kernel, 0)
    assert in_phase >= (3 if which == "middle" else 1), f"{kernel} is not called {which} in {phase}"
    k = start.get(kernel, 0) + {"first": 1, "middle": (in_phase + 1) // 2, "last": in_phase}[which]

    backend = register_fake(fail_on=(kernel, k))
    model, opt, scaler, x, y = setup_on(backend, opt_name)
    for _ in range(WARMUP):
        run_iteration(model, opt, scaler, x, y, backend.name)
    before = (params_of(model), opt_state_of(opt))
    phases = iteration_phases(model, opt, scaler, x, y, backend.name)
    names = [name for name, _ in phases]
    for _, fn in phases[: names.index(phase)]:
        fn()
    with pytest.raises(RuntimeError) as failure:
        phases[names.index(phase)][1]()

    # The error reaches the user naming the backend and the kernel (and, from an op, the op).
    message = str(failure.value)
    assert f"'{backend.name}'" in message and f"'{kernel}'" in message, message
    if phase == "forward":
        assert isinstance(failure.value, KernelError) and failure.value.backend == backend.name
        assert failure.value.op in message

    # All or nothing: only a failure in update() comes after a complete optimizer step.
    applied = phase == "update"
    expected = snapshots[WARMUP + 1] if applied else before
    assert_bit_identical(params_of(model), expected[0], "parameters")
    assert_bit_identical(opt_state_of(opt), expected[1], "optimizer state")

    # Recovery: update() after a failure inside step()/unscale_()/update(), then training goes on normally.
    if phase in ("unscale", "optimizer", "update"):
        scaler.update()
    for _ in range(AFTER):
        phases = dict(iteration_phases(model, opt, scaler, x, y, backend.name))
        phases["forward"]()
        phases["backward"]()
        assert scaler.step(opt) is True
        scaler.update()
    expected = snapshots[WARMUP + AFTER + applied]
    assert_bit_identical(params_of(model), expected[0], "parameters after recovery")
    assert_bit_identical(opt_state_of(opt), expected[1], "optimizer state after recovery")
    assert scaler.get_scale() == 2.0**8 and scaler.skipped_steps == 0


@pytest.mark.parametrize("kernel", ["div", "unscale_and_check"])
def test_after_a_failed_unscale_the_next_iteration_steps_normally_without_update(register_fake, kernel):
    (start, _), snapshots = reference_run(register_fake, "adamw", "unscale")
    backend = register_fake(fail_on=(kernel, start.get(kernel, 0) + 1))
    model, opt, scaler, x, y = setup_on(backend, "adamw")
    for _ in range(WARMUP):
        run_iteration(model, opt, scaler, x, y, backend.name)
    phases = dict(iteration_phases(model, opt, scaler, x, y, backend.name))
    phases["forward"]()
    phases["backward"]()
    with pytest.raises(RuntimeError, match=f"'{kernel}'"):
        scaler.step(opt)  # step() unscales first: the failure comes from there
    for _ in range(AFTER):
        run_iteration(model, opt, scaler, x, y, backend.name)
    assert_bit_identical(params_of(model), snapshots[WARMUP + AFTER][0], "parameters after recovery")
    assert_bit_identical(opt_state_of(opt), snapshots[WARMUP + AFTER][1], "optimizer state after recovery")


# --------------------------------------------------------------------------- 4. checkpoint / resume, long run
def checkpointed_run(model, opt, scaler, x, y, bad, start, steps, save_at=()):
    """Steps ``start..steps-1`` with ``bad`` injected; (stepped, (scale, tracker) per step, {k: checkpoint})."""
    stepped, scales, saved = [], [], {}
    for i in range(start, steps):
        if i in save_at:
            saved[i] = copy.deepcopy(
                {"model": model.state_dict(), "opt": opt.state_dict(), "scaler": scaler.state_dict()}
            )
        opt.zero_grad()
        factor = set_fault(model, bad.get(i))
        scaler.scale(amp_loss(model, x, y, loss_factor=factor)).backward()
        stepped.append(scaler.step(opt))
        scaler.update()
        scales.append((scaler.get_scale(), scaler.get_growth_tracker()))
    model.fault = {}
    return stepped, scales, saved


def test_checkpoints_of_a_long_run_with_injected_infs_resume_bit_identically():
    steps, interval, init = 300, 20, 2.0**10
    bad = poison_schedule(steps, 0.05, seed=7)
    x, y = problem(seed=1)

    def fresh(seed, **scaler_kwargs):
        ampcore.manual_seed(seed)
        model = Net()
        return model, optim.AdamW(model.parameters(), lr=3e-3), GradScaler("cpu", **scaler_kwargs)

    # Where to checkpoint, from the rule: before the first scale(), right after a skipped step, and one
    # clean step before the scale grows.
    tracker, after_skip, before_growth = 0, None, None
    for i in range(steps):
        if i > 60 and after_skip is None and i - 1 in bad:
            after_skip = i
        if i > 60 and before_growth is None and tracker == interval - 1 and i not in bad:
            before_growth = i
        _, tracker = scale_rule(1.0, tracker, i in bad, 2.0, 0.5, interval)
    save_at = (0, after_skip, before_growth)
    assert None not in save_at

    model, opt, scaler = fresh(0, init_scale=init, growth_interval=interval, stall_warning_after=None)
    stepped, scales, saved = checkpointed_run(model, opt, scaler, x, y, bad, 0, steps, save_at)
    assert stepped == [i not in bad for i in range(steps)]
    for k in save_at:
        # Fresh objects with other weights and other scaler settings: everything comes from the checkpoint.
        model_b, opt_b, scaler_b = fresh(100 + k, stall_warning_after=None)
        ckpt = saved[k]
        model_b.load_state_dict(ckpt["model"])
        opt_b.load_state_dict(ckpt["opt"])
        scaler_b.load_state_dict(ckpt["scaler"])
        rest, rest_scales, _ = checkpointed_run(model_b, opt_b, scaler_b, x, y, bad, k, steps)
        assert rest == stepped[k:], k
        assert rest_scales == scales[k:], k
        assert_bit_identical(params_of(model_b), params_of(model), f"parameters resumed at {k}")
        assert_bit_identical(opt_state_of(opt_b), opt_state_of(opt), f"optimizer state resumed at {k}")
        assert scaler_b.state_dict() == scaler.state_dict()


def test_a_checkpoint_survives_a_pickle_round_trip():
    x, y = problem()
    model = Net()
    opt = optim.AdamW(model.parameters(), lr=3e-3)
    scaler = GradScaler("cpu")
    scaler.scale(amp_loss(model, x, y)).backward()
    scaler.step(opt)
    scaler.update()
    ckpt = {"model": model.state_dict(), "opt": opt.state_dict(), "scaler": scaler.state_dict()}
    loaded = pickle.loads(pickle.dumps(ckpt))
    fresh = Net()
    fresh.load_state_dict(loaded["model"])
    assert_bit_identical(params_of(fresh), params_of(model), "parameters")


# --------------------------------------------------------------------------- kernels called outside an op
@pytest.mark.parametrize(
    "op, kernel, call",
    [
        ("rand", "uniform", lambda dev: ampcore.rand(3, device=dev)),
        ("randn", "normal", lambda dev: ampcore.randn(3, device=dev)),
        ("rand", "uniform", lambda dev: nn.Linear(4, 2, device=dev)),  # what `ampcore train` does first
        ("full", "full", lambda dev: ampcore.zeros(3, device=dev)),
        ("arange", "arange", lambda dev: ampcore.arange(3, device=dev)),
        ("fill_", "full", lambda dev: ampcore.tensor([1.0, 2.0], device=dev).fill_(0)),
        ("deepcopy", "cast", lambda dev: copy.deepcopy(ampcore.tensor([1.0], device=dev))),
        # assignment names the call the user made (x[i] = v), with the kernel that failed
        ("__setitem__", "slice_assign", lambda dev: ampcore.tensor([1.0, 2.0], device=dev).__setitem__(0, 5.0)),
    ],
)
def test_a_kernel_failing_outside_an_op_raises_kernel_error_naming_it(register_fake, op, kernel, call):
    """Creation, in-place fills and copies call kernels directly; a backend failure there (an OpenCL build
    error, say) must still be a KernelError naming the op and the kernel, not the backend's own exception."""
    backend = register_fake(fail_on=(kernel, 1))
    with pytest.raises(KernelError, match=rf"op '{op}' failed .*kernel '{kernel}'.*{backend.name}") as info:
        call(backend.name)
    assert isinstance(info.value.__cause__, RuntimeError)
