"""layer_norm, group_norm and batch_norm (with its float32 running statistics)."""

import numpy as np
import pytest
from functional_reference import FLOATS, LOW, assert_close, f64, randn

import ampcore
import ampcore.nn.functional as F
from ampcore import dtypes as dt
from ampcore.testing import gradcheck


def _normalize(a, axes, eps=1e-5):
    mean = a.mean(axis=axes, keepdims=True)
    var = ((a - mean) ** 2).mean(axis=axes, keepdims=True)
    return (a - mean) / np.sqrt(var + eps)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_layer_norm_matches_numpy_and_keeps_the_input_dtype(dtype):
    x = randn(3, 4, 8, dtype=dtype) * 2.0 + 0.5
    w, b = randn(4, 8, seed=1, dtype=dtype), randn(4, 8, seed=2, dtype=dtype)
    out = F.layer_norm(x, (4, 8), w, b)
    assert out.dtype is dtype
    assert_close(out, _normalize(f64(x), (1, 2)) * f64(w) + f64(b), 32)
    assert_close(F.layer_norm(x, 8), _normalize(f64(x), (2,)), 8)


def test_float16_layer_norm_does_not_overflow_on_large_inputs():
    x = (randn(2, 16) * 1000.0).half()  # x**2 would overflow float16 (max 65504)
    out = F.layer_norm(x, (16,))
    assert out.dtype is dt.float16
    assert_close(out, _normalize(f64(x), (1,)), 16)


def test_layer_norm_backward():
    x = randn(2, 3, 4, dtype=dt.float64, requires_grad=True)
    w = randn(3, 4, seed=1, dtype=dt.float64, requires_grad=True)
    b = randn(3, 4, seed=2, dtype=dt.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.layer_norm(x, (3, 4), w, b), [x, w, b])


@pytest.mark.parametrize("dtype", (dt.float32,) + LOW, ids=str)
def test_group_norm_matches_numpy(dtype):
    x = randn(2, 6, 3, 3, dtype=dtype)
    w, b = randn(6, seed=1, dtype=dtype), randn(6, seed=2, dtype=dtype)
    out = F.group_norm(x, 3, w, b)
    assert out.dtype is dtype
    expected = _normalize(f64(x).reshape(2, 3, -1), (2,)).reshape(2, 6, 3, 3)
    assert_close(out, expected * f64(w).reshape(1, 6, 1, 1) + f64(b).reshape(1, 6, 1, 1), 18)


def test_group_norm_backward():
    x = randn(2, 4, 3, dtype=dt.float64, requires_grad=True)
    w = randn(4, seed=1, dtype=dt.float64, requires_grad=True)
    b = randn(4, seed=2, dtype=dt.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), [x, w, b])


def test_batch_norm_training_normalizes_per_channel():
    x = randn(4, 3, 2, 2) * 2.0 + 1.0
    w, b = randn(3, seed=1), randn(3, seed=2)
    out = F.batch_norm(x, None, None, w, b, training=True)
    expected = _normalize(f64(x), (0, 2, 3)) * f64(w).reshape(1, 3, 1, 1) + f64(b).reshape(1, 3, 1, 1)
    assert_close(out, expected, 16)


@pytest.mark.parametrize("dtype", (dt.float32,) + LOW, ids=str)
def test_batch_norm_running_stats_follow_the_momentum_rule_in_float32(dtype):
    running_mean, running_var = ampcore.zeros(3), ampcore.ones(3)
    expected_mean, expected_var = np.zeros(3), np.ones(3)
    for step in range(2):
        x = randn(5, 3, 4, seed=step, dtype=dtype) * 3.0 + 2.0
        out = F.batch_norm(x, running_mean, running_var, training=True, momentum=0.2)
        assert out.dtype is dtype
        a = f64(x)
        expected_mean = 0.8 * expected_mean + 0.2 * a.mean(axis=(0, 2))
        expected_var = 0.8 * expected_var + 0.2 * a.var(axis=(0, 2), ddof=1)  # unbiased, like torch
    assert running_mean.dtype is dt.float32 and running_var.dtype is dt.float32
    assert not running_mean.requires_grad and running_mean.grad_fn is None
    assert_close(running_mean, expected_mean, 20)
    assert_close(running_var, expected_var, 20)


@pytest.mark.parametrize("dtype", (dt.float32, dt.bfloat16), ids=str)
def test_batch_norm_eval_uses_the_running_stats(dtype):
    x = randn(2, 3, 4, dtype=dtype)
    rm, rv = ampcore.tensor([0.5, -1.0, 2.0]), ampcore.tensor([4.0, 0.25, 1.0])
    w, b = ampcore.tensor([1.0, 2.0, 3.0]), ampcore.tensor([0.0, 0.1, -0.1])
    out = F.batch_norm(x, rm, rv, w, b, training=False)
    assert out.dtype is dtype
    shape = (1, 3, 1)
    expected = (f64(x) - f64(rm).reshape(shape)) / np.sqrt(f64(rv).reshape(shape) + 1e-5)
    assert_close(out, expected * f64(w).reshape(shape) + f64(b).reshape(shape))
    np.testing.assert_array_equal(rm.numpy(), [0.5, -1.0, 2.0])  # untouched in eval


def test_batch_norm_backward_in_training_and_eval():
    x = randn(3, 2, 4, dtype=dt.float64, requires_grad=True)
    w = randn(2, seed=1, dtype=dt.float64, requires_grad=True)
    b = randn(2, seed=2, dtype=dt.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [x, w, b])
    rm, rv = ampcore.tensor([0.1, -0.2], dtype="float64"), ampcore.tensor([1.5, 0.5], dtype="float64")
    assert gradcheck(lambda x, w, b: F.batch_norm(x, rm, rv, w, b), [x, w, b])


def test_batch_norm_of_an_empty_batch_is_empty_and_leaves_the_running_stats_alone():
    # torch refuses exactly one value per channel in training, not zero
    x = ampcore.zeros(0, 3, 2, requires_grad=True)
    w = ampcore.ones(3, requires_grad=True)
    rm, rv = ampcore.tensor([0.5, -1.0, 2.0]), ampcore.tensor([4.0, 0.25, 1.0])
    out = F.batch_norm(x, rm, rv, w, training=True)
    assert out.shape == (0, 3, 2) and out.dtype is dt.float32
    np.testing.assert_array_equal(rm.numpy(), [0.5, -1.0, 2.0])
    np.testing.assert_array_equal(rv.numpy(), [4.0, 0.25, 1.0])
    out.sum().backward()
    assert x.grad.shape == (0, 3, 2) and not w.grad.numpy().any()


def test_norm_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"input of shape \(2, 3\) does not end in normalized_shape \(4,\)"):
        F.layer_norm(ampcore.ones(2, 3), 4)
    with pytest.raises(ValueError, match=r"weight of shape \(2,\) does not match the expected shape \(3,\)"):
        F.layer_norm(ampcore.ones(2, 3), 3, ampcore.ones(2))
    with pytest.raises(ValueError, match=r"6 channels .* not divisible into num_groups=4"):
        F.group_norm(ampcore.ones(2, 6, 3), 4)
    with pytest.raises(ValueError, match="running_mean and running_var are needed when training=False"):
        F.batch_norm(ampcore.ones(2, 3), None, None)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(ampcore.ones(1, 3), ampcore.zeros(3), ampcore.ones(3), training=True)
