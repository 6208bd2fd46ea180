"""embedding (padding_idx gets no gradient) and dropout (seeded, scaled, identity in eval)."""

import numpy as np
import pytest
from functional_reference import FLOATS, f64, randn

import ampcore
import ampcore.nn.functional as F
from ampcore import dtypes as dt
from ampcore.testing import gradcheck


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_embedding_picks_rows_for_any_index_shape(dtype):
    w = randn(6, 3, dtype=dtype)
    idx = ampcore.tensor([[0, 5, 2], [2, 2, 1]])
    out = F.embedding(idx, w)
    assert out.dtype is dtype and out.shape == (2, 3, 3)
    np.testing.assert_array_equal(f64(out), f64(w)[idx.numpy()])


def test_embedding_padding_row_gets_no_gradient():
    w = randn(5, 2, dtype=dt.float64, requires_grad=True)
    idx = ampcore.tensor([1, 4, 1, 0, 4])
    out = F.embedding(idx, w, padding_idx=-1)
    np.testing.assert_array_equal(f64(out)[1], f64(w)[4])  # the value is still looked up
    out.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], [1.0, 2.0, 0.0, 0.0, 0.0])
    # (finite differences do see the padding row, so gradcheck only the rows that are not padding)
    assert gradcheck(lambda t: F.embedding(ampcore.tensor([[1, 0], [3, 1]]), t, padding_idx=4), [w])


def test_embedding_errors():
    w = ampcore.ones(4, 2)
    with pytest.raises(TypeError, match="int64 or int32 indices, got dtype float32"):
        F.embedding(ampcore.ones(3), w)
    with pytest.raises(ValueError, match=r"padding_idx 4 must be an int in \[-4, 4\)"):
        F.embedding(ampcore.tensor([0]), w, padding_idx=4)
    with pytest.raises(IndexError):
        F.embedding(ampcore.tensor([7]), w)


@pytest.mark.parametrize("index", [-1, -4, 4, 9])
def test_embedding_refuses_indices_outside_zero_to_num_embeddings(index):
    # torch raises rather than counting a negative index from the end
    w = ampcore.ones(4, 2)
    with pytest.raises(
        IndexError,
        match=rf"embedding\(\): index {index} is out of range for 4 embeddings "
        r"\(valid: 0..3\)",
    ):
        F.embedding(ampcore.tensor([[0, 3], [index, 1]]), w)


def test_dropout_is_the_identity_in_eval_or_at_p_zero():
    x = randn(4, 5)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x


def test_dropout_zeroes_with_probability_p_and_scales_the_rest():
    x = ampcore.ones(200, 100)
    out = F.dropout(x, 0.3, generator=ampcore.Generator(0)).numpy()
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / 0.7, rtol=1e-6)
    assert abs(kept.mean() - 0.7) < 0.01  # 20000 draws: 4.6 standard deviations
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), 0.0)


def test_dropout_is_reproducible_with_a_generator_and_keeps_low_precision():
    x = randn(3, 7, dtype=dt.bfloat16)
    a = F.dropout(x, 0.5, generator=ampcore.Generator(7))
    b = F.dropout(x, 0.5, generator=ampcore.Generator(7))
    assert a.dtype is dt.bfloat16
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_dropout_backward_uses_the_same_mask():
    x = randn(3, 4, dtype=dt.float64, requires_grad=True)
    assert gradcheck(lambda t: F.dropout(t, 0.4, generator=ampcore.Generator(3)), [x])
    out = F.dropout(x, 0.4, generator=ampcore.Generator(3))
    x.grad = None
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(out.numpy() != 0, 1 / 0.6, 0.0))


def test_dropout_refuses_probabilities_outside_unit_interval():
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\], got 1.5"):
        F.dropout(ampcore.ones(2), 1.5)
