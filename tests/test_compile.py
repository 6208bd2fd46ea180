"""ampcore.compile: a call recorded once at the kernel boundary, replayed bit for bit as eager runs it.

Each test runs the same code eagerly and compiled from the same seeds and compares bits: losses, parameters,
optimizer state, the loss scale and the skipped steps.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ampcore
from ampcore import nn, optim
from ampcore.capture import CaptureBreakError, config
from ampcore.compiler import OptimizedModule, explain
from ampcore.kernels import KernelTable
from ampcore.nn import functional as F
from ampcore.plugins import get_backend
from ampcore.tensor_base import TensorBase


def bits(t: ampcore.Tensor) -> bytes:
    return t.numpy().tobytes()


def batches(n: int, rows: int = 6, features: int = 8, classes: int = 4, seed: int = 0) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [
        (
            ampcore.tensor(rng.standard_normal((rows, features)).astype(np.float32)),
            ampcore.tensor(rng.integers(0, classes, rows)),
        )
        for _ in range(n)
    ]


def model_and_optimizer(dropout: float = 0.1, **opt_kwargs) -> tuple[nn.Module, optim.Optimizer]:
    ampcore.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(dropout), nn.LayerNorm(16), nn.Linear(16, 4))
    return model, optim.AdamW(model.parameters(), lr=1e-2, **opt_kwargs)


# --------------------------------------------------------------------------- functions
def test_a_function_replays_its_kernels_with_eager_bits_and_counts_what_it_did():
    def f(x, w):
        return (x @ w).relu() * 2.0 + 1.0

    compiled = ampcore.compile(f)
    x, w = ampcore.randn(4, 8), ampcore.randn(8, 3)
    outs = [compiled(x, w) for _ in range(4)]
    stats = compiled._compiled.stats
    assert (stats.eager_calls, stats.recordings, stats.replays) == (1, 1, 2)  # warm-up, recording, replays
    assert all(bits(o) == bits(f(x, w)) for o in outs)
    y = ampcore.randn(4, 8)  # new values, same guards: replayed, and computed from the new input
    assert bits(compiled(y, w)) == bits(f(y, w)) and stats.replays == 3


def test_a_replay_skips_the_op_layer(monkeypatch):
    compiled = ampcore.compile(lambda x: (x * 3.0).exp())
    x = ampcore.randn(5)
    compiled(x), compiled(x)
    calls = []
    monkeypatch.setattr("ampcore.dispatch.call", lambda *a, **k: calls.append(a))  # the op layer's entry
    compiled(x)
    assert calls == [] and compiled._compiled.stats.replays == 1


def test_a_new_shape_records_again_and_the_cap_warns_naming_the_guard(monkeypatch):
    monkeypatch.setattr(config, "cache_size_limit", 2)
    compiled = ampcore.compile(lambda x: x + 1.0)
    for n in (3, 3, 4, 4):
        compiled(ampcore.ones(n))
    stats = compiled._compiled.stats
    assert stats.recordings == 2 and stats.recompiles == 1
    assert "argument leaf 0 is a tensor of shape (4,)" in stats.last_guard_failure
    with pytest.warns(RuntimeWarning, match=r"recorded 2 programs .* because argument leaf 0 is a tensor of shape"):
        out = compiled(ampcore.ones(5))
    assert out.tolist() == [2.0] * 5  # beyond the cap: eager


def test_grad_mode_and_autocast_are_guards():
    compiled = ampcore.compile(lambda x, w: x @ w)
    x, w = ampcore.randn(4, 4), ampcore.randn(4, 4, requires_grad=True)
    compiled(x, w), compiled(x, w)
    with ampcore.no_grad():
        assert not compiled(x, w).requires_grad
    with ampcore.autocast("cpu", dtype="bfloat16"):
        assert compiled(x, w).dtype == ampcore.bfloat16
    assert compiled(x, w).dtype == ampcore.float32
    assert compiled._compiled.stats.recordings == 3


def test_a_host_read_breaks_the_capture_and_explain_names_the_line():
    def f(x):
        y = x * 2.0
        if y.sum().item() > 0:  # a host read: Python control flow on a value
            return y + 1.0
        return y - 1.0

    compiled = ampcore.compile(f)
    x = ampcore.ones(3)
    assert [compiled(x).tolist() for _ in range(3)] == [[3.0] * 3] * 3  # eager each time
    stats = compiled._compiled.stats
    assert stats.replays == 0 and len(stats.breaks) == 1
    report = explain(f, x)
    assert report.graph_count == 0 and report.graph_break_count == 1
    (brk,) = report.break_reasons
    assert "read on the host" in brk.reason and "test_compile.py" in brk.where and ".item()" in brk.line
    assert "Break Reason 1" in str(report)


def test_fullgraph_makes_a_break_an_error_naming_the_line():
    def f(x):
        return x * float(x.sum())

    compiled = ampcore.compile(f, fullgraph=True, options={"warmup": 0})
    with pytest.raises(
        CaptureBreakError, match=r"read on the host .* at .*test_compile.py:\d+ in f \(return x \* float"
    ):
        compiled(ampcore.ones(2))


def test_explain_counts_kernels_fusions_and_dynamic_values():
    model, opt = model_and_optimizer()
    (x, y), *_ = batches(1)

    def step(x, y):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    step(x, y)  # warm-up: the optimizer's state
    report = explain(step, x, y)
    assert report.graph_count == 1 and report.graph_break_count == 0 and report.kernels > 10
    assert report.seeds == 1 and report.dynamic == 1  # the dropout mask's seed; the learning rate
    assert report.fused and "kernels as one" in report.fused[0]
    assert "Kernels replayed" in str(report)


# --------------------------------------------------------------------------- modules
def test_a_compiled_module_behaves_as_the_module():
    model, _ = model_and_optimizer()
    compiled = ampcore.compile(model)
    assert isinstance(compiled, OptimizedModule) and compiled._orig_mod is model
    assert compiled[0] is model[0] and compiled.training
    assert list(compiled.state_dict()) == list(model.state_dict())
    assert [p is q for p, q in zip(compiled.parameters(), model.parameters())] == [True] * 6
    saved = {f"_orig_mod.{k}": v * 0.0 for k, v in model.state_dict().items()}  # torch's compiled keys
    compiled.load_state_dict(saved)
    assert float(model[0].weight.abs().sum()) == 0.0
    compiled.eval()
    assert not model.training and not model[2].training


def test_a_compiled_module_replays_forward_and_backward_as_eager(register_fake):
    data = batches(6)
    runs = []
    for compiled in (False, True):
        model, opt = model_and_optimizer()
        net = ampcore.compile(model) if compiled else model
        ampcore.manual_seed(1)
        losses = []
        for x, y in data:  # nanoGPT's loop: compiled model, eager optimizer
            out = net(x)
            loss = F.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(bits(loss))
        runs.append((losses, [bits(p) for p in model.parameters()]))
        if compiled:
            assert net._compiled.stats.replays == 4
            assert type(out.grad_fn.op).__name__ == "CapturedBackward"
    assert runs[0] == runs[1]


def test_training_flag_and_new_parameters_are_guards():
    model, _ = model_and_optimizer(dropout=0.5)
    compiled = ampcore.compile(model)
    x, _ = batches(1)[0]
    compiled(x), compiled(x)
    compiled.eval()
    with ampcore.no_grad():
        assert bits(compiled(x)) == bits(model(x))  # eval: no dropout, a program of its own
    model[0].weight = nn.Parameter(ampcore.zeros(16, 8))
    compiled.train()
    with ampcore.no_grad():
        out = compiled(x)
    assert compiled._compiled.stats.recordings == 3  # train, eval, train with the new weight
    ampcore.manual_seed(5)
    with ampcore.no_grad():
        a = compiled(x)
    ampcore.manual_seed(5)
    with ampcore.no_grad():
        assert bits(a) == bits(model(x)) and out.shape == (6, 4)


def test_a_compiled_module_inside_a_compiled_step_runs_as_part_of_it():
    model, opt = model_and_optimizer(dropout=0.0)
    inner = ampcore.compile(model)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(inner(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    compiled = ampcore.compile(step)
    data = batches(4)
    [compiled(x, y) for x, y in data]
    assert compiled._compiled.stats.replays == 2 and inner._compiled.stats.replays == 0


# --------------------------------------------------------------------------- whole training steps
def amp_step(model, opt, scaler, x, y, dtype):
    """One training step, under autocast to ``dtype`` on ``x``'s device (float32: none) with ``scaler``."""
    opt.zero_grad()
    with ampcore.autocast(x.device.type, dtype=dtype, enabled=dtype != ampcore.float32):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss.detach()


