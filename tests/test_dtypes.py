import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ampcore
from ampcore import dtypes as dt


def test_every_dtype_round_trips_through_its_name_and_numpy_dtype():
    for d in dt.ALL_DTYPES:
        assert dt.as_dtype(d.name) is d
        assert dt.as_dtype(d.numpy) is d


def test_bfloat16_is_ml_dtypes_bfloat16_of_two_bytes():
    assert dt.bfloat16.numpy == np.dtype(ml_dtypes.bfloat16)
    assert dt.bfloat16.itemsize == 2 and dt.float16.itemsize == 2


@pytest.mark.parametrize(
    "a,b,expected",
    [
        (dt.float16, dt.bfloat16, dt.float32),
        (dt.float16, dt.float32, dt.float32),
        (dt.bfloat16, dt.float64, dt.float64),
        (dt.int64, dt.float16, dt.float16),
        (dt.bool_, dt.int32, dt.int32),
        (dt.int32, dt.int64, dt.int64),
    ],
)
def test_promotion_table_matches_torch(a, b, expected):
    assert dt.promote_types(a, b) is expected
    assert dt.promote_types(b, a) is expected


def test_finfo_limits():
    assert dt.finfo("float16").max == 65504.0
    assert dt.finfo(dt.float16).eps == 2.0**-10
    assert dt.finfo(dt.bfloat16).eps == 2.0**-7
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


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True, width=64))
def test_convert_rounds_float64_to_bfloat16_once(v):
    """ml_dtypes goes through float32 (two roundings); convert must match one round-to-nearest-even,
    computed independently on the bit pattern."""
    from ampcore.conformance.references import round_to

    got = dt.convert(np.array([v]), dt.bfloat16)
    want = round_to(np.array([v]), dt.bfloat16)
    assert got.dtype == dt.bfloat16.numpy
    assert (np.isnan(v) and np.isnan(got.astype(np.float64)[0])) or got.view(np.uint16)[0] == want.view(np.uint16)[0]


def test_convert_fixes_the_double_rounding_case_and_keeps_other_pairs_as_numpy():
    hard = np.array([1 + 2.0**-8 + 2.0**-40, -(1 + 2.0**-8 + 2.0**-40)])
    assert list(dt.convert(hard, "bfloat16").astype(np.float64)) == [1.0078125, -1.0078125]
    assert list(hard.astype(dt.bfloat16.numpy).astype(np.float64)) == [1.0, -1.0]  # why convert exists
    x = np.random.default_rng(0).standard_normal(100)
    for d in (dt.float32, dt.float16, dt.int64):
        assert dt.convert(x, d).tobytes() == x.astype(d.numpy).tobytes()
    assert dt.convert(x, dt.float64) is not x  # always a new array


# --------------------------------------------------------------------------- torch's names
def test_torchs_dtype_aliases_are_the_dtypes_ampcore_stores():
    import ampcore

    assert ampcore.long is ampcore.int64 and ampcore.int is ampcore.int32 and ampcore.bool is ampcore.bool_
    assert ampcore.half is ampcore.float16 and ampcore.float is ampcore.float32 and ampcore.double is ampcore.float64
    assert ampcore.zeros(2, dtype=ampcore.long).dtype is ampcore.int64
    assert all(dt.as_dtype(name) is d for name, d in dt.TORCH_ALIASES.items())


@pytest.mark.parametrize(
    "name", ["cfloat", "cdouble", "complex64", "uint8", "int8", "int16", "short", "float8_e4m3fnuz"]
)
def test_a_torch_dtype_ampcore_cannot_store_raises_naming_it(name):
    import ampcore

    with pytest.raises(dt.UnsupportedDTypeError, match=f"ampcore does not support the torch dtype '{name}'; "):
        getattr(ampcore, name)
    assert not hasattr(ampcore, name) and getattr(ampcore, name, None) is None  # still an AttributeError
    with pytest.raises(ValueError, match=f"torch dtype '{name}'"):  # and a ValueError, as for any unknown name
        dt.as_dtype(name)
    with pytest.raises(AttributeError, match="module 'ampcore' has no attribute 'no_such_thing'"):
        ampcore.no_such_thing  # noqa: B018
