"""Hypothesis fuzzing of the CPU backend's ops against a float64 NumPy reference.

Random shapes (zero-size axes, size-1 and 0-d broadcasting), dtypes (float64/float32/float16/bfloat16) and
values (inf, NaN, signed zeros, subnormals, the largest finite value) go through elementwise unary/binary ops,
sum/max/cumsum, matmul, softmax/log_softmax and where.  Each result must match the reference evaluated on the
inputs as stored, rounded once to the dtype, within ``assert_close`` (the same inf/NaN pattern included); the
only errors allowed are the documented ValueError/TypeError for bad shapes, with a message naming them.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ampcore
from ampcore import dtypes as dt
from ampcore import ops
from ampcore.conformance import op_reference as opref
from ampcore.conformance.references import BINARY_REFERENCE, UNARY_REFERENCE, round_to, subnormals, to_f64
from ampcore.conformance.tolerance import assert_close, assert_same_nonfinite
from ampcore.nn import functional as F

DTYPES = ("float64", "float32", "float16", "bfloat16")
EXAMPLES = {"unary": 120, "binary": 150, "reduce": 120, "matmul": 80, "softmax": 80, "where": 60, "bad": 60}
UNARY = sorted(UNARY_REFERENCE)
BINARY = sorted(BINARY_REFERENCE)


def ERR() -> np.errstate:  # noqa: N802 - reads as the constant it stands for: `with ERR():`
    return np.errstate(all="ignore")


def special_values(dtype: str) -> list[float]:
    f = dt.finfo(dtype)
    sub = subnormals(dtype, 4)
    return [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        f.max,
        -f.max,
        f.tiny,
        -f.tiny,
        float(sub[0]),
        -float(sub[-1]),
        1.0,
        -1.0,
        0.5,
    ]


@st.composite
def arrays(draw, dtype: str, shape: tuple[int, ...], specials: bool = True) -> np.ndarray:
    """Values of ``dtype`` (as a NumPy array of it): random normals with special values mixed in."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * rng.choice([1.0, 8.0, 1000.0])
    if specials and x.size and draw(st.booleans()):
        sp = np.array(special_values(dtype))
        mask = rng.random(shape) < draw(st.sampled_from([0.1, 0.5, 1.0]))
        x = np.where(mask, rng.choice(sp, size=shape), x)
    return round_to(x, dtype)


def as_tensor(a: np.ndarray) -> ampcore.Tensor:
    return ampcore.tensor(a, device="cpu")


def expected(ref64: np.ndarray, dtype: str) -> np.ndarray:
    return to_f64(round_to(np.asarray(ref64, np.float64), dtype))


def assert_raises_naming(call, error, names) -> None:
    """``call()`` raises ``error`` whose message contains every string in ``names`` (the bad values)."""
    with pytest.raises(error) as info:
        call()
    for name in names:
        assert name in str(info.value), str(info.value)


def check(
    out: ampcore.Tensor, ref64: np.ndarray, dtype: str, n: int = 1, *, scale: float = 1.0, what: str = ""
) -> None:
    assert out.dtype == dt.as_dtype(dtype), what
    exp = expected(ref64, dtype)
    assert out.shape == exp.shape, what
    with ERR():  # assert_close's allowed error can overflow to inf next to float64's largest values
        assert_close(to_f64(out.numpy()), exp, dtype, n, scale=scale, what=what)


# --------------------------------------------------------------------------- elementwise
@settings(max_examples=EXAMPLES["unary"], deadline=None, derandomize=True)
@given(
    st.sampled_from(UNARY),
    st.sampled_from(DTYPES),
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    st.data(),
)
def test_unary_ops_match_float64_reference_on_any_values(name, dtype, shape, data):
    x = data.draw(arrays(dtype, shape))
    out = ops.unary(name, as_tensor(x))
    with ERR():
        ref = UNARY_REFERENCE[name](to_f64(x))
    check(out, ref, dtype, what=f"{name}({dtype}{shape})")


