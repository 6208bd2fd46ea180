import ml_dtypes
import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt


def test_every_dtype_round_trips_through_its_name_and_numpy_dtype():
    for d in dt.ALL_DTYPES:
        assert dt.as_dtype(d.name) is d
        assert dt.as_dtype(d.numpy) is d


def test_bfloat16_is_ml_dtypes_bfloat16_of_two_bytes():
    assert dt.bfloat16.numpy == np.dtype(ml_dtypes.bfloat16)
    assert dt.bfloat16.itemsize == 2 and dt.float16.itemsize == 2


@pytest.mark.parametrize("a,b,expected", [
    (dt.float16, dt.bfloat16, dt.float32),
    (dt.float16, dt.float32, dt.float32),
    (dt.bfloat16, dt.float64, dt.float64),
    (dt.int64, dt.float16, dt.float16),
    (dt.bool_, dt.int32, dt.int32),
    (dt.int32, dt.int64, dt.int64),
])
def test_promotion_table_matches_torch(a, b, expected):
    assert dt.promote_types(a, b) is expected
    assert dt.promote_types(b, a) is expected


def test_finfo_limits():
    assert dt.finfo("float16").max == 65504.0
    assert dt.finfo(dt.float16).eps == 2.0 ** -10
    assert dt.finfo(dt.bfloat16).eps == 2.0 ** -7
    assert dt.finfo(dt.bfloat16).max == pytest.approx(3.3895e38, rel=1e-4)
    with pytest.raises(TypeError, match="int64"):
        dt.finfo(dt.int64)


def test_unknown_dtype_name_lists_known_ones():
    with pytest.raises(ValueError, match=r"unknown dtype 'float8'.*'bfloat16'"):
        dt.as_dtype("float8")
    with pytest.raises(ValueError, match="complex128"):
        dt.as_dtype(np.complex128)


def test_dtypes_are_exported_at_top_level():
    assert ampcore.bfloat16 is dt.bfloat16 and ampcore.float16 is dt.float16
