"""The cpu backend's captured float8 steps hand each cast's dequantized operand to the GEMMs that read its codes
(ampcore_cpu.dequantize): made in the cast's own pass, the same bits as eager, step for step."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore import training as T
from ampcore.float8 import convert_to_float8_training
from ampcore_cpu import compiled, dequantize, float8
from ampcore_cpu.plugin import CPUBackend

pytestmark = pytest.mark.skipif(
    not compiled.status().enabled, reason="the NumPy fallback has no dequantizing cast (no numba)"
)


def _parts(recipe: str, seed: int = 0):
    """A digits-sized float8 MLP: 64 -> 128 -> 40 -> 10, batch 24, so that some operands have 1024 elements or
    more (gathered in memory order, transposed ones handed on F-contiguous) and some fewer (copied C-contiguous)."""
    ampcore.manual_seed(seed)
    model = T.build_model(64, (128, 40), 10, "cpu")
    convert_to_float8_training(model, recipe)
    opt = ampcore.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, fused=True)
    return model, opt, ampcore.GradScaler.for_dtype(ampcore.bfloat16, "cpu")


def _batches(n: int) -> list[tuple[ampcore.Tensor, ampcore.Tensor]]:
    rng = np.random.default_rng(2)
    return [
        (
            ampcore.tensor((rng.standard_normal((24, 64)) * 3).astype(np.float32)),
            ampcore.tensor(rng.integers(0, 10, 24)),
        )
        for _ in range(n)
    ]


def _runs(recipe: str) -> tuple[list[bytes], list[bytes], list[bytes], list[bytes], ampcore.capture.Program]:
    eager, captured = _parts(recipe), _parts(recipe)
    step = ampcore.compile(T.train_step)
    want, got = [], []
    for x, y in _batches(6):
        want.append(T.train_step(*eager[:2], x, y, eager[2], ampcore.bfloat16).numpy().tobytes())
        got.append(step(*captured[:2], x, y, captured[2], ampcore.bfloat16).numpy().tobytes())
    assert step._compiled.stats.replays >= 3
    (entry,) = step._compiled.entries.values()
    params = [[p.numpy().tobytes() for p in parts[0].parameters()] for parts in (eager, captured)]
    return want, got, *params, entry.program


@pytest.mark.parametrize(("recipe", "casts"), [("tensorwise", 9), ("rowwise", 16)])
def test_a_float8_step_hands_every_cast_dequantized_to_its_gemms_with_eager_bits(recipe, casts):
    """tensorwise: nine casts, each read by one or two GEMMs; rowwise: a cast per GEMM operand (the weight
    gradient's operands are cast along their other axis), each weight's (N, 1) scales reshaped into the (1, N)
    row its GEMM takes."""
    want, got, eager_params, captured_params, program = _runs(recipe)
    assert got == want and captured_params == eager_params
    rewritten = dequantize.dequantize_float8(program)
    assert rewritten is not None
    names = [s.name for s in rewritten.steps if s.name.startswith("quantize_float8_current")]
    assert names.count("quantize_float8_current+dequantized") == casts  # rowwise: one more, its codes unread
    gemms = [s for s in rewritten.steps if (getattr(s, "gemm", None) or s.name) == "scaled_mm"]
    assert len(gemms) == 8  # three forward, three weight gradients, two input gradients (not the input's)
    refs = [s.args[-2:] for s in gemms]
    assert all(isinstance(r, ampcore.capture.Ref) for pair in refs for r in pair)
    assert rewritten.removed > program.removed  # the codes' transposes, which only the GEMMs read


def test_a_dequantized_operand_off_by_one_ulp_changes_the_step(monkeypatch):
    """The check above can fail: a cast whose dequantized operand is one float32 ulp off gives other bits."""
    real = float8.quantize_current_dequantized

    def off(*args):
        *results, dequantized = real(*args)
        return (*results, np.nextafter(dequantized, np.float32(np.inf)))

    monkeypatch.setattr(float8, "quantize_current_dequantized", off)
    want, got, eager_params, captured_params, _ = _runs("tensorwise")
    assert captured_params != eager_params


def test_the_runner_on_and_off_gives_the_same_bits(monkeypatch):
    runs = [_runs("tensorwise")[:4]]
    monkeypatch.setattr(CPUBackend, "capture_runner", lambda self, program: None)
    runs.append(_runs("tensorwise")[:4])
    assert runs[0] == runs[1]


def test_the_numpy_fallback_is_left_as_it_is(monkeypatch):
    *_, program = _runs("tensorwise")
    monkeypatch.setattr(compiled, "status", lambda: compiled.CompiledPath(False, "off for the test"))
    assert dequantize.dequantize_float8(program) is None


def test_the_gemm_takes_the_codes_if_onemkl_runs_it_later(monkeypatch):
    """A dequantized operand's argument is its cast's codes themselves (their views are dead steps no longer): the
    GEMM gets the float32 operand viewed as the codes were, or where oneMKL runs, the codes viewed so."""
    seen = []

    def fake(a, b, *rest):
        seen.append((a.dtype, a.shape, a.flags.c_contiguous, b.dtype, len(rest)))
        return a

    kernel = dequantize._dequantized_operands(fake, [[(1, 0)], []])
    q = np.zeros((4, 3), ml_dtypes.float8_e4m3fn)
    scale = np.asarray(np.float32(1.0))
    dequantized = np.zeros((4, 3), np.float32)
    kernel(q, q, scale, scale, dt.float32, None, False, dequantized, None)
    mkl = float8.lowp_gemm.GemmChoice("float8", True, "forced for the test")
    monkeypatch.setitem(float8.lowp_gemm._chosen, float8.lowp_gemm.key("float8"), mkl)
    kernel(q, q, scale, scale, dt.float32, None, False, dequantized, None)
    # a small operand is laid out C-contiguous, as the lookup's np.take lays it out; the codes stay a view
    assert seen == [(np.float32, (3, 4), True, q.dtype, 5), (q.dtype, (3, 4), False, q.dtype, 5)]


@pytest.mark.parametrize("target", [dt.float8_e4m3fn, dt.float8_e5m2], ids=lambda d: d.name)
@pytest.mark.parametrize("source", [np.float16, ml_dtypes.bfloat16, np.float32], ids=["f16", "bf16", "f32"])
def test_the_dequantized_operand_is_what_the_gemm_would_look_up_for_every_16_bit_value(target, source):
    """Every float16 / bfloat16 value (and those values as float32), scaled so that they span the format's
    normals, subnormals, saturation, zeros, infinities and NaN: the codes and scales are the plain cast's, and
    the float32 operand is scaled_float32's of those codes, bit for bit."""
    wide = np.float16 if source is np.float32 else source
    values = np.arange(1 << 16, dtype=np.uint16).view(wide).astype(source).reshape(64, -1)
    finite = values[np.isfinite(values.astype(np.float32))][: 1 << 14].reshape(16, -1)
    for x in (values, finite, finite * np.asarray(1e-3, source)):
        for rowwise in (False, True):
            for pow2 in (False, True):
                q, scale, inv, amax, dequantized = float8.quantize_current_dequantized(x, target, 1e-12, rowwise, pow2)
                plain = float8.quantize_float8_current(x, target, 1e-12, rowwise, pow2)
                assert q.view(np.uint8).tobytes() == plain[0].view(np.uint8).tobytes()
                for got, expected in zip((scale, inv, amax), plain[1:]):
                    assert got.shape == expected.shape and got.tobytes() == expected.tobytes()
                with np.errstate(over="ignore", invalid="ignore"):
                    want = float8.scaled_float32(q, inv)
                assert dequantized.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
