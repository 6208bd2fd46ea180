"""The cpu backend's float32 -> bfloat16 rounding gives ml_dtypes' bits: every bfloat16 value, a structured
float32 sample (every exponent; ties, their neighbours, carries into the exponent and to inf; NaN payloads),
every memory layout.  All 2**32 float32 inputs: ``benchmarks/check_bfloat16_exhaustive.py``."""

import ml_dtypes
import numpy as np
import pytest

import ampcore
from ampcore_cpu import bf16conv

BF16 = np.dtype(ml_dtypes.bfloat16)
needs_numba = pytest.mark.skipif(
    bf16conv.engine() != "numba",
    reason="the cpu backend is on its NumPy fallback path (no numba, or AMPCORE_CPU_NO_NUMBA=1): it "
    "rounds to bfloat16 with "
    "ml_dtypes' own astype, so there is no second implementation to check",
)


def _structured_float32_bits() -> np.ndarray:
    """For every float32 exponent, mantissas around each rounding decision of the 16 dropped bits."""
    low = np.array([0, 1, 2, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xFFFE, 0xFFFF], np.uint32)
    kept = np.array([0, 1, 2, 0x2A, 0x55, 0x7E, 0x7F], np.uint32) << np.uint32(16)  # even and odd last bits
    mantissas = (low[:, None] | kept[None, :]).reshape(-1)
    exponents = np.arange(256, dtype=np.uint32) << np.uint32(23)
    bits = (exponents[:, None] | mantissas[None, :]).reshape(-1)
    nans = np.array(
        [0x7F800001, 0x7F80FFFF, 0x7F810000, 0x7FA00000, 0x7FC00000, 0x7FC00001, 0x7FFFFFFF, 0x7FBFFFFF, 0x7FFF8000],
        np.uint32,
    )
    rng = np.random.default_rng(7)
    bits = np.concatenate([bits, nans, rng.integers(0, 1 << 32, 200_000, dtype=np.uint32)])
    return np.concatenate([bits, bits | np.uint32(0x80000000)])


def _check(x: np.ndarray) -> None:
    with np.errstate(invalid="ignore"):  # ml_dtypes warns on NaN inputs
        expected = x.astype(BF16).view(np.uint16)
    got = bf16conv.to_bfloat16(x).view(np.uint16)
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, [
        f"0x{w:08x}: 0x{g:04x} != 0x{e:04x}"
        for w, g, e in zip(x.view(np.uint32)[bad[:5]], got[bad[:5]], expected[bad[:5]])
    ]


@needs_numba
def test_float32_to_bfloat16_matches_ml_dtypes_bit_for_bit_on_a_structured_sample():
    _check(_structured_float32_bits().view(np.float32))


@needs_numba
def test_every_bfloat16_value_round_trips_as_ml_dtypes():
    _check(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(BF16).astype(np.float32))


@needs_numba
def test_layouts_and_small_arrays():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((70, 90)).astype(np.float32)
    for a in (x, x.T, x[::2, 1::3], np.asfortranarray(x), x[:3, :4]):
        got = bf16conv.to_bfloat16(a)
        assert got.dtype == BF16 and got.shape == a.shape
        assert np.array_equal(got.view(np.uint16), a.astype(BF16).view(np.uint16))


def test_the_backend_casts_and_rounds_through_it():
    """cast and every low-precision kernel's output rounding go through bf16conv (ml_dtypes' bits either way)."""
    k = ampcore.get_backend("cpu").kernels
    x = np.random.default_rng(5).standard_normal((64, 64)).astype(np.float32)
    assert np.array_equal(k.cast(x, ampcore.bfloat16).view(np.uint16), x.astype(BF16).view(np.uint16))
    a = x.astype(BF16)
    want = np.matmul(a.astype(np.float32), a.astype(np.float32)).astype(BF16)
    assert np.array_equal(k.matmul(a, a).view(np.uint16), want.view(np.uint16))


def test_without_numba_the_rounding_is_ml_dtypes_astype(monkeypatch):
    """On the NumPy fallback path (no numba, or AMPCORE_CPU_NO_NUMBA=1):
    to_bfloat16 falls back to ml_dtypes' astype, a new array."""
    monkeypatch.setattr(bf16conv, "_engine", lambda: None)
    x = np.random.default_rng(2).standard_normal((40, 50)).astype(np.float32)
    assert bf16conv.engine() == "ml_dtypes"
    got = bf16conv.to_bfloat16(x)
    assert got.dtype == BF16 and np.array_equal(got.view(np.uint16), x.astype(BF16).view(np.uint16))
