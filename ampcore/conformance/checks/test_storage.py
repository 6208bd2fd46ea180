"""Storage honesty: a dtype the backend claims to store round-trips bit-exactly and takes its itemsize on
the device (2 bytes per float16/bfloat16 element, not a float32 in disguise)."""

from __future__ import annotations

import numpy as np
import pytest

from ampcore import dtypes as dt

ALL = [d.name for d in dt.ALL_DTYPES]


def _every_value(dtype: dt.DType) -> np.ndarray:
    """Values exactly representable in ``dtype`` covering its range: every float16/bfloat16 bit pattern,
    extremes and specials for the others."""
    if dtype in dt.LOW_PRECISION_DTYPES:
        return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype.numpy)
    if dtype.is_floating_point:
        info = np.finfo(dtype.numpy)
        return np.array(
            [
                0.0,
                -0.0,
                1.0,
                -1.0,
                info.max,
                -info.max,
                info.tiny,
                info.smallest_subnormal,
                np.inf,
                -np.inf,
                np.nan,
                np.pi,
            ],
            dtype=dtype.numpy,
        )
    if dtype is dt.bool_:
        return np.array([True, False, True])
    iinfo = np.iinfo(dtype.numpy)
    return np.array([0, 1, -1, iinfo.min, iinfo.max, 12345], dtype=dtype.numpy)


@pytest.mark.conformance(op="round trip")
@pytest.mark.parametrize("dtype", ALL)
def test_storable_dtype_round_trips_bit_exactly(backend, dtype):
    backend.require_storage(dtype)
    d = dt.as_dtype(dtype)
    values = _every_value(d)
    back = backend.get(backend.put(values, d))
    assert back.dtype == d.numpy, f"to_numpy gave {back.dtype} for a {d.name} array"
    assert back.tobytes() == values.tobytes(), f"{d.name} values changed on the round trip through the device"


@pytest.mark.conformance(op="bytes per element")
@pytest.mark.parametrize("dtype", ALL)
def test_device_bytes_are_the_itemsize(backend, dtype):
    backend.require_storage(dtype)
    d = dt.as_dtype(dtype)
    x = backend.put(np.zeros((128, 33)), d)
    assert backend.backend.nbytes(x) == 128 * 33 * d.itemsize, (
        f"a {d.name} array of 4224 elements occupies {backend.backend.nbytes(x)} bytes, not {4224 * d.itemsize}"
    )
    t = backend.tensor(np.zeros((7, 5)), d)
    assert t.nbytes == 35 * d.itemsize and t.dtype is d
