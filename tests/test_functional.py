"""ampcore.nn.functional: public surface, activations, fused kernels vs reference
compositions, matrix products and the re-exported primitives."""

import math

import functional_reference as ref
import numpy as np
import pytest
from functional_reference import FLOATS, LOW, assert_close, f64, randn

import ampcore
import ampcore.nn.functional as F
from ampcore import dtypes as dt
from ampcore.dispatch import registered_ops
from ampcore.nn.functional import _fused, activation
from ampcore.testing import gradcheck

K = ampcore.get_backend("cpu").kernels

DOCUMENTED = {
    "matmul",
    "mm",
    "bmm",
    "linear",
    "addmm",
    "baddbmm",
    "conv1d",
    "conv2d",
    "relu",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "pow",
    "sqrt",
    "rsqrt",
    "softmax",
    "log_softmax",
    "layer_norm",
    "group_norm",
    "batch_norm",
    "dropout",
    "embedding",
    "cat",
    "stack",
    "sum",
    "mean",
    "cumsum",
    "max_pool2d",
    "avg_pool2d",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "scaled_dot_product_attention",
    # the ops of torch's autocast lists added for autocast routing (tests/test_functional_listed_ops.py)
    "prelu",
    "softplus",
    "softmin",
    "normalize",
    "cosine_similarity",
    "kl_div",
    "huber_loss",
    "margin_ranking_loss",
    "soft_margin_loss",
    "hinge_embedding_loss",
    "poisson_nll_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
    "addcmul",
    "addcdiv",
    "dot",
    "tensordot",
    "bilinear",
    # issue 37: the ops its measured table names and their siblings (tests/test_functional_issue37.py)
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "avg_pool1d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "interpolate",
    "upsample",
    "upsample_nearest",
    "upsample_bilinear",
    "pad",
    "pixel_shuffle",
    "pixel_unshuffle",
    "leaky_relu",
    "elu",
    "selu",
    "hardtanh",
    "relu6",
    "hardsigmoid",
    "hardswish",
    "instance_norm",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "one_hot",
    "multi_head_attention_forward",
}
# torch.nn.functional's plain functions that pick an op (pad, interpolate: one per mode, as torch's do; the channel
# dropouts), and the elementwise activations (declared programs, registered as primitives).
DISPATCHERS = {
    "interpolate",
    "upsample",
    "upsample_nearest",
    "upsample_bilinear",
    "pad",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "multi_head_attention_forward",
    "leaky_relu",
    "elu",
    "selu",
    "hardtanh",
    "relu6",
    "hardsigmoid",
    "hardswish",
}
PRIMITIVE_WRAPPERS = {
    "matmul",
    "relu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "pow",
    "sqrt",
    "rsqrt",
    "cat",
    "stack",
    "sum",
    "mean",
    "cumsum",
}


def test_public_surface_is_exactly_the_documented_ops():
    assert set(F.__all__) == DOCUMENTED and len(F.__all__) == len(DOCUMENTED)
    assert all(callable(getattr(F, name)) for name in F.__all__)


def test_every_composite_op_is_registered_under_its_torch_name():
    ops = registered_ops()
    for name in DOCUMENTED - PRIMITIVE_WRAPPERS - DISPATCHERS:
        assert getattr(F, name).op_name == name
        assert ops[name] == "composite"


# --------------------------------------------------------------------------- softmax / log_softmax
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax_match_numpy(dtype, dim):
    x = randn(4, 6, 5, dtype=dtype) * 3.0
    n = x.shape[dim]
    out = F.softmax(x, dim)
    assert out.dtype is dtype
    assert_close(out, ref.softmax(f64(x), dim), n)
    assert_close(F.log_softmax(x, dim), ref.log_softmax(f64(x), dim), n)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "reference"])
def test_softmax_is_stable_for_huge_logits(fused, monkeypatch):
    if not fused:
        monkeypatch.setattr(_fused, "has_fused", lambda x, name: False)
    x = ampcore.tensor([[1000.0, 0.0, -1000.0], [-1e30, -1e30, -1e30]])
    np.testing.assert_allclose(F.softmax(x, 1).numpy(), [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]], atol=1e-7)
    np.testing.assert_allclose(F.log_softmax(x, 1).numpy()[0], [0, -1000, -2000], rtol=1e-7)


