"""The cpu ``max`` kernel on float16 and bfloat16 reduces widened to float32 (ml_dtypes' bfloat16 loop and
NumPy's float16 one compare one element at a time): it must still give ``np.max``'s bits on the 16-bit array,
signed zeros, infinities and NaN payloads included, for whole and per-axis reductions."""

from __future__ import annotations

import numpy as np
import pytest

from ampcore import dtypes as dt
from ampcore_cpu import kernels as K

BF16 = np.dtype(dt.bfloat16.numpy)
# zeros of both signs, one, infinities, NaNs with several payloads (quiet and signalling), the smallest subnormals
_SPECIAL = {
    np.dtype(np.float16): [0x0000, 0x8000, 0x3C00, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFD55, 0x0001, 0x8001],
    BF16: [0x0000, 0x8000, 0x3F80, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFA5, 0x7FC1, 0x0001, 0x8001],
}


def _values(dtype: np.dtype, shape: tuple[int, ...], seed: int, nan: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    common = np.array([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0], np.float32).astype(dtype).view(np.uint16)
    special = np.array(_SPECIAL[dtype], np.uint16)
    if not nan:
        special = special[~np.isnan(special.view(dtype).astype(np.float32))]
    bits = rng.choice(np.concatenate([common, special]), size=shape, p=None).astype(np.uint16)
    return bits.view(dtype)


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("nan", [False, True], ids=["finite-and-inf", "with-nan"])
@pytest.mark.parametrize(
    ("shape", "axes"), [((64, 128), (0, 1)), ((64, 128), (1,)), ((64, 128), (0,)), ((4, 9, 33), (2,))]
)
def test_16bit_max_gives_numpys_bits(dtype, nan, shape, axes) -> None:
    for seed in range(4):
        x = _values(dtype, shape, seed, nan)
        for keepdims in (False, True):
            with np.errstate(invalid="ignore"):
                want = np.asarray(np.max(x, axis=axes, keepdims=keepdims))
            got = K.reduce_max(x, axes, keepdims)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), (seed, keepdims)


def test_a_float8_casts_bfloat16_amax_is_exact() -> None:
    """The widened path on ordinary data: the largest magnitude of a bfloat16 activation, exactly."""
    x = np.random.default_rng(0).standard_normal((64, 128)).astype(BF16)
    got = K.reduce_max(np.abs(x), (0, 1), False)
    assert got.dtype == BF16 and float(got) == float(np.abs(x.astype(np.float64)).max())