@pytest.mark.parametrize("dtype", [ampcore.float16, ampcore.bfloat16, ampcore.float32])
@pytest.mark.parametrize("fused", [None, False])
def test_a_whole_amp_step_replays_bit_identical_with_no_host_read(dtype, fused):
    data = batches(8)
    if dtype == ampcore.float16:
        x, y = data[4]
        x._data[0, 0] = np.inf  # an overflowing step: skipped, the scale backs off
    runs = []
    for compiled in (False, True):
        model, opt = model_and_optimizer(fused=fused)
        scaler = ampcore.GradScaler.for_dtype(dtype, "cpu")
        step = ampcore.compile(amp_step) if compiled else amp_step
        ampcore.manual_seed(1)
        losses, reads = [], []
        for x, y in data:
            with ampcore.count_host_syncs() as syncs:
                losses.append(step(model, opt, scaler, x, y, dtype))
            reads.append(syncs.count)
        state = [bits(st[k]) for st in opt.state.values() for k in ("exp_avg", "exp_avg_sq")]
        state += [int(float(st["step"])) for st in opt.state.values()]  # an int eagerly, on the device compiled
        runs.append(([bits(v) for v in losses], [bits(p) for p in model.parameters()], state, scaler.get_scale()))
        if compiled:
            assert step._compiled.stats.replays == 6 and reads[2:] == [0] * 6
        if dtype == ampcore.float16:
            assert scaler.skipped_steps == 1
    assert runs[0][:2] == runs[1][:2] and runs[0][3] == runs[1][3]
    assert runs[0][2] == runs[1][2]


