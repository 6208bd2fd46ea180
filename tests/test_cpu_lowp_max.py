"""The compiled float16 max over one axis (ampcore_cpu.lowp_max) gives np.max's bits: the first NaN of each
fold with its payload, the first of -0.0 and +0.0, on the cnn's max-pool tap shapes and every axis position."""

from __future__ import annotations

import numpy as np
import pytest

from ampcore_cpu import compiled, lowp_max
from ampcore_cpu import kernels as K

pytestmark = pytest.mark.skipif(
    not compiled.status().enabled,
    reason="the cpu backend is on its NumPy fallback path (no numba, or AMPCORE_CPU_NO_NUMBA=1): the float16 "
    "max is NumPy's own",
)
_SPECIAL = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFD55, 0x0001, 0x8001, 0x3C00], np.uint16)


def _values(shape, seed):
    """Few distinct values (so ties are common) mixed with -0.0/+0.0, infs, NaNs of several payloads, subnormals."""
    rng = np.random.default_rng(seed)
    common = np.array([-2.0, -1.0, 0.0, 0.5, 1.0], np.float16).view(np.uint16)
    bits = rng.choice(np.concatenate([common, _SPECIAL]), size=shape).astype(np.uint16)
    return bits.view(np.float16)


@pytest.mark.parametrize(
    ("shape", "axis"),
    [((32, 4, 32, 16, 16), 1), ((32, 4, 64, 8, 8), 1), ((64, 128), 1), ((64, 128), 0), ((8, 3, 16, 40), 2)],
)
@pytest.mark.parametrize("keepdims", [False, True])
def test_float16_max_gives_numpys_bits_nans_and_signed_zeros_included(shape, axis, keepdims):
    for seed in range(3):
        x = _values(shape, seed)
        got = lowp_max.max_f16(x, (axis,), keepdims)
        assert got is not None
        want = np.max(x, axis=axis, keepdims=keepdims)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_every_float16_pair_gives_numpys_maximum():
    """Each of the 2**16 values against each special value, in both orders along the reduced axis."""
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    for s in _SPECIAL:
        for pair in ((every, np.full_like(every, s)), (np.full_like(every, s), every)):
            x = np.stack(pair, axis=0).view(np.float16)
            got = lowp_max.max_f16(x, (0,), False)
            assert got is not None
            assert np.array_equal(got.view(np.uint16), np.max(x, axis=0).view(np.uint16))


def test_other_reductions_are_left_to_numpy():
    x = np.ones((64, 128), np.float16)
    assert lowp_max.max_f16(x, (0, 1), False) is None  # two axes
    assert lowp_max.max_f16(x.T, (0,), False) is None  # not C-contiguous
    assert lowp_max.max_f16(x[:2], (0,), False) is None  # small
    assert lowp_max.max_f16(x.astype(np.float32), (0,), False) is None
    assert np.array_equal(K.reduce_max(x, (0,), False), np.max(x, axis=0))  # the kernel table's entry uses it
