"""The cpu backend's captured programs keep float16 values widened in float32 where every kernel that reads them
takes them so (ampcore_cpu.widen): the same bits as eager, step for step, with fewer conversions."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore import training as T
from ampcore_cpu import compiled, kernels, widen
from ampcore_cpu.plugin import CPUBackend

pytestmark = pytest.mark.skipif(
    not compiled.status().enabled, reason="the NumPy fallback keeps float16 as it is (no numba: nothing to gain)"
)


def _mlp_step(dtype: str, seed: int = 0):
    ampcore.manual_seed(seed)
    model = T.build_model(32, (48, 48), 10, "cpu")
    opt = ampcore.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, fused=True)
    scaler = ampcore.GradScaler.for_dtype(ampcore.dtypes.as_dtype(dtype), "cpu")
    return model, opt, scaler


def _batches(n: int, inf_at: int | None = 4) -> list[tuple[ampcore.Tensor, ampcore.Tensor]]:
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((16, 32)).astype(np.float32) for _ in range(n)]
    if inf_at is not None:
        xs[inf_at][0, 0] = np.inf  # an overflowing step: skipped, the scale backs off
    return [(ampcore.tensor(x), ampcore.tensor(rng.integers(0, 10, 16))) for x in xs]


def _program(step) -> ampcore.capture.Program:
    (entry,) = step._compiled.entries.values()
    return entry.program


def test_a_float16_amp_step_keeps_its_inner_values_widened_and_gives_eager_bits_step_for_step():
    dtype = ampcore.float16
    eager_parts, captured_parts = _mlp_step("float16"), _mlp_step("float16")
    step = ampcore.compile(T.train_step)
    for x, y in _batches(8):
        want = T.train_step(*eager_parts[:2], x, y, eager_parts[2], dtype)
        got = step(*captured_parts[:2], x, y, captured_parts[2], dtype)
        assert got.numpy().tobytes() == want.numpy().tobytes() or (np.isnan(got.numpy()) and np.isnan(want.numpy()))
    assert step._compiled.stats.replays >= 5
    for p, q in zip(eager_parts[0].parameters(), captured_parts[0].parameters()):
        assert p.numpy().tobytes() == q.numpy().tobytes()
    assert eager_parts[2].get_scale() == captured_parts[2].get_scale() < 65536.0  # the inf step backed off
    program = _program(step)
    widened = widen.widen_float16(program)
    assert widened is not None
    names = [s.name for s in widened.steps]
    assert names.count("widened[cast]") >= 3  # the input's and the weights' casts to float16
    kept = [s for s, (a, b) in enumerate(zip(program.slots, widened.slots)) if a.dtype != b.dtype]
    assert kept and all(program.slots[s].dtype == ampcore.float16 for s in kept)
    assert not set(kept) & (set(program.inputs) | set(program.results))


def test_a_result_and_a_value_whose_view_a_sum_reads_stay_float16():
    x, w = ampcore.randn(8, 16).half(), ampcore.randn(16, 8).half()

    def kept(x, w):
        h = (x @ w + 1.0).relu()  # read by the next GEMM's epilogue only: kept widened
        return (h @ w.t()) * 2.0

    def viewed(x, w):
        h = (x @ w + 1.0).relu()
        return (h @ w.t()) * 2.0, h.t().sum(0)  # a view of h read by a sum: its widened copy's order could differ

    for f, widens in ((kept, True), (viewed, False)):
        step = ampcore.compile(f, options={"warmup": 0})
        step(x, w)
        program = _program(step)
        widened = widen.widen_float16(program)
        assert (widened is not None) is widens, f.__name__
        if widened is not None:
            assert all(widened.slots[r].dtype == program.slots[r].dtype for r in program.results)
        out, want = step(x, w), f(x, w)
        out, want = (out, want) if isinstance(out, tuple) else ((out,), (want,))
        assert [r.numpy().tobytes() for r in out] == [r.numpy().tobytes() for r in want]


def test_nothing_is_widened_where_onemkl_runs_the_float16_gemm_or_numba_is_off(monkeypatch):
    model, opt, scaler = _mlp_step("float16")
    step = ampcore.compile(T.train_step)
    x, y = _batches(1, inf_at=None)[0]
    for _ in range(3):
        step(model, opt, x, y, scaler, ampcore.float16)
    program = _program(step)
    assert widen.widen_float16(program) is not None
    mkl = kernels.lowp_gemm.GemmChoice("float16", True, "forced for the test")
    monkeypatch.setattr(kernels, "gemm_choice", lambda dtype: mkl)
    assert widen.widen_float16(program) is None
    monkeypatch.undo()
    monkeypatch.setattr(compiled, "status", lambda: compiled.CompiledPath(False, "off for the test"))
    assert widen.widen_float16(program) is None


@pytest.mark.parametrize("low", [kernels.F16, kernels.BF16], ids=["float16", "bfloat16"])
def test_a_widened_epilogue_hands_16_bit_operands_to_onemkl_if_it_runs_later(monkeypatch, low):
    seen = []

    def fake(a, b, *rest):
        seen.append((a.dtype, b.dtype))
        return a

    kernel = widen._widened_operands(fake, low)
    a32 = np.arange(6, dtype=low).reshape(2, 3).astype(np.float32)
    b16 = np.ones((3, 2), low)
    kernel(a32, b16)
    kind = ampcore.dtypes.as_dtype(low).name
    mkl = kernels.lowp_gemm.GemmChoice(kind, True, "forced for the test")
    monkeypatch.setitem(kernels.lowp_gemm._chosen, (kind, kernels.threads._wanted), mkl)  # as if probed so
    kernel(a32, b16)
    assert seen == [(np.float32, np.float32), (low, low)]


def test_turning_the_runner_off_gives_the_same_bits(monkeypatch):
    batches = _batches(6)
    losses = []
    for off in (False, True):
        if off:
            monkeypatch.setattr(CPUBackend, "capture_runner", lambda self, program: None)
        model, opt, scaler = _mlp_step("float16", seed=3)
        step = ampcore.compile(T.train_step)
        losses.append([step(model, opt, x, y, scaler, ampcore.float16).numpy().tobytes() for x, y in batches])
        losses.append([p.numpy().tobytes() for p in model.parameters()])
    assert losses[0] == losses[2] and losses[1] == losses[3]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_transformer_blocks_16_bit_step_gives_eager_bits_with_attentions_transposed_operands(dtype):
    """Attention's projections read transposed (non-contiguous) views: a kept operand is laid out as the widened
    path's float32 copy would be, since BLAS sums a transposed operand in another order."""
    low = ampcore.dtypes.as_dtype(dtype)
    from ampcore.bench import models as M
    from ampcore.bench import runs as R

    spec = M._transformer_spec("t", 64, 2, 24, 8)
    rng = np.random.default_rng(2)
    batches = [
        (ampcore.tensor(rng.standard_normal((8, 24, 64)).astype(np.float32)), ampcore.tensor(rng.integers(0, 10, 8)))
        for _ in range(5)
    ]
    results = []
    for compiled_step in (False, True):
        ampcore.manual_seed(0)
        model = spec.build("cpu")
        opt = ampcore.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
        scaler = ampcore.GradScaler.for_dtype(low, "cpu")
        step = ampcore.compile(R.train_step) if compiled_step else R.train_step
        losses = [step(model, opt, scaler, x, y, low, True).numpy().tobytes() for x, y in batches]
        results.append((losses, [p.numpy().tobytes() for p in model.parameters()]))
        if compiled_step:
            program = _program(step)
            widened = widen.widen_16bit(program)
            assert widened is not None
            kept = {program.slots[s].dtype for s in range(len(program.slots)) if widened.slots[s] != program.slots[s]}
            assert kept == {low}
            assert "widened[matmul]" in [s.name for s in widened.steps]  # attention's products, read by views
    assert results[0] == results[1]


