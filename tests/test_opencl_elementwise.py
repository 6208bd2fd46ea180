"""The opencl backend's elementwise kernels beyond what the conformance suite sees: no recompiles for new
scalars, big arrays, deep broadcasting, scalars on the left, integer wrap-around, single rounding of
int64 -> bfloat16, the counter-based generator, and the native-half path where a device has it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyopencl")

from opencl_devices import device, get, put
from opencl_devices import state as _state

from ampcore import dtypes as dt
from ampcore import expr
from ampcore.conformance.references import round_to, to_f64

pytestmark = pytest.mark.usefixtures("opencl_device")  # every test on every OpenCL device


@pytest.fixture(scope="module")
def k():
    from ampcore_opencl import elementwise

    programs = {name: elementwise.elementwise(expr.get(name)) for name in expr.names()}
    return {**programs, **elementwise.kernels()}


def test_changed_scalar_does_not_recompile(k):
    x = put(np.arange(10.0), "float16")
    for s in (1.5, 2.5):  # first round compiles every variant
        k["add"](x, s), k["sub"](s, x), k["lt"](x, s), k["where"](k["gt"](x, 3.0), s, x)
    before = len(_state()._kernels)
    for s in (-7.0, 0.125, 3e4):
        out = k["sub"](s, x)
        k["add"](x, s), k["lt"](x, s), k["where"](k["gt"](x, 3.0), s, x)
    assert len(_state()._kernels) == before, "a new scalar value compiled a new kernel"
    assert get(out).tolist() == (np.float16(3e4) - np.arange(10.0, dtype=np.float16)).tolist()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_three_million_elements_match_numpy(k, dtype):
    rng = np.random.default_rng(0)
    n = 3_000_001  # not a multiple of any work-group size
    a, b = round_to(rng.uniform(-4, 4, n), dtype), round_to(rng.uniform(0.5, 4, n), dtype)
    da, db = put(a, dtype), put(b, dtype)
    fa, fb = to_f64(a), to_f64(b)
    for name, ref in [("add", fa + fb), ("mul", fa * fb), ("div", fa / fb)]:  # correctly rounded: bit-exact
        got = get(k[name](da, db))
        assert np.array_equal(got.view(np.uint8), round_to(ref, dtype).view(np.uint8)), name
    got = to_f64(get(k["exp"](da)))
    assert np.allclose(got, np.exp(fa), rtol=8 * dt.finfo(dtype).eps, atol=0)
    cast = get(k["cast"](da, dt.float64))
    assert np.array_equal(cast, fa)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_broadcasting_of_six_axes(k, dtype):
    rng = np.random.default_rng(1)
    sa, sb = (2, 1, 3, 1, 5, 4), (1, 4, 1, 6, 5, 1)
    a, b = rng.integers(-9, 9, sa).astype(dtype), rng.integers(-9, 9, sb).astype(dtype)
    da, db = put(a, dtype), put(b, dtype)
    assert np.array_equal(get(k["add"](da, db)), a + b)
    assert np.array_equal(get(k["mul"](db, da)), b * a)
    assert np.array_equal(get(k["maximum"](da, db)), np.maximum(a, b))
    assert np.array_equal(get(k["le"](da, db)), a <= b)
    cond = rng.random((6, 1, 1)) < 0.5
    assert np.array_equal(get(k["where"](put(cond, "bool"), da, db)), np.where(cond, a, b))


@pytest.mark.parametrize("sa,sb", [((2, 3, 4, 64), (3, 1, 64)), ((5, 1, 7, 33), (1, 6, 7, 1)), ((300, 1), (1, 3))])
def test_strided_layouts_match_numpy(k, sa, sb):
    """Exact tiling with four collapsed axes, bounds-checked tiling with odd axes, and small inner axes."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    assert np.array_equal(get(k["sub"](put(a, "float32"), put(b, "float32"))), a - b)
    assert np.array_equal(get(k["sub"](put(b, "float32"), put(a, "float32"))), b - a)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_scalar_on_the_left(k, dtype):
    x = np.array([[0.5, 1.0, 2.0], [3.0, 4.0, -1.0]])
    d = put(x, dtype)
    v = to_f64(get(put(x, dtype)))
    assert np.array_equal(to_f64(get(k["sub"](10.0, d))), to_f64(round_to(10.0 - v, dtype)))
    assert np.array_equal(to_f64(get(k["div"](3.0, d))), to_f64(round_to(3.0 / v, dtype)))
    assert np.allclose(to_f64(get(k["pow"](2.0, d))), 2.0**v, rtol=4 * dt.finfo(dtype).eps)
    assert np.array_equal(get(k["lt"](1.0, d)), 1.0 < v)
    assert np.array_equal(get(k["ge"](2.0, d)), 2.0 >= v)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_python_number_meets_16_bit_values_in_float32(k, dtype):
    """``x * (1 / 0.9)`` (dropout's scale) computes with the number in float32 and rounds once, as torch's opmath,
    the cpu and cuda backends and a captured step's fused chain do: not with the number rounded to 16 bits
    first (it was, and on a device with native half arithmetic the half path rounded it too)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(4096) * 3).astype(np.float32)
    d = put(x, dtype)
    v = to_f64(get(d)).astype(np.float32)
    for name, op in (("mul", np.multiply), ("add", np.add), ("sub", np.subtract), ("div", np.divide)):
        want = to_f64(round_to(op(v, np.float32(1.0 / 0.9)).astype(np.float64), dtype))
        assert np.array_equal(to_f64(get(k[name](d, 1.0 / 0.9))), want), name


def test_integers_wrap_like_numpy(k):
    big = np.array([2**31 - 1, -(2**31), 7, -3], dtype=np.int32)
    d = put(big, "int32")
    with np.errstate(over="ignore"):
        assert np.array_equal(get(k["add"](d, 1)), big + np.int32(1))
        assert np.array_equal(get(k["mul"](d, 3)), big * np.int32(3))
        assert np.array_equal(get(k["neg"](d)), -big)
        assert np.array_equal(get(k["abs"](d)), np.abs(big))
    assert np.array_equal(get(k["sign"](d)), np.sign(big))
    base = np.array([3, -2, 0, 1, -1, 5], dtype=np.int64)
    assert np.array_equal(get(k["pow"](put(base, "int64"), 3)), base**3)
    assert np.array_equal(get(k["pow"](put(base, "int64"), 0)), base**0)
    # NumPy refuses negative integer powers; the kernel gives the truncated 1 / a**3, as torch does.
    assert get(k["pow"](put(base, "int64"), -3)).tolist() == [0, 0, 0, 1, -1, 0]


def test_int64_to_bfloat16_rounds_once(k):
    # 2**31 + 2**23 + 1 is just above a bfloat16 midpoint: through float32 it lands on the midpoint and
    # rounds to even (down); rounded once it goes up.
    x = np.array([2**31 + 2**23 + 1, -(2**31 + 2**23 + 1), 2**40 + 2**32 + 2**31, 3, -(2**62) - 1], dtype=np.int64)
    got = get(k["cast"](put(x, "int64"), dt.bfloat16))
    assert np.array_equal(got.view(np.uint16), round_to(x.astype(np.float64), "bfloat16").view(np.uint16))
    got16 = get(k["cast"](put(x[:4], "int64"), dt.float16))
    assert np.array_equal(got16.view(np.uint16), round_to(x[:4].astype(np.float64), "float16").view(np.uint16))


def test_arange_of_int64_beyond_2_to_53_is_exact(k, opencl_device):
    start = 2**60 + 1
    got = get(k["arange"](start, start + 7, 3, dt.int64, opencl_device))
    assert got.tolist() == [start, start + 3, start + 6]


def test_random_is_counter_based(k, opencl_device):
    """Element i depends only on (seed, i): the same seed gives the same leading numbers for any shape."""
    for name in ("uniform", "normal"):
        long = get(k[name]((1000,), dt.float32, 7, opencl_device))
        short = get(k[name]((4, 5), dt.float32, 7, opencl_device))
        assert np.array_equal(long[:20], short.reshape(-1)), name
        assert not np.array_equal(long, get(k[name]((1000,), dt.float32, 8, opencl_device))), name


def test_zero_size_and_zero_dim(k):
    empty = put(np.zeros((0, 3)), "float32")
    assert get(k["add"](empty, put(np.ones(3), "float32"))).shape == (0, 3)
    assert get(k["cast"](empty, dt.float16)).shape == (0, 3)
    scalar = put(np.float32(2.0), "float32")
    assert get(k["mul"](scalar, put(np.ones((2, 2)), "float32"))).tolist() == [[2.0, 2.0], [2.0, 2.0]]
    assert get(k["sqrt"](scalar)).shape == ()


def test_native_half_arithmetic_is_correctly_rounded(k):
    state = _state()
    if not state.half.native:
        pytest.skip(f"{device()} has no native half arithmetic ({state.half.detail})")
    rng = np.random.default_rng(2)
    a = rng.standard_normal(4099).astype(np.float16)
    b = (rng.standard_normal(4099) + 3).astype(np.float16)
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    da, db = put(a, "float16"), put(b, "float16")
    for name, ref in [
        ("add", fa + fb),
        ("sub", fa - fb),
        ("mul", fa * fb),
        ("div", fa / fb),
        ("maximum", np.maximum(fa, fb)),
        ("minimum", np.minimum(fa, fb)),
    ]:
        assert np.array_equal(get(k[name](da, db)).view(np.uint16), round_to(ref, "float16").view(np.uint16)), name
    assert any(key[-1] == "half" for key, _ in state._kernels if isinstance(key, tuple)), "half path not taken"