def test_softmax_dtype_argument_casts_first():
    x = randn(2, 3, dtype=dt.bfloat16)
    assert F.softmax(x, -1, dtype=dt.float32).dtype is dt.float32
    assert x.softmax(1).dtype is dt.bfloat16  # the Tensor method routes here too


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "reference"])
def test_softmax_log_softmax_gelu_backward(fused, monkeypatch):
    if not fused:
        monkeypatch.setattr(_fused, "has_fused", lambda x, name: False)
    x = randn(3, 5, dtype=dt.float64, requires_grad=True)
    assert gradcheck(lambda t: F.softmax(t, 1), [x])
    assert gradcheck(lambda t: F.log_softmax(t, 0), [x])
    assert gradcheck(lambda t: F.gelu(t), [x])
    assert gradcheck(lambda t: F.gelu(t, approximate="tanh"), [x])


def test_the_cpu_backend_provides_the_fused_kernels():
    for name in ("softmax", "softmax_backward", "log_softmax", "log_softmax_backward", "gelu", "gelu_backward"):
        assert K.provider(name) == "cpu"


FUSED_CASES = [
    ("softmax", lambda t: F.softmax(t, 1), lambda t: activation.softmax_reference(t, 1)),
    ("log_softmax", lambda t: F.log_softmax(t, 1), lambda t: activation.log_softmax_reference(t, 1)),
    ("gelu", F.gelu, activation.gelu_reference),
    ("gelu_tanh", lambda t: F.gelu(t, "tanh"), lambda t: activation.gelu_reference(t, "tanh")),
]


def _value_and_grad(fn, x, g):
    x = x.detach().requires_grad_()
    out = fn(x)
    out.backward(g)
    return out, x.grad


@pytest.mark.parametrize("dtype", (dt.float64,) + FLOATS, ids=str)
@pytest.mark.parametrize("name,fused,reference", FUSED_CASES, ids=[c[0] for c in FUSED_CASES])
def test_fused_kernels_agree_with_the_reference_composition(dtype, name, fused, reference):
    x = randn(4, 7, dtype=dtype) * 2.0
    g = randn(4, 7, seed=1, dtype=dtype)
    out_f, grad_f = _value_and_grad(fused, x, g)
    out_r, grad_r = _value_and_grad(reference, x, g)
    assert out_f.dtype is out_r.dtype is dtype and grad_f.dtype is grad_r.dtype is dtype
    assert_close(out_f, f64(out_r), 7)
    assert_close(grad_f, f64(grad_r), 7)


@pytest.mark.parametrize("dtype", (dt.float32, dt.bfloat16), ids=str)
def test_a_backend_without_fused_kernels_gets_the_same_numbers(register_fake, dtype):
    fake = register_fake()
    assert not fake.kernels.has("softmax") and not fake.kernels.has("gelu")
    a = randn(4, 7, dtype=dtype).numpy()
    g = randn(4, 7, seed=1, dtype=dtype).numpy()
    for _name, fn, _ in FUSED_CASES:
        on_cpu = _value_and_grad(fn, ampcore.tensor(a, dtype=dtype), ampcore.tensor(g, dtype=dtype))
        on_fake = _value_and_grad(
            fn, ampcore.tensor(a, dtype=dtype, device=fake.name), ampcore.tensor(g, dtype=dtype, device=fake.name)
        )
        for fused, composed in zip(on_cpu, on_fake):
            assert composed.device.type == fake.name and composed.dtype is dtype
            assert_close(fused, f64(composed), 7)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_fused_kernels_round_once_from_float32(dtype):
    x = randn(8, 16, dtype=dtype).numpy()
    x32 = x.astype(np.float32)
    for name, args in [("softmax", (1,)), ("log_softmax", (1,)), ("gelu", ("none",)), ("gelu", ("tanh",))]:
        out = getattr(K, name)(x, *args)
        assert out.dtype == dtype.numpy
        np.testing.assert_array_equal(out, getattr(K, name)(x32, *args).astype(dtype.numpy))