def test_a_value_a_kernel_reads_inside_a_list_stays_float16():
    """A kernel that takes a list of arrays (cat, the optimizer's and the scaler's kernels) reads its float16
    operands as they are: a value read there is not kept widened."""
    x = ampcore.randn(8, 16).half()

    def f(x):
        h = (x * 2.0 + 1.0).relu()  # a fused chain's float16 result, read only inside cat's list
        return ampcore.cat([h, x]) * 3.0

    step = ampcore.compile(f, options={"warmup": 0})
    step(x)
    assert widen.widen_float16(_program(step)) is None
    got, want = step(x), f(x)
    assert got.dtype == want.dtype == ampcore.float16 and got.numpy().tobytes() == want.numpy().tobytes()


def test_a_sum_read_only_by_a_chain_is_kept_widened_and_rounded_as_eager():
    """A float16 sum of a kept value whose result only a fused chain reads: reduced in float32 as the float16 path
    does on its widened copy, rounded to float16, and kept widened for the chain."""
    x, w = ampcore.randn(32, 16).half(), ampcore.randn(16, 24).half()

    def f(x, w):
        h = (x @ w + 1.0).relu()  # kept: read by the sum only
        return h.sum(0) * 3.0 + 1.0  # the sum's result read by the chain only: kept too

    step = ampcore.compile(f, options={"warmup": 0})
    step(x, w)
    program = _program(step)
    widened = widen.widen_float16(program)
    assert widened is not None
    (total,) = [s for s in widened.steps if s.name == "widened[sum]"]
    assert widened.slots[total.args[0].slot].dtype == widened.slots[total.outs.slot].dtype == ampcore.float32
    assert [step(x, w).numpy().tobytes() for _ in range(2)] == [f(x, w).numpy().tobytes()] * 2