def test_a_step_returning_its_loss_after_backward_replays_it_without_a_backward():
    """The loss a step called backward() on (its graph freed) is returned as a value: recording does not walk
    the freed graph."""
    data = batches(4)
    runs = []
    for compiled in (False, True):
        model, opt = model_and_optimizer(dropout=0.0)

        def step(x, y, model=model, opt=opt):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        fn = ampcore.compile(step) if compiled else step
        runs.append([bits(fn(x, y)) for x, y in data] + [bits(p) for p in model.parameters()])
        if compiled:
            assert fn._compiled.stats.replays == 2 and not fn._compiled.stats.breaks
    assert runs[0] == runs[1]


def test_a_learning_rate_changed_between_replays_is_read_afresh():
    data = batches(6)
    runs = []
    for compiled in (False, True):
        model, opt = model_and_optimizer(dropout=0.0)
        sched = optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
        scaler = ampcore.GradScaler("cpu", enabled=False)
        step = ampcore.compile(amp_step) if compiled else amp_step
        for x, y in data:
            step(model, opt, scaler, x, y, ampcore.float32)
            sched.step()
        runs.append([bits(p) for p in model.parameters()])
    assert runs[0] == runs[1]


def test_a_bad_label_in_a_replayed_step_skips_the_update_and_raises_at_the_next_read():
    model, opt = model_and_optimizer(dropout=0.0)
    scaler = ampcore.GradScaler("cpu", enabled=False)
    step = ampcore.compile(amp_step)
    data = batches(3)
    for x, y in data:
        step(model, opt, scaler, x, y, ampcore.float32)
    before = [p._data.tobytes() for p in model.parameters()]  # the arrays themselves: a read would raise
    x, _ = data[0]
    loss = step(model, opt, scaler, x, ampcore.tensor([0, 1, 9, 2, 3, 1]), ampcore.float32)
    assert step._compiled.stats.replays == 2
    assert [p._data.tobytes() for p in model.parameters()] == before  # skipped on the device
    with pytest.raises(ValueError, match="target class 9 is out of range for 4 classes"):
        loss.item()


def test_an_upload_inside_the_call_is_replayed_as_a_constant_and_said_so():
    def f(x):
        return x + ampcore.tensor([1.0, 2.0, 3.0])

    report = explain(f, ampcore.zeros(3))
    assert report.uploads == 1 and "replayed as constants" in str(report)


def test_a_scheduler_stepped_inside_the_call_breaks_the_capture():
    model, opt = model_and_optimizer()
    sched = optim.lr_scheduler.StepLR(opt, 1)
    report = explain(lambda x: (model(x).sum(), sched.step()), batches(1)[0][0])
    assert report.graph_count == 0 and "LR scheduler" in report.break_reasons[0].reason


