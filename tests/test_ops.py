"""Backward rules of the primitive ops, checked against float64 finite differences."""

import numpy as np
import pytest

import ampcore
from ampcore import ops
from ampcore.testing import gradcheck


def rnd(*shape, seed=0, positive=False):
    a = np.random.default_rng(seed).standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.5
    return ampcore.tensor(a, requires_grad=True)


UNARY = {
    "neg": False,
    "abs": False,
    "exp": False,
    "log": True,
    "sqrt": True,
    "rsqrt": True,
    "tanh": False,
    "sigmoid": False,
    "erf": False,
    "sin": False,
    "cos": False,
}


@pytest.mark.parametrize("name,positive", sorted(UNARY.items()))
def test_unary_backward(name, positive):
    x = rnd(3, 4, positive=positive)
    assert gradcheck(lambda t: ops.unary(name, t), [x])


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum"])
def test_binary_backward_with_broadcasting(name):
    a, b = rnd(3, 1, 4, seed=1), rnd(5, 1, seed=2)
    if name == "div":
        b = rnd(5, 1, seed=2, positive=True)
    assert gradcheck(lambda x, y: ops.binary(name, x, y), [a, b])
    assert gradcheck(lambda x: ops.binary(name, x, 1.5), [a])
    assert gradcheck(lambda x: ops.binary(name, 0.5, x), [a])


def test_pow_backward_in_base_and_exponent():
    a, b = rnd(3, 4, positive=True), rnd(3, 4, seed=3)
    assert gradcheck(lambda x, y: x**y, [a, b])
    assert gradcheck(lambda x: x**3.0, [rnd(2, 3, seed=4)])
    assert gradcheck(lambda y: 2.0**y, [b])


def test_relu_backward_and_zero_gradient_at_zero():
    assert gradcheck(lambda t: ops.relu(t), [rnd(3, 4)])
    x = ampcore.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    x.relu().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 1.0])


def test_max_min_ties_share_the_gradient_like_torch():
    a = ampcore.tensor([1.0, 2.0], requires_grad=True)
    b = ampcore.tensor([1.0, 3.0], requires_grad=True)
    a.maximum(b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.5, 0.0])
    np.testing.assert_array_equal(b.grad.numpy(), [0.5, 1.0])


def test_where_backward():
    a, b = rnd(3, 4), rnd(4, seed=1)
    cond = ampcore.tensor(np.random.default_rng(5).random((3, 4)) > 0.5)
    assert gradcheck(lambda x, y: ampcore.where(cond, x, y), [a, b])
    assert gradcheck(lambda x: ampcore.where(cond, x, 0.0), [a])


def test_cast_backward_returns_the_input_dtype():
    x = rnd(3)
    (x.to("float32") * 2.0).sum().backward()
    assert x.grad.dtype is ampcore.float64
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_sum_mean_backward(dim, keepdim):
    x = rnd(2, 3, 4)
    assert gradcheck(lambda t: t.sum(dim, keepdim), [x])
    assert gradcheck(lambda t: t.mean(dim, keepdim), [x])


def test_max_backward_all_and_along_a_dim():
    x = rnd(3, 5)
    assert gradcheck(lambda t: t.max(), [x])
    assert gradcheck(lambda t: t.amax(1, keepdim=True), [x])
    assert gradcheck(lambda t: t.max(0).values, [x])
    assert gradcheck(lambda t: t.max(1, keepdim=True).values, [x])
    assert gradcheck(lambda t: t.min(1).values, [x])


def test_amax_ties_split_evenly():
    x = ampcore.tensor([2.0, 2.0, 1.0], requires_grad=True)
    x.amax().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.5, 0.5, 0.0])


def test_cumsum_backward():
    x = rnd(3, 4)
    assert gradcheck(lambda t: ops.cumsum(t, 1), [x])
    assert gradcheck(lambda t: ops.cumsum(t, 0), [x])


def test_matmul_backward_with_batch_broadcast_and_vectors():
    assert gradcheck(lambda a, b: a @ b, [rnd(2, 1, 3, 4), rnd(5, 4, 2, seed=1)])
    assert gradcheck(lambda a, b: a @ b, [rnd(4), rnd(4, 3, seed=1)])
    assert gradcheck(lambda a, b: a @ b, [rnd(3, 4), rnd(4, seed=1)])


def test_shape_ops_backward():
    x = rnd(2, 3, 4)
    assert gradcheck(lambda t: t.reshape(4, 6) * ampcore.arange(6, dtype="float64"), [x])
    assert gradcheck(lambda t: t.permute(2, 0, 1) * ampcore.arange(3, dtype="float64"), [x])
    assert gradcheck(lambda t: t[:, None, :1].expand(2, 5, 1, 4), [x])
    assert gradcheck(lambda t: t[1, ::-1, 1:3], [x])
    assert gradcheck(lambda t: ops.pad(t, (1, 2, 0, 1), value=1.0), [x])


