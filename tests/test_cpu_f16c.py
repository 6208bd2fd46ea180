"""The F16C float16 conversions (ampcore_cpu._f16c_numba) and the integer forms they replace give NumPy's bits.

On an F16C host :mod:`ampcore_cpu.halfconv` and the compiled 16-bit arithmetic run the F16C elements, so
``tests/test_cpu_halfconv.py`` checks those; here each form is run by name, so the integer form (what a host
without F16C runs) stays checked on this one too.  All 2**32 float32 inputs: ``benchmarks/check_float16_exhaustive.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_cpu_halfconv import _structured_float32_bits

from ampcore_cpu import compiled, halfconv

pytestmark = pytest.mark.skipif(
    halfconv.engine() != "numba",
    reason="the cpu backend is on its NumPy fallback path (no numba, or AMPCORE_CPU_NO_NUMBA=1): float16 "
    "converts with NumPy's astype, there is no compiled form to check",
)


@pytest.fixture(scope="module")
def loops() -> dict[str, Any]:
    """Flat loops over each element form, by name."""
    import numba

    f16c, conv, lowp = (compiled.load(n) for n in ("_f16c_numba", "_halfconv_numba", "_lowp_numba"))
    assert f16c and conv and lowp

    def flat(element: Any) -> Any:
        """A compiled loop applying ``element`` to each item of a flat array (either direction)."""

        @numba.njit(error_model="numpy")
        def run(src: Any, out: Any) -> None:
            for i in range(src.size):
                out[i] = element(src[i])

        return run

    forms = {
        "narrow_int": flat(conv.f16_bits_int),
        "widen_int": flat(lowp.widen_f16_int),
        "round_int": flat(lowp.round_f16_int),
        # halfconv's widening without F16C: the shared gather through its table of every float16's float32 bits
        "widen_table": lambda h, out: compiled.load("_select_numba").gather(h, halfconv._table(), out),
    }
    if f16c.F16C:
        forms.update(narrow_f16c=f16c.down, widen_f16c=f16c.up, widen_f16c_value=flat(lowp.widen_f16_hw))
        forms.update(round_f16c=flat(lowp.round_f16_hw))
    return forms


def _needs(loops: dict[str, Any], name: str) -> Any:
    if name not in loops:
        pytest.skip("this host's compile target has no F16C instructions: the integer forms run")
    return loops[name]


def _sample() -> np.ndarray:
    """The structured float32 sample plus values from the benchmark models' range, laid out as their weights."""
    weights = np.random.default_rng(3).standard_normal((1024, 784)).astype(np.float32) * 0.05
    return np.concatenate([_structured_float32_bits(), weights.view(np.uint32).reshape(-1)])


@pytest.mark.parametrize("form", ["narrow_int", "narrow_f16c"])
def test_rounding_float32_to_float16_gives_numpys_bits(loops, form):
    run = _needs(loops, form)
    bits = _sample()
    with np.errstate(all="ignore"):
        expected = bits.view(np.float32).astype(np.float16).view(np.uint16)
    got = np.empty_like(expected)
    run(bits, got)
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, [f"0x{w:08x}: 0x{g:04x} != 0x{e:04x}" for w, g, e in zip(bits[bad], got[bad], expected[bad])][
        :5
    ]


@pytest.mark.parametrize("form", ["widen_int", "widen_table", "widen_f16c", "widen_f16c_value"])
def test_widening_every_float16_gives_numpys_float32_nan_payloads_included(loops, form):
    run = _needs(loops, form)
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    expected = h.view(np.float16).astype(np.float32).view(np.uint32)
    got = np.empty(h.size, np.float32)
    run(h, got.view(np.uint32) if form in ("widen_f16c", "widen_table") else got)
    bad = np.flatnonzero(got.view(np.uint32) != expected)
    assert bad.size == 0, [f"0x{i:04x}: 0x{got.view(np.uint32)[i]:08x} != 0x{expected[i]:08x}" for i in bad[:5]]


@pytest.mark.parametrize("form", ["round_int", "round_f16c"])
def test_rounding_to_float16_precision_in_float32_is_numpys_round_trip(loops, form):
    """A fused float16 chain keeps each intermediate's rounding as one float32 -> float32 step (round_f16): the
    value of NumPy's float32 -> float16 -> float32, NaN payloads (signalling ones too) and signed zeros included."""
    run = _needs(loops, form)
    nans = np.array([0x7F800001, 0xFF801FFF, 0x7F802000, 0x7FA00000, 0xFFBFFFFF, 0x7FC00000, 0xFFC01234], np.uint32)
    bits = np.concatenate([_sample(), nans])
    with np.errstate(all="ignore"):
        expected = bits.view(np.float32).astype(np.float16).astype(np.float32).view(np.uint32)
    got = np.empty(bits.size, np.float32)
    run(bits.view(np.float32), got)
    bad = np.flatnonzero(got.view(np.uint32) != expected)
    assert bad.size == 0, [
        f"0x{w:08x}: 0x{g:08x} != 0x{e:08x}" for w, g, e in zip(bits[bad], got.view(np.uint32)[bad], expected[bad])
    ][:5]


def test_signalling_nans_keep_numpys_payload_where_the_instruction_would_quiet_them(loops):
    run = _needs(loops, "narrow_f16c")
    bits = np.array([0x7F800001, 0xFF801FFF, 0x7F802000, 0x7FA00000, 0xFFBFFFFF, 0x7FC00000], np.uint32)
    got = np.empty(bits.size, np.uint16)
    run(bits, got)
    assert got.tolist() == [0x7C01, 0xFC01, 0x7C01, 0x7D00, 0xFDFF, 0x7E00]


@pytest.mark.parametrize(
    ("cpu_name", "features", "expected"),
    [("generic", "", False), ("generic", "+sse2,+f16c", True), ("skylake", "+avx2,-f16c", False)],
)
def test_a_portable_target_the_user_named_decides_whether_f16c_is_used(monkeypatch, cpu_name, features, expected):
    f16c = compiled.load("_f16c_numba")
    assert f16c is not None
    monkeypatch.setattr(f16c.numba.config, "CPU_NAME", cpu_name)
    monkeypatch.setattr(f16c.numba.config, "CPU_FEATURES", features)
    assert f16c._target_has_f16c() is expected
