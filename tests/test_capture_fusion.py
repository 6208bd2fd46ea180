"""Fusion in captured programs (ampcore.capture.fusion): which chains fuse, the rounding nodes that keep eager's
bits, the cpu backend's fused loops, and the opt-in relaxed mode judged by tolerance."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore import expr as E
from ampcore.capture.dynamic import Dynamic, dynamic, plain
from ampcore.compiler import explain


def _bits(t: ampcore.Tensor) -> bytes:
    return t.numpy().tobytes()


def _fused_programs(fn, *args) -> list:
    compiled = ampcore.compile(fn, options={"warmup": 0})
    compiled(*args)
    (entry,) = compiled._compiled.entries.values()
    return [step.program for step in entry.program.steps if getattr(step, "program", None) is not None]


def test_a_16_bit_chain_rounds_where_eager_stores_and_gives_eager_bits():
    a, b = ampcore.randn(64, 33).bfloat16(), ampcore.randn(33).bfloat16()

    def f(a, b):
        return ((a * 0.5 + b) * 3.0).relu()

    (prog,) = _fused_programs(f, a, b)
    roundings = [n for n in prog.nodes if n.op == "round_bfloat16"]
    assert len(roundings) == 4  # mul, add, mul, relu each store bfloat16 eagerly
    compiled = ampcore.compile(f)
    assert [_bits(compiled(a, b)) for _ in range(3)] == [_bits(f(a, b))] * 3


def test_a_float32_chain_needs_no_rounding_node_and_mixed_dtypes_fuse():
    x, r = ampcore.randn(16, 8).bfloat16(), ampcore.randn(16, 8)

    def f(x, r):
        return (x.float() + r) * 2.0 - r  # bfloat16 widened exactly, then float32 arithmetic

    (prog,) = _fused_programs(f, x, r)
    assert not [n for n in prog.nodes if n.op in E.ROUNDINGS] and prog.inputs == "TT"
    compiled = ampcore.compile(f)
    assert [_bits(compiled(x, r)) for _ in range(3)][-1] == _bits(f(x, r))


def test_a_transcendental_function_ends_a_chain():
    def f(x):
        return ((x * 2.0 + 1.0).exp() * 3.0 - 1.0).abs()

    programs = _fused_programs(f, ampcore.randn(10))
    assert [[n.op for n in p.nodes] for p in programs] == [["mul", "add"], ["mul", "sub", "abs"]]


def test_an_intermediate_read_twice_is_not_fused_into_its_readers():
    def f(x):
        h = x * 2.0 + 1.0
        return h * h.relu() + h

    x = ampcore.randn(12)
    first, second = _fused_programs(f, x)  # h (read three times) ends a chain; its readers' chain takes it as input
    assert [n.op for n in first.nodes] == ["mul", "add"] and second.arity == 1
    assert [n.op for n in second.nodes].count("maximum") + [n.op for n in second.nodes].count("select") >= 1
    compiled = ampcore.compile(f)
    assert [_bits(compiled(x)) for _ in range(3)][-1] == _bits(f(x))


def test_the_cpu_fused_loop_and_its_numpy_fallback_agree_bit_for_bit():
    from ampcore_cpu import fusion as cpu_fusion

    rng = np.random.default_rng(0)
    prog = E.program("chain", lambda a, b: E.round_float16(E.round_float16(a * b) + 1.0) / 3.0, "TT")
    a = rng.standard_normal((40, 50)).astype(np.float16)
    b = rng.standard_normal((50,)).astype(np.float32)
    fused = cpu_fusion.fused_kernel(prog, [ampcore.float16, ampcore.float32], ampcore.float16)
    slow = cpu_fusion._numpy_kernel(prog, np.dtype(np.float32), np.dtype(np.float16))
    assert fused is not None
    assert fused(a, b).tobytes() == slow(a, b).tobytes()
    eager = ((a.astype(np.float32) * b).astype(np.float16).astype(np.float32) + 1.0).astype(np.float16)
    assert fused(a, b).tobytes() == (eager.astype(np.float32) / 3.0).astype(np.float16).tobytes()


def test_the_relaxed_mode_drops_roundings_says_so_and_stays_within_its_tolerance():
    rng = np.random.default_rng(1)
    a, b, c = (ampcore.tensor(rng.uniform(0.5, 2.0, (64, 64)), dtype="bfloat16") for _ in range(3))

    def f(a, b, c):
        return (a * b + c) * b + a  # positive terms: no cancellation, each rounding a relative 2**-9 at most

    exact = f(a, b, c).numpy().astype(np.float64)
    relaxed = ampcore.compile(f, options={"relaxed": True})
    out = [relaxed(a, b, c) for _ in range(3)][-1].numpy().astype(np.float64)
    assert not np.array_equal(out, exact)  # not eager's bits: the intermediates stayed in float32
    assert np.all(np.abs(out - exact) <= 4 * 2.0**-8 * np.abs(exact))  # 4 roundings of eager's, 2**-8 relative each
    report = explain(relaxed, a, b, c)
    assert report.relaxed and "relaxed" in str(report) and "not bit-identical" in str(report)


def test_dynamic_numbers_replay_the_same_float_operations():
    lr = [0.5]
    recorder = type("R", (), {"thread": __import__("threading").get_ident()})()
    from ampcore.hooks import CAPTURE

    assert type(dynamic(0.5, lambda: lr[0])) is float  # nothing records: a plain float
    CAPTURE.recorder = recorder
    try:
        d = dynamic(0.5, lambda: lr[0])
    finally:
        CAPTURE.recorder = None
    decay = 1.0 - d * 0.01
    assert isinstance(decay, Dynamic) and decay == 1.0 - 0.5 * 0.01
    lr[0] = 0.25
    assert decay.getter() == 1.0 - 0.25 * 0.01 and (2.0 / d).getter() == 2.0 / 0.25
    assert type(plain([d, (d, 3)])[1][0]) is float


@pytest.mark.parametrize("fusion", [True, False])
def test_fusion_can_be_turned_off(fusion):
    compiled = ampcore.compile(lambda x: x * 2.0 + 1.0, options={"warmup": 0, "fusion": fusion})
    compiled(ampcore.ones(4))
    (entry,) = compiled._compiled.entries.values()
    assert (entry.program.kernel_count == 1) is fusion


# --------------------------------------------------------------------------- GEMM epilogues
def _step_names(fn, *args) -> list[str]:
    compiled = ampcore.compile(fn, options={"warmup": 0})
    compiled(*args)
    (entry,) = compiled._compiled.entries.values()
    return [step.name for step in entry.program.steps]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_matmul_and_the_chain_that_alone_reads_it_run_as_one_kernel_with_eager_bits(dtype):
    rng = np.random.default_rng(2)
    x, w, b = (ampcore.tensor(rng.standard_normal(s), dtype=dtype) for s in ((32, 70), (70, 24), (24,)))

    def linear_relu(x, w, b):
        return (x @ w + b).relu()

    assert _step_names(linear_relu, x, w, b) == ["fused[matmul+add+relu]"]
    (prog,) = _fused_programs(linear_relu, x, w, b)
    first = {"float16": "round_float16", "bfloat16": "round_bfloat16"}.get(dtype)
    rounded = [n for n in prog.nodes if n.op in E.ROUNDINGS and n.args[0].is_input]
    assert [n.op for n in rounded] == ([first] if first else [])  # the product's own rounding, as eager stores it
    compiled = ampcore.compile(linear_relu)
    assert [_bits(compiled(x, w, b)) for _ in range(3)] == [_bits(linear_relu(x, w, b))] * 3


def test_a_product_read_elsewhere_or_by_no_chain_keeps_its_own_matmul():
    x, w = ampcore.randn(8, 16).bfloat16(), ampcore.randn(16, 4).bfloat16()

    def returned(x, w):
        p = x @ w
        return (p * 2.0).relu(), p  # the product is a result too: stored as eager stores it

    def read_twice(x, w):
        p = x @ w
        return p * 2.0 + p.sum()

    assert _step_names(returned, x, w) == ["matmul", "fused[mul+relu]"]
    assert "matmul" in _step_names(read_twice, x, w)
    assert _step_names(lambda x, w: (x @ w).sum(), x, w) == ["matmul", "sum"]


def test_a_backend_that_fuses_no_epilogue_keeps_the_matmul_and_fuses_the_chain(monkeypatch):
    from ampcore_cpu.plugin import CPUBackend

    monkeypatch.setattr(CPUBackend, "fused_gemm_kernel", lambda self, *args: None)
    x, w, b = ampcore.randn(8, 16).half(), ampcore.randn(16, 4).half(), ampcore.randn(4).half()
    assert _step_names(lambda x, w, b: (x @ w + b).relu(), x, w, b) == ["matmul", "fused[add+relu]"]


def test_a_product_past_the_widened_paths_size_is_rounded_first_and_still_gives_eager_bits(monkeypatch):
    from ampcore_cpu import kernels

    monkeypatch.setattr(kernels, "BLOCKED_GEMM_ELEMENTS", 64)  # every product here takes the blocked path
    x, w, b = ampcore.randn(40, 30).half(), ampcore.randn(30, 50).half(), ampcore.randn(50).half()
    assert kernels.matmul_sums(x._data, w._data) is None

    def f(x, w, b):
        return (x @ w) * 0.75 + b

    compiled = ampcore.compile(f, options={"warmup": 0})
    assert [_bits(compiled(x, w, b)) for _ in range(3)] == [_bits(f(x, w, b))] * 3
    report = explain(compiled, x, w, b)
    assert any("a GEMM with its epilogue" in line for line in report.fused)


def test_a_float8_scaled_mm_and_its_epilogue_run_as_one_kernel_on_cpu():
    from ampcore.ops.float8 import scaled_mm

    rng = np.random.default_rng(5)
    f8 = ampcore.float8_e4m3fn
    a = ampcore.tensor((rng.standard_normal((16, 32)) * 4).astype(np.float32), dtype="float32").to(f8)
    b = ampcore.tensor((rng.standard_normal((32, 8)) * 4).astype(np.float32), dtype="float32").to(f8)
    sa, sb, bias = ampcore.tensor(0.5), ampcore.tensor(0.25), ampcore.randn(8).bfloat16()

    def f(a, b, sa, sb, bias):
        return (scaled_mm(a, b, sa, sb, ampcore.bfloat16) + bias).relu()

    assert _step_names(f, a, b, sa, sb, bias) == ["fused[scaled_mm+add+relu]"]
    compiled = ampcore.compile(f)
    assert [_bits(compiled(a, b, sa, sb, bias)) for _ in range(3)] == [_bits(f(a, b, sa, sb, bias))] * 3
