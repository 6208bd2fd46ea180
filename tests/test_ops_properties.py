"""Properties of the primitive ops over random shapes, broadcasting and zero-size axes."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ampcore
from ampcore import ops

OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


@settings(max_examples=150, deadline=None)
@given(
    hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=4),
    st.sampled_from(sorted(OPS)),
    st.integers(0, 2**31 - 1),
)
def test_binary_ops_broadcast_like_numpy_and_return_grads_in_input_shapes(shapes, name, seed):
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s) for s in shapes.input_shapes)
    ta, tb = ampcore.tensor(a, requires_grad=True), ampcore.tensor(b, requires_grad=True)
    out = ops.binary(name, ta, tb)
    expected = OPS[name](a, b)
    assert out.shape == expected.shape == shapes.result_shape
    np.testing.assert_array_equal(out.numpy(), expected)  # float64 elementwise: exact
    out.sum().backward()
    assert ta.grad.shape == a.shape and tb.grad.shape == b.shape
    if name == "add":  # d(sum(a + b))/da counts how often each element of a was broadcast
        counts = np.ones(shapes.result_shape)
        lead = len(shapes.result_shape) - a.ndim
        counts = counts.sum(axis=tuple(range(lead))) if lead else counts
        counts = counts.sum(axis=tuple(i for i, n in enumerate(a.shape) if n == 1), keepdims=True)
        np.testing.assert_array_equal(ta.grad.numpy(), np.broadcast_to(counts, a.shape))


@settings(max_examples=100, deadline=None)
@given(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5), st.integers(0, 2**31 - 1), st.booleans())
def test_sum_over_random_axes_matches_numpy(shape, seed, keepdim):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    axes = tuple(i for i in range(len(shape)) if rng.random() < 0.5) or None
    out = ampcore.tensor(a).sum(axes, keepdim)
    np.testing.assert_allclose(out.numpy(), a.sum(axis=axes, keepdims=keepdim), rtol=1e-12, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5), st.data())
def test_basic_indexing_matches_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    np.testing.assert_array_equal(ampcore.tensor(a)[index].numpy(), a[index])