def test_cat_stack_backward():
    a, b = rnd(2, 3), rnd(2, 5, seed=1)
    assert gradcheck(lambda x, y: ampcore.cat([x, y], 1), [a, b])
    assert gradcheck(lambda x, y: ampcore.stack([x, y[:, :3]], 1), [a, b])


def test_take_and_index_add_backward_with_repeated_indices():
    x = rnd(5, 3)
    idx = ampcore.tensor([4, 0, 4, 2])
    assert gradcheck(lambda t: ops.take(t, idx, 0), [x])
    assert gradcheck(lambda t: t[idx], [x])
    assert gradcheck(lambda t: ops.index_add(t[:4], idx, 0, 6), [x])


def test_index_add_sums_duplicates():
    src = ampcore.ones(3, 2)
    out = ops.index_add(src, ampcore.tensor([1, 1, 0]), 0, 3)
    np.testing.assert_array_equal(out.numpy(), [[1, 1], [2, 2], [0, 0]])


def test_cat_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(3, 3\)"):
        ampcore.cat([ampcore.ones(2, 3), ampcore.ones(3, 3)], 1)


def test_take_refuses_float_indices():
    with pytest.raises(TypeError, match="float32"):
        ops.take(ampcore.ones(3), ampcore.ones(2), 0)


def test_every_op_ignores_inputs_that_do_not_require_grad():
    w = rnd(3, 4)
    x = ampcore.tensor(np.ones((2, 3)))
    (x @ w).sum().backward()
    assert x.grad is None and w.grad is not None


@pytest.mark.parametrize("shape", [(8,), (5, 8), (2, 3, 8)], ids=["1-D", "2-D", "3-D"])
@pytest.mark.parametrize("grads", ["both", "input", "weight"])
def test_linear_product_matches_matmul_with_the_transposed_weight_bit_for_bit(shape, grads):
    """F.linear records matmul_nt (a @ w.T keeping w): the same values and gradients as matmul(a, w.mT)
    (the weight's gradient of a 3-D input to float32 rounding: its batch rows are summed in one product)."""
    from ampcore.ops.linalg import matmul_nt

    rng = np.random.default_rng(0)
    a_np, w_np, g_np = (rng.standard_normal(s).astype(np.float32) for s in (shape, (6, 8), shape[:-1] + (6,)))
    results = []
    for product in (lambda a, w: matmul_nt(a, w), lambda a, w: ampcore.matmul(a, w.mT)):
        a = ampcore.tensor(a_np, requires_grad=grads in ("both", "input"))
        w = ampcore.tensor(w_np, requires_grad=grads in ("both", "weight"))
        out = product(a, w)
        out.backward(ampcore.tensor(g_np))
        results.append([out.numpy()] + [t.grad.numpy() for t in (a, w) if t.requires_grad])
    (new_out, *new_grads), (old_out, *old_grads) = results
    np.testing.assert_array_equal(new_out, old_out)
    if grads in ("both", "input"):
        np.testing.assert_array_equal(new_grads[0], old_grads[0])
    if grads in ("both", "weight"):
        a64, g64 = a_np.reshape(-1, 8).astype(np.float64), g_np.reshape(-1, 6).astype(np.float64)
        exact = g64.T @ a64
        if len(shape) < 3:
            np.testing.assert_array_equal(new_grads[-1], old_grads[-1])
        # A 3-D input's rows are summed in one product here (per batch, then summed, before): float32
        # rounding of a length-L sum of |g||a| products, against the float64 reference.
        bound = a64.shape[0] * 2.0**-23 * (np.abs(g64).T @ np.abs(a64))
        assert np.all(np.abs(new_grads[-1] - exact) <= bound)
    np.testing.assert_allclose(new_out, a_np.astype(np.float64) @ w_np.T.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_linear_keeps_no_transposed_copy_of_its_weight_for_backward():
    from ampcore.autograd import saved_bytes

    layer = ampcore.nn.Linear(64, 32)
    x = ampcore.tensor(np.ones((4, 64), np.float32), requires_grad=True)
    loss = layer(x).sum()
    # x (for the weight's gradient) is all it needs beyond the parameters themselves.
    assert saved_bytes(loss, exclude=layer.parameters()) == x.numel() * 4


@pytest.mark.parametrize("dim", [-4, -3, -2, -1, 0, 1, 2, 3])
def test_stack_along_every_dimension_equals_numpys_with_gradients(dim):
    parts = [np.random.default_rng(i).standard_normal((2, 3, 4)) for i in range(3)]
    tensors = [ampcore.tensor(p, dtype=ampcore.float64, requires_grad=True) for p in parts]
    out = ampcore.stack(tensors, dim)
    assert np.array_equal(out.detach().numpy(), np.stack(parts, dim))
    weights = np.arange(out.numel(), dtype=np.float64).reshape(out.shape)
    (out * ampcore.tensor(weights)).sum().backward()
    for i, t in enumerate(tensors):  # each input's gradient is its slice of the weights
        assert np.array_equal(t.grad.numpy(), np.take(weights, i, axis=dim))
    scalars = ampcore.stack([ampcore.tensor(1.0), ampcore.tensor(2.0)])
    assert scalars.tolist() == [1.0, 2.0]