@settings(max_examples=EXAMPLES["binary"], deadline=None, derandomize=True)
@given(
    st.sampled_from(BINARY),
    st.sampled_from(DTYPES),
    hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=3),
    st.data(),
)
def test_binary_ops_broadcast_and_match_float64_reference(name, dtype, shapes, data):
    a = data.draw(arrays(dtype, shapes.input_shapes[0]))
    b = data.draw(arrays(dtype, shapes.input_shapes[1]))
    out = ops.binary(name, as_tensor(a), as_tensor(b))
    with ERR():
        ref = BINARY_REFERENCE[name](to_f64(a), to_f64(b))
    assert out.shape == shapes.result_shape
    check(out, ref, dtype, what=f"{name}({dtype} {shapes.input_shapes})")


# --------------------------------------------------------------------------- reductions
def _accumulator_max(dtype: str) -> float:
    return float(dt.finfo("float64" if dtype == "float64" else "float32").max)


@settings(max_examples=EXAMPLES["reduce"], deadline=None, derandomize=True)
@given(
    st.sampled_from(["sum", "cumsum", "max"]),
    st.sampled_from(DTYPES),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5),
    st.data(),
)
def test_reductions_match_float64_reference(kind, dtype, shape, data):
    x = data.draw(arrays(dtype, shape))
    x64 = to_f64(x)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdim = data.draw(st.booleans())
    t = as_tensor(x)
    what = f"{kind}({dtype}{shape}, dim={axis})"
    if kind == "max":
        if shape[axis] == 0:
            with pytest.raises(ValueError, match="empty dimension"):
                t.max(axis, keepdim)
            return
        res = t.max(axis, keepdim)
        values = res[0] if isinstance(res, tuple) else res.values
        with ERR():
            ref = np.max(x64, axis=axis, keepdims=keepdim)  # propagates NaN, as torch
        check(values, ref, dtype, what=what)
        return
    finite = np.where(np.isfinite(x64), x64, 0.0)
    # Partial sums beyond the accumulator's range overflow there first (IEEE), which float64 does not show.
    with ERR():
        assume(np.abs(finite).sum(initial=0.0) < _accumulator_max(dtype) / 2)
    with ERR():
        if kind == "sum":
            out, ref = t.sum(axis, keepdim), np.sum(x64, axis=axis, keepdims=keepdim)
        else:
            out, ref = t.cumsum(axis), np.cumsum(x64, axis=axis)
    n = shape[axis]
    check(out, ref, dtype, n, scale=float(np.abs(finite).max(initial=1.0)), what=what)


# --------------------------------------------------------------------------- matmul
@st.composite
def matmul_shapes(draw):
    m, k, n = (draw(st.integers(0, 4)) for _ in range(3))
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, min_side=0, max_side=3))
    ba, bb = batch.input_shapes
    a_shape = (k,) if draw(st.integers(0, 4)) == 0 else ba + (m, k)
    b_shape = (k,) if draw(st.integers(0, 4)) == 0 else bb + (k, n)
    return a_shape, b_shape


@settings(max_examples=EXAMPLES["matmul"], deadline=None, derandomize=True)
@given(st.sampled_from(DTYPES), matmul_shapes(), st.booleans(), st.data())
def test_matmul_broadcasts_batches_and_matches_float64_reference(dtype, shapes, specials, data):
    a = data.draw(arrays(dtype, shapes[0], specials))
    b = data.draw(arrays(dtype, shapes[1], specials))
    a64, b64 = to_f64(a), to_f64(b)
    k = shapes[0][-1]
    # a product or a partial sum beyond the accumulator's range overflows there first; keep to the exact check
    largest_a = float(np.where(np.isfinite(a64), np.abs(a64), 0).max(initial=0.0))
    largest_b = float(np.where(np.isfinite(b64), np.abs(b64), 0).max(initial=0.0))
    with ERR():
        assume(largest_a * largest_b * max(k, 1) < _accumulator_max(dtype) / 2)
    out = ampcore.matmul(as_tensor(a), as_tensor(b))
    with ERR():
        ref = np.matmul(a64, b64)
    scale = max(largest_a, 1.0) * max(largest_b, 1.0)
    check(out, ref, dtype, k, scale=scale, what=f"matmul({dtype} {shapes})")