def test_a_bfloat16_amp_step_keeps_its_gemm_operands_widened_and_gives_eager_bits_step_for_step():
    """bfloat16 takes part as float16 does, sums aside (bfloat16's sum reduces the 2-byte array in NumPy's
    buffered order, which a float32 reduction need not repeat): the casts of the input and the weights are kept
    widened for the GEMMs that read them."""
    dtype = ampcore.bfloat16
    eager_parts, captured_parts = _mlp_step("bfloat16"), _mlp_step("bfloat16")
    step = ampcore.compile(T.train_step)
    for x, y in _batches(6, inf_at=None):
        want = T.train_step(*eager_parts[:2], x, y, eager_parts[2], dtype)
        got = step(*captured_parts[:2], x, y, captured_parts[2], dtype)
        assert got.numpy().tobytes() == want.numpy().tobytes()
    for p, q in zip(eager_parts[0].parameters(), captured_parts[0].parameters()):
        assert p.numpy().tobytes() == q.numpy().tobytes()
    program = _program(step)
    assert widen.widen_float16(program) is None
    widened = widen.widen_bfloat16(program)
    assert widened is not None and widen.widen_16bit(program) is not None
    names = [s.name for s in widened.steps]
    assert names.count("widened[cast]") >= 3 and "widened[sum]" not in names


def test_a_bfloat16_value_a_sum_reads_stays_bfloat16():
    x, w = ampcore.randn(32, 16).bfloat16(), ampcore.randn(16, 24).bfloat16()

    def f(x, w):
        h = (x @ w + 1.0).relu()  # read by the sum only
        return h.sum(0) * 3.0 + 1.0

    step = ampcore.compile(f, options={"warmup": 0})
    step(x, w)
    assert widen.widen_bfloat16(_program(step)) is None
    assert [step(x, w).numpy().tobytes() for _ in range(2)] == [f(x, w).numpy().tobytes()] * 2