def test_gelu_matches_numpy_and_refuses_unknown_approximation():
    x = randn(5, 6) * 3.0
    assert_close(F.gelu(x), ref.gelu(f64(x)))
    assert_close(F.gelu(x, approximate="tanh"), ref.gelu(f64(x), "tanh"))
    with pytest.raises(ValueError, match=r"unknown approximate 'erf'; valid values are 'none', 'tanh'"):
        F.gelu(x, approximate="erf")


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_low_precision_softmax_and_gelu_keep_their_dtype(dtype):
    x = randn(6, 10, dtype=dtype) * 2.0
    for out, expected, n in [
        (F.softmax(x, -1), ref.softmax(f64(x), -1), 10),
        (F.gelu(x), ref.gelu(f64(x)), 1),
        (F.gelu(x, "tanh"), ref.gelu(f64(x), "tanh"), 1),
    ]:
        assert out.dtype is dtype
        assert_close(out, expected, n)


def test_softmax_errors_name_the_problem():
    with pytest.raises(TypeError, match="int64"):
        F.softmax(ampcore.arange(4), 0)
    with pytest.raises(IndexError, match="dimension 2"):
        F.softmax(ampcore.ones(2, 2), 2)


# --------------------------------------------------------------------------- pointwise
def test_relu_silu_and_pointwise_math_match_numpy():
    x = randn(4, 5) * 2.0
    a = f64(x)
    assert_close(F.relu(x), np.maximum(a, 0))
    assert_close(F.silu(x), a / (1 + np.exp(-a)))
    assert_close(F.sigmoid(x), 1 / (1 + np.exp(-a)))
    assert_close(F.tanh(x), np.tanh(a))
    assert_close(F.exp(x), np.exp(a))
    p = randn(4, 5, positive=True)
    assert_close(F.log(p), np.log(f64(p)))
    assert_close(F.sqrt(p), np.sqrt(f64(p)))
    assert_close(F.rsqrt(p), 1 / np.sqrt(f64(p)))
    assert_close(F.pow(p, x), f64(p) ** a)
    assert_close(F.pow(x, 2.0), a**2)


def test_pointwise_backward():
    x = randn(3, 4, dtype=dt.float64, requires_grad=True)
    p = randn(3, 4, seed=1, dtype=dt.float64, requires_grad=True, positive=True)
    for fn in (F.relu, F.silu, F.sigmoid, F.tanh, F.exp):
        assert gradcheck(fn, [x])
    for fn in (F.log, F.sqrt, F.rsqrt):
        assert gradcheck(fn, [p])
    assert gradcheck(F.pow, [p, x])


def test_relu_gradient_is_zero_at_zero_and_nan_propagates():
    x = ampcore.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    F.relu(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 1.0])
    assert math.isnan(F.relu(ampcore.tensor([float("nan")])).item())


def test_inplace_relu_rebinds_a_tensor_outside_the_graph():
    x = ampcore.tensor([-1.0, 2.0])
    assert F.relu(x, inplace=True) is x
    np.testing.assert_array_equal(x.numpy(), [0.0, 2.0])


# --------------------------------------------------------------------------- matrix products
def test_matrix_products_match_numpy():
    a, b, c = randn(3, 4), randn(4, 5, seed=1), randn(3, 5, seed=2)
    ba, bb, bc = randn(2, 3, 4, seed=3), randn(2, 4, 5, seed=4), randn(2, 3, 5, seed=5)
    assert_close(F.matmul(a, b), f64(a) @ f64(b), 4)
    assert_close(F.mm(a, b), f64(a) @ f64(b), 4)
    assert_close(F.bmm(ba, bb), f64(ba) @ f64(bb), 4)
    assert_close(F.addmm(c, a, b, beta=0.5, alpha=2.0), 0.5 * f64(c) + 2 * f64(a) @ f64(b), 4)
    assert_close(F.baddbmm(bc, ba, bb), f64(bc) + f64(ba) @ f64(bb), 4)
    w, bias = randn(5, 4, seed=6), randn(5, seed=7)
    assert_close(F.linear(ba, w, bias), f64(ba) @ f64(w).T + f64(bias), 4)
    assert_close(F.linear(a, w), f64(a) @ f64(w).T, 4)