def test_host_random_draws_break_the_capture():
    report = explain(lambda x: x + ampcore.randperm(3).float(), ampcore.zeros(3))
    assert report.graph_count == 0 and "drawn on the host" in report.break_reasons[-1].reason


# --------------------------------------------------------------------------- what it costs when off
def test_recording_leaves_nothing_on_the_op_path():
    data_descriptor, grad_descriptor = TensorBase.__dict__["_data"], TensorBase.__dict__["grad"]
    compiled = ampcore.compile(lambda x: (x * 2.0).sum(), options={"warmup": 0})
    compiled(ampcore.ones(4))
    kernels = get_backend("cpu").kernels
    assert kernels._recorder is None
    assert not [n for n, fn in vars(kernels).items() if "Recorder" in getattr(fn, "__qualname__", "")]
    assert TensorBase.__dict__["_data"] is data_descriptor and TensorBase.__dict__["grad"] is grad_descriptor
    assert type(data_descriptor).__name__ == "member_descriptor"
    assert isinstance(get_backend("cpu").kernels, KernelTable)


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="unknown compile mode 'fast'"):
        ampcore.compile(lambda x: x, mode="fast")
    with pytest.raises(ValueError, match="unknown compile option 'unroll'"):
        ampcore.compile(lambda x: x, options={"unroll": 2})
    with pytest.raises(TypeError, match="needs a Module or a callable"):
        ampcore.compile(3)
    f = lambda x: x  # noqa: E731
    assert ampcore.compile(f, disable=True) is f and ampcore.compile(f, backend="eager") is f


def test_decorator_forms():
    @ampcore.compile
    def f(x):
        return x + 1.0

    @ampcore.compile(fullgraph=True)
    def g(x):
        return x * 2.0

    x = ampcore.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [f(x).tolist() for _ in range(3)][-1] == [2.0, 2.0]
        assert [g(x).tolist() for _ in range(3)][-1] == [2.0, 2.0]


def test_a_whole_amp_step_replays_bit_identical_on_an_opencl_device(opencl_device):
    """The opencl backend's list of enqueues (recorded at the first replay): float16 AMP with an overflowing batch."""
    device = f"opencl:{opencl_device}"
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((5, 8)).astype(np.float32) for _ in range(6)]
    xs[3][0, 0] = np.inf
    data = [(ampcore.tensor(x, device=device), ampcore.tensor(rng.integers(0, 4, 5), device=device)) for x in xs]
    runs = []
    for compiled in (False, True):
        model, opt = model_and_optimizer()
        model.to(device)
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        scaler = ampcore.GradScaler("opencl")
        step = ampcore.compile(amp_step) if compiled else amp_step
        ampcore.manual_seed(1)
        reads = []
        losses = []
        for x, y in data:
            with ampcore.count_host_syncs() as syncs:
                losses.append(step(model, opt, scaler, x, y, ampcore.float16))
            reads.append(syncs.count)
        runs.append(([bits(v) for v in losses], [bits(p) for p in model.parameters()], scaler.skipped_steps))
        if compiled:
            assert step._compiled.stats.replays == 4 and reads[2:] == [0] * 4
    assert runs[0] == runs[1] and runs[0][2] == 1


# --------------------------------------------------------------------------- values host code keeps
@pytest.mark.parametrize("arrays", [False, True])
def test_values_host_code_keeps_are_handed_over_again_by_each_replay(arrays):
    """hooks.keep_device_values: the host keeps device values unread (float8's stats); each replay hands its own,
    as tensors, or with ``arrays=True`` as the backend's arrays (no tensor per value), eagerly and in replays."""
    from ampcore.hooks import keep_device_values

    kept: list[tuple[object, ...]] = []

    def f(x):
        y = x * 2.0
        keep_device_values(lambda *values: kept.append(values), y.sum(), y.amax(), arrays=arrays)
        return y + 1.0

    compiled = ampcore.compile(f)
    xs = [ampcore.randn(4, 3) for _ in range(5)]
    for x in xs:
        compiled(x)
    assert compiled._compiled.stats.replays == 3 and not compiled._compiled.stats.breaks
    assert all(isinstance(v, ampcore.Tensor) != arrays for values in kept for v in values)
    as_bytes = (lambda v: np.asarray(v).tobytes()) if arrays else bits
    want = [(bits((x * 2.0).sum()), bits((x * 2.0).amax())) for x in xs]
    assert [tuple(as_bytes(v) for v in values) for values in kept] == want


