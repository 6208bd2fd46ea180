"""scaled_dot_product_attention against an einsum reference."""

import math

import functional_reference as ref
import numpy as np
import pytest
from functional_reference import FLOATS, assert_close, f64, randn

import ampcore
import ampcore.nn.functional as F
from ampcore import dtypes as dt
from ampcore.testing import gradcheck


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_attention_matches_einsum_reference(dtype):
    q, k, v = (
        randn(2, 3, 4, 8, dtype=dtype),
        randn(2, 3, 5, 8, seed=1, dtype=dtype),
        randn(2, 3, 5, 6, seed=2, dtype=dtype),
    )
    out = F.scaled_dot_product_attention(q, k, v)
    assert out.dtype is dtype and out.shape == (2, 3, 4, 6)
    assert_close(out, ref.attention(f64(q), f64(k), f64(v)), 8)


def test_attention_masks_and_scale():
    q, k, v = randn(2, 4, 8), randn(2, 5, 8, seed=1), randn(2, 5, 3, seed=2)
    keep = np.random.default_rng(3).random((4, 5)) > 0.4
    keep[:, 0] = True  # every query keeps at least one key
    bias = np.random.default_rng(4).standard_normal((2, 4, 5)).astype(np.float32)
    a, b, c = f64(q), f64(k), f64(v)
    assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=ampcore.tensor(keep)), ref.attention(a, b, c, keep), 8
    )
    assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=ampcore.tensor(bias), scale=0.5),
        ref.attention(a, b, c, bias.astype(np.float64), scale=0.5),
        8,
    )
    causal = np.tril(np.ones((4, 5), bool))
    assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True), ref.attention(a, b, c, causal), 8)


def test_attention_groups_query_heads_over_shared_key_value_heads():
    q, k, v = randn(1, 4, 3, 2), randn(1, 2, 3, 2, seed=1), randn(1, 2, 3, 2, seed=2)
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    repeat = lambda t: np.repeat(f64(t), 2, axis=1)  # noqa: E731
    assert_close(out, ref.attention(f64(q), repeat(k), repeat(v)), 2)


def test_attention_backward():
    q = randn(1, 3, 4, dtype=dt.float64, requires_grad=True)
    k = randn(1, 4, 4, seed=1, dtype=dt.float64, requires_grad=True)
    v = randn(1, 4, 2, seed=2, dtype=dt.float64, requires_grad=True)
    assert gradcheck(F.scaled_dot_product_attention, [q, k, v])
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), [q, k, v])


def test_attention_dropout_zeroes_some_weights():
    q, k, v = randn(8, 8), randn(8, 8, seed=1), ampcore.ones(8, 1)
    ampcore.manual_seed(0)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy()
    # each row sums its surviving weights, scaled by 2: not all 1 any more, and never negative
    assert not np.allclose(out, 1.0) and (out >= 0).all()
    assert math.isclose(F.scaled_dot_product_attention(q, k, v).numpy().mean(), 1.0, rel_tol=1e-6)


def test_attention_errors_name_the_shapes():
    q, k = ampcore.ones(2, 3, 4), ampcore.ones(2, 5, 4)
    with pytest.raises(ValueError, match=r"query \(2, 3, 4\), key \(2, 5, 3\) and value \(2, 5, 4\) do not fit"):
        F.scaled_dot_product_attention(q, ampcore.ones(2, 5, 3), k)
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, k, k, attn_mask=ampcore.ones(3, 5), is_causal=True)
    with pytest.raises(ValueError, match="attn_mask must be bool or floating, got int64"):
        F.scaled_dot_product_attention(q, k, k, attn_mask=ampcore.zeros(3, 5, dtype="int64"))


@pytest.mark.parametrize("scale", [None, -0.125], ids=["default", "negative"])
def test_attention_float16_scales_query_and_key_before_the_product_so_scores_stay_finite(scale):
    # q . k = 64 * 40**2 = 102400 overflows float16; scaled by 1/8 it is 12800 (torch's math path).
    q = ampcore.tensor(np.full((1, 1, 2, 64), 40.0, np.float16))
    v = randn(1, 1, 2, 3, seed=1, dtype=dt.float16)
    out = F.scaled_dot_product_attention(q, q, v, scale=scale)
    assert_close(out, ref.attention(f64(q), f64(q), f64(v), scale=scale), 64)


def test_attention_fully_masked_query_gives_zeros_and_zero_gradients_not_nan():
    q = randn(3, 4, dtype=dt.float64, requires_grad=True)
    k = randn(2, 4, seed=1, dtype=dt.float64, requires_grad=True)
    v = randn(2, 3, seed=2, dtype=dt.float64, requires_grad=True)
    keep = np.array([[True, False], [False, False], [True, True]])
    additive = np.where(keep, 0.0, -np.inf)
    with np.errstate(invalid="ignore"):  # the reference's masked row is NaN
        expected = ref.attention(f64(q), f64(k), f64(v), keep)
    expected[1] = 0.0  # torch >= 2.5: a query with no key to attend to outputs 0
    for mask in (ampcore.tensor(keep), ampcore.tensor(additive)):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert_close(out, expected, 2)
        q.grad = k.grad = v.grad = None
        out.sum().backward()
        for t in (q, k, v):
            assert np.isfinite(t.grad.numpy()).all()
        assert not q.grad.numpy()[1].any()
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=ampcore.tensor(keep)), [q, k, v])