def test_addmm_with_beta_zero_ignores_nan_input():
    nan = ampcore.full((2, 2), float("nan"))
    out = F.addmm(nan, ampcore.ones(2, 3), ampcore.ones(3, 2), beta=0)
    np.testing.assert_array_equal(out.numpy(), np.full((2, 2), 3.0))


def test_matrix_products_backward():
    a, b = randn(3, 4, dtype=dt.float64, requires_grad=True), randn(4, 2, seed=1, dtype=dt.float64, requires_grad=True)
    c = randn(3, 2, seed=2, dtype=dt.float64, requires_grad=True)
    assert gradcheck(F.mm, [a, b])
    assert gradcheck(lambda x, y, z: F.addmm(z, x, y, beta=0.5, alpha=1.5), [a, b, c])
    ba = randn(2, 3, 4, dtype=dt.float64, requires_grad=True)
    bb = randn(2, 4, 2, seed=1, dtype=dt.float64, requires_grad=True)
    bc = randn(1, 3, 2, seed=2, dtype=dt.float64, requires_grad=True)
    assert gradcheck(F.bmm, [ba, bb])
    assert gradcheck(lambda x, y, z: F.baddbmm(z, x, y, alpha=2.0), [ba, bb, bc])
    w = randn(2, 4, seed=3, dtype=dt.float64, requires_grad=True)
    bias = randn(2, seed=4, dtype=dt.float64, requires_grad=True)
    assert gradcheck(F.linear, [ba, w, bias])


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_low_precision_linear_keeps_its_dtype(dtype):
    x, w, b = randn(4, 32, dtype=dtype), randn(8, 32, seed=1, dtype=dtype), randn(8, seed=2, dtype=dtype)
    out = F.linear(x, w, b)
    assert out.dtype is dtype
    assert_close(out, f64(x) @ f64(w).T + f64(b), 32)


def test_matrix_product_errors_show_the_shapes():
    with pytest.raises(ValueError, match=r"input of shape \(2, 3\) does not fit weight of shape \(4, 5\)"):
        F.linear(ampcore.ones(2, 3), ampcore.ones(4, 5))
    with pytest.raises(ValueError, match=r"mm\(\) needs 2-D tensors, got shapes \(2, 3, 4\) and \(4, 5\)"):
        F.mm(ampcore.ones(2, 3, 4), ampcore.ones(4, 5))
    with pytest.raises(ValueError, match=r"batch sizes differ: shapes \(2, 3, 4\) and \(3, 4, 5\)"):
        F.bmm(ampcore.ones(2, 3, 4), ampcore.ones(3, 4, 5))


# --------------------------------------------------------------------------- re-exported primitives
def test_tensor_ops_forward_and_backward():
    a, b = randn(2, 3, dtype=dt.float64, requires_grad=True), randn(2, 3, seed=1, dtype=dt.float64, requires_grad=True)
    np.testing.assert_allclose(F.cat([a, b], 1).numpy(), np.concatenate([f64(a), f64(b)], 1))
    np.testing.assert_allclose(F.stack([a, b], 0).numpy(), np.stack([f64(a), f64(b)]))
    np.testing.assert_allclose(F.sum(a, 1).numpy(), f64(a).sum(1))
    np.testing.assert_allclose(F.mean(a).numpy(), f64(a).mean())
    np.testing.assert_allclose(F.cumsum(a, 1).numpy(), np.cumsum(f64(a), 1))
    assert gradcheck(lambda x, y: F.cat([x, y], 0), [a, b])
    assert gradcheck(lambda x, y: F.stack([x, y], 2), [a, b])
    assert gradcheck(lambda x: F.sum(x, 0), [a])
    assert gradcheck(lambda x: F.mean(x, 1, keepdim=True), [a])
    assert gradcheck(lambda x: F.cumsum(x, 1), [a])