# --------------------------------------------------------------------------- softmax / log_softmax
@settings(max_examples=EXAMPLES["softmax"], deadline=None, derandomize=True)
@given(
    st.sampled_from(["softmax", "log_softmax"]),
    st.sampled_from(DTYPES),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5),
    st.data(),
)
def test_softmax_and_log_softmax_match_float64_reference(name, dtype, shape, data):
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    assume(shape[axis] > 0)  # an empty softmax axis: see the test below
    out = getattr(F, name)(as_tensor(x), dim=axis)
    x64 = to_f64(x)
    with ERR():
        ref = getattr(opref, name)(x64, axis % len(shape))
    # torch's non-finite rule (x - max first): a row holding NaN or +inf, or only -inf, is NaN throughout.
    # (op_reference.log_softmax keeps -inf beside a +inf; softmax and torch give NaN there.)
    nan_row = (np.isnan(x64) | np.isposinf(x64)).any(axis, keepdims=True) | np.isneginf(x64).all(axis, keepdims=True)
    ref = np.where(nan_row, np.nan, ref)
    check(out, ref, dtype, shape[axis], what=f"{name}({dtype}{shape}, dim={axis})")


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", [((0,), 0), ((2, 0), 1), ((0, 3), 0)])
def test_softmax_over_an_empty_dim_returns_an_empty_tensor(name, shape, dim):
    x = ampcore.zeros(*shape, requires_grad=True)
    out = getattr(F, name)(x, dim=dim)
    assert out.shape == shape and out.dtype == ampcore.float32
    out.sum().backward()
    assert x.grad.shape == shape


# --------------------------------------------------------------------------- where
@settings(max_examples=EXAMPLES["where"], deadline=None, derandomize=True)
@given(
    st.sampled_from(DTYPES),
    hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=0, max_side=3),
    st.data(),
)
def test_where_selects_exactly_with_three_way_broadcasting(dtype, shapes, data):
    sc, sa, sb = shapes.input_shapes
    cond = data.draw(hnp.arrays(np.bool_, sc))
    a, b = data.draw(arrays(dtype, sa)), data.draw(arrays(dtype, sb))
    out = ampcore.where(ampcore.tensor(cond), as_tensor(a), as_tensor(b))
    ref = np.where(cond, to_f64(a), to_f64(b))
    assert out.shape == shapes.result_shape
    got = to_f64(out.numpy())
    assert_same_nonfinite(got, ref)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))  # bit-exact: even the sign of zero
    np.testing.assert_array_equal(np.nan_to_num(got), np.nan_to_num(ref))


# --------------------------------------------------------------------------- documented errors for bad shapes
def _incompatible(draw_shape_a: tuple[int, ...], draw_shape_b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(draw_shape_a, draw_shape_b)
        return False
    except ValueError:
        return True


@settings(max_examples=EXAMPLES["bad"], deadline=None, derandomize=True)
@given(
    st.sampled_from(["add", "mul", "where", "matmul"]),
    st.sampled_from(DTYPES),
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
)
def test_bad_shapes_raise_value_error_naming_them(name, dtype, sa, sb):
    a, b = as_tensor(np.zeros(sa, dt.as_dtype(dtype).numpy)), as_tensor(np.zeros(sb, dt.as_dtype(dtype).numpy))
    if name == "matmul":
        a2 = (1,) + sa if len(sa) == 1 else sa
        b2 = sb + (1,) if len(sb) == 1 else sb
        bad = len(sa) == 0 or len(sb) == 0 or a2[-1] != b2[-2] or _incompatible(a2[:-2], b2[:-2])
        call = lambda: ampcore.matmul(a, b)  # noqa: E731
    else:
        bad = _incompatible(sa, sb)
        call = (
            (lambda: ampcore.where(ampcore.tensor(np.ones(sa, bool)), a, b))
            if name == "where"
            else (lambda: ops.binary(name, a, b))
        )
    assume(bad)
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert str(sa) in message and str(sb) in message, message


def test_the_fuzz_budget_is_what_the_report_counts():
    assert sum(EXAMPLES.values()) == 670