def test_a_kept_value_made_outside_the_call_breaks_the_capture():
    from ampcore.hooks import keep_device_values

    before = ampcore.ones(())
    compiled = ampcore.compile(lambda x: keep_device_values(lambda v: None, before) or x + 1.0)
    for _ in range(3):
        compiled(ampcore.randn(2))
    assert "kept a device value computed outside the call" in compiled._compiled.stats.breaks[0].reason


def float8_step(model, opt, scaler, x, y):
    opt.zero_grad()
    with ampcore.autocast(x.device.type, dtype=ampcore.bfloat16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss.detach()


def float8_runs(recipe: str, device: str = "cpu") -> list[tuple]:
    """Six float8 steps eagerly, then compiled from the same seed: loss and parameter bits and every per-step
    stat of each run; the compiled run must replay four times, with no break and no host read."""
    from ampcore.float8 import convert_to_float8_training, float8_stats

    data = [(x.to(device), y.to(device)) for x, y in batches(6, rows=32, features=32)]
    runs = []
    for compiled in (False, True):
        ampcore.manual_seed(0)
        model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
        convert_to_float8_training(model, recipe)
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        scaler = ampcore.GradScaler.for_dtype(ampcore.bfloat16, device)
        step = ampcore.compile(float8_step) if compiled else float8_step
        losses, reads = [], []
        for x, y in data:
            with ampcore.count_host_syncs() as syncs:
                loss = step(model, opt, scaler, x, y)
            reads.append(syncs.count)
            losses.append(bits(loss))
        if compiled:
            assert step._compiled.stats.replays == 4 and not step._compiled.stats.breaks
            assert reads[2:] == [0] * 4
        runs.append((losses, [bits(p) for p in model.parameters()], float8_stats(model)))
    return runs


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "delayed,amax_history_len=4", "mxfp8"])
def test_a_float8_training_step_replays_bit_identical_with_its_stats_and_no_host_read(recipe):
    """Every recipe's step captures: losses, parameters, the delayed recipe's history and every per-step stat
    are eager's bits, and a replay reads nothing on the host."""
    eager, compiled = float8_runs(recipe)
    assert eager == compiled
    assert all(len(role["amax"]) == 6 for layer in compiled[2].values() for role in layer.values())


@pytest.mark.parametrize("recipe", ["tensorwise", "delayed,amax_history_len=4"])
def test_a_float8_training_step_replays_bit_identical_on_an_opencl_device(opencl_device, recipe):
    eager, compiled = float8_runs(recipe, f"opencl:{opencl_device}")
    assert eager == compiled


# --------------------------------------------------------------------------- what a backend runner may use
def test_the_reference_runner_wraps_each_step_and_names_the_steps_that_draw_per_replay():
    """reference_runner(program, wrap=...) calls wrap(i, kernel) for each step and runs the wrapped kernels in
    order; draws_per_replay picks the steps that take a seed or a dynamic number."""
    from ampcore.capture import draws_per_replay, reference_runner

    model, opt = model_and_optimizer(dropout=0.5)
    data = batches(4)
    scaler = ampcore.GradScaler("cpu", enabled=False)
    compiled = ampcore.compile(amp_step)
    for x, y in data[:2]:
        compiled(model, opt, scaler, x, y, ampcore.float32)
    (entry,) = compiled._compiled.entries.values()
    program = entry.program
    drawing = {step.name for step in program.steps if draws_per_replay(step)}
    assert any(name not in ("adamw_step", "adamw_step_amp") for name in drawing), drawing  # dropout's seed
    assert drawing & {"adamw_step", "adamw_step_amp"}, drawing  # the learning rate
    seen: list[int] = []

    def wrap(i, kernel):
        def counted(*args, **kwargs):
            seen.append(i)
            return kernel(*args, **kwargs)

        return counted

    entry.run = reference_runner(program, wrap=wrap)
    for x, y in data[2:]:
        compiled(model, opt, scaler, x, y, ampcore.float32)
    assert seen == list(range(len(program.steps))) * 2 and compiled._compiled.stats.replays == 2
