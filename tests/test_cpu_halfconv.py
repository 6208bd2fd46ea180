"""The cpu backend's float16 <-> float32 conversion gives NumPy's bits: every float16 value, a structured
float32 sample (every exponent; ties, their neighbours; subnormals; the overflow boundary; inf; NaN
payloads), every memory layout.  All 2**32 float32 inputs: ``benchmarks/check_float16_exhaustive.py``."""

import numpy as np
import pytest

from ampcore_cpu import halfconv

needs_numba = pytest.mark.skipif(
    halfconv.engine() != "numba",
    reason="the cpu backend is on its NumPy fallback path (no numba, or AMPCORE_CPU_NO_NUMBA=1): it "
    "converts float16 with NumPy's "
    "own astype, so there is no second implementation to check",
)


def _structured_float32_bits() -> np.ndarray:
    """For every float32 exponent, mantissas around each rounding decision of the 13 dropped bits."""
    low = np.array([0, 1, 2, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x2001, 0x3000, 0x3FFF], np.uint32)
    kept = np.array([0, 1, 2, 0x155, 0x2AA, 0x3FE, 0x3FF], np.uint32) << np.uint32(13)  # even and odd last bits
    mantissas = (low[:, None] | kept[None, :]).reshape(-1)
    exponents = np.arange(256, dtype=np.uint32) << np.uint32(23)
    bits = (exponents[:, None] | mantissas[None, :]).reshape(-1)
    nans = np.array(
        [0x7F800001, 0x7F801FFF, 0x7F802000, 0x7FA00000, 0x7FC00000, 0x7FC00001, 0x7FFFFFFF, 0x7FBFFFFF], np.uint32
    )
    boundary = np.array(
        [
            0x477FE000,
            0x477FEFFF,
            0x477FF000,
            0x477FF001,
            0x477FFFFF,
            0x47800000,  # 65504..65536
            0x387FFFFF,
            0x38800000,
            0x33000000,
            0x33000001,
            0x32FFFFFF,
            0x337FFFFF,
            0x33800000,
            0x00000001,
            0x007FFFFF,
        ],
        np.uint32,
    )  # around the smallest normal/subnormal halves
    rng = np.random.default_rng(7)
    bits = np.concatenate([bits, nans, boundary, rng.integers(0, 1 << 32, 200_000, dtype=np.uint32)])
    return np.concatenate([bits, bits | np.uint32(0x80000000)])


@needs_numba
def test_float32_to_float16_matches_numpy_bit_for_bit_on_a_structured_sample():
    x = _structured_float32_bits().view(np.float32)
    with np.errstate(all="ignore"):
        expected = x.astype(np.float16).view(np.uint16)
    got = halfconv.to_float16(x).view(np.uint16)
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, [
        f"0x{w:08x}: 0x{g:04x} != 0x{e:04x}"
        for w, g, e in zip(x.view(np.uint32)[bad[:5]], got[bad[:5]], expected[bad[:5]])
    ]


@needs_numba
def test_every_float16_widens_to_numpys_float32_and_rounds_back_to_itself():
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    wide = halfconv.to_float32(h)
    assert np.array_equal(wide.view(np.uint32), h.astype(np.float32).view(np.uint32))  # NaN payloads too
    assert np.array_equal(halfconv.to_float16(wide).view(np.uint16), h.view(np.uint16))


@needs_numba
@pytest.mark.parametrize("layout", ["c", "fortran", "strided", "small", "empty", "0-d"])
def test_conversion_keeps_shape_and_memory_order_and_returns_a_new_array(layout):
    base = np.random.default_rng(1).standard_normal((64, 48)).astype(np.float32) * 1e3
    x = {
        "c": base,
        "fortran": np.asfortranarray(base),
        "strided": base[::2, ::3],
        "small": base[:3, :5],
        "empty": base[:0],
        "0-d": base[0, 0].reshape(()),
    }[layout]
    down = halfconv.to_float16(x)
    assert down.shape == x.shape and down.dtype == np.float16 and not np.shares_memory(down, x)
    assert np.array_equal(down.view(np.uint16), x.astype(np.float16).view(np.uint16))
    assert down.flags.f_contiguous == x.astype(np.float16).flags.f_contiguous
    up = halfconv.to_float32(down)
    assert up.dtype == np.float32 and np.array_equal(up, down.astype(np.float32))


@pytest.mark.parametrize("size", [1, halfconv.SMALL_DOWN - 1, halfconv.SMALL_DOWN, 640])
def test_small_arrays_of_subnormal_results_round_to_numpys_bits(size):
    """Scaled float16 AMP gradients are often this small: below float16's normal range, where NumPy's own cast is
    slow (the compiled loop takes them from SMALL_DOWN elements), and where its rounding has the most cases."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(size) * 2.0**-17).astype(np.float32)
    x[::7] *= 2.0**-9  # some below half the smallest subnormal: they round to zero
    got = halfconv.to_float16(x)
    assert np.array_equal(got.view(np.uint16), x.astype(np.float16).view(np.uint16))


def test_without_numba_the_conversions_are_numpys_astype(monkeypatch):
    """On the NumPy fallback path (no numba, or AMPCORE_CPU_NO_NUMBA=1):
    both directions fall back to astype, new arrays of the right dtype."""
    monkeypatch.setattr(halfconv, "_engine", lambda: None)
    x = np.random.default_rng(2).standard_normal((40, 50)).astype(np.float32)
    assert halfconv.engine() == "numpy"
    down = halfconv.to_float16(x)
    assert down.dtype == np.float16 and np.array_equal(down.view(np.uint16), x.astype(np.float16).view(np.uint16))
    assert halfconv.to_float32(down).dtype == np.float32 and not np.shares_memory(halfconv.to_float32(down), down)
