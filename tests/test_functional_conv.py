"""conv1d / conv2d (im2col) and max/avg pooling against direct-loop NumPy references."""

import functional_reference as ref
import numpy as np
import pytest
from functional_reference import FLOATS, assert_close, distinct, f64, randn

import ampcore
import ampcore.nn.functional as F
from ampcore import dtypes as dt
from ampcore.testing import gradcheck

# (input shape, weight shape, stride, padding, dilation, groups)
CONV_CASES = {
    "plain": ((2, 3, 6, 6), (4, 3, 3, 3), 1, 0, 1, 1),
    "stride2_pad1": ((2, 3, 5, 5), (4, 3, 3, 3), 2, 1, 1, 1),
    "groups2": ((2, 4, 5, 5), (6, 2, 3, 3), 1, 1, 1, 2),
    "dilation2": ((1, 2, 7, 7), (3, 2, 3, 3), 1, 2, 2, 1),
    "rect": ((1, 2, 6, 7), (2, 2, 2, 3), (2, 1), (1, 0), (1, 2), 1),
    "depthwise": ((1, 3, 5, 5), (3, 1, 3, 3), 2, 1, 1, 3),
    # stride 2 leaves the last row and column unread; stride, dilation and groups together
    "uncovered_edge": ((2, 4, 6, 8), (4, 2, 3, 2), (2, 3), (0, 1), (1, 2), 2),
}


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d_matches_direct_convolution(case, dtype):
    xs, ws, stride, padding, dilation, groups = CONV_CASES[case]
    x, w, b = randn(*xs, dtype=dtype), randn(*ws, seed=1, dtype=dtype), randn(ws[0], seed=2, dtype=dtype)
    out = F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert out.dtype is dtype
    expected = ref.conv2d(f64(x), f64(w), f64(b), _pair(stride), _pair(padding), _pair(dilation), groups)
    assert_close(out, expected, n=ws[1] * ws[2] * ws[3])


@pytest.mark.parametrize("case", ["stride2_pad1", "groups2", "dilation2", "rect", "depthwise", "uncovered_edge"])
def test_conv2d_backward(case):
    xs, ws, stride, padding, dilation, groups = CONV_CASES[case]
    x = randn(2, *xs[1:], dtype=dt.float64, requires_grad=True)
    w = randn(*ws, seed=1, dtype=dt.float64, requires_grad=True)
    b = randn(ws[0], seed=2, dtype=dt.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups), [x, w, b])


@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16], ids=str)
def test_low_precision_conv2d_gradients_accumulate_in_float32_and_round_once(dtype):
    """Both gradients are one GEMM each: summed over batch and positions in float32, then rounded once."""
    x = randn(4, 3, 6, 6, dtype=dtype, requires_grad=True)
    w = randn(5, 3, 3, 3, seed=1, dtype=dtype, requires_grad=True)
    g = randn(4, 5, 3, 3, seed=2, dtype=dtype)
    F.conv2d(x, w, stride=2, padding=1).backward(g)
    x64, w64, g64 = f64(x), f64(w), f64(g)
    gx, gw = ref.conv2d_vjp(x64, w64, g64, (2, 2), (1, 1))
    assert x.grad.dtype is dtype and w.grad.dtype is dtype
    assert_close(w.grad, gw, n=4 * 3 * 3)
    assert_close(x.grad, gx, n=5 * 3 * 3)


def test_conv2d_same_and_valid_padding_and_unbatched_input():
    x, w = randn(3, 5, 6), randn(2, 3, 2, 3, seed=1)
    same = F.conv2d(x, w, padding="same")
    assert same.shape == (2, 5, 6)
    # torch's 'same' puts the odd extra row/column of padding at the end.
    padded = np.pad(f64(x), ((0, 0), (0, 1), (1, 1)))[None]
    assert_close(same, ref.conv2d(padded, f64(w), None, (1, 1), (0, 0), (1, 1), 1)[0], n=18)
    assert F.conv2d(x, w, padding="valid").shape == (2, 4, 4)


def test_conv1d_matches_direct_convolution_and_backward():
    x, w, b = randn(2, 4, 9), randn(6, 2, 3, seed=1), randn(6, seed=2)
    out = F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2)
    expected = ref.conv2d(f64(x)[:, :, None], f64(w)[:, :, None], f64(b), (1, 2), (0, 1), (1, 2), 2)[:, :, 0]
    assert_close(out, expected, n=6)
    assert F.conv1d(x[0], w, groups=2).shape == (6, 7)
    x64 = randn(1, 4, 7, dtype=dt.float64, requires_grad=True)
    w64 = randn(6, 2, 3, seed=1, dtype=dt.float64, requires_grad=True)
    assert gradcheck(lambda x, w: F.conv1d(x, w, None, 2, 1, 1, 2), [x64, w64])


def test_conv_errors_show_both_shapes():
    with pytest.raises(
        ValueError,
        match=r"input of shape \(1, 3, 5, 5\) has 3 channels, but weight of shape "
        r"\(4, 2, 3, 3\) with groups=1 expects 2",
    ):
        F.conv2d(ampcore.ones(1, 3, 5, 5), ampcore.ones(4, 2, 3, 3))
    with pytest.raises(ValueError, match=r"out_channels 3 .* not divisible by groups=2"):
        F.conv2d(ampcore.ones(1, 4, 5, 5), ampcore.ones(3, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match="larger than the padded input"):
        F.conv2d(ampcore.ones(1, 1, 2, 2), ampcore.ones(1, 1, 3, 3))
    with pytest.raises(ValueError, match=r"padding='same' needs stride 1"):
        F.conv2d(ampcore.ones(1, 1, 5, 5), ampcore.ones(1, 1, 3, 3), stride=2, padding="same")
    with pytest.raises(ValueError, match=r"stride must hold ints >= 1, got 0"):
        F.conv2d(ampcore.ones(1, 1, 5, 5), ampcore.ones(1, 1, 3, 3), stride=0)
    with pytest.raises(ValueError, match=r"bias of shape \(3,\)"):
        F.conv1d(ampcore.ones(1, 1, 5), ampcore.ones(2, 1, 3), ampcore.ones(3))


# --------------------------------------------------------------------------- pooling
@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16], ids=str)
@pytest.mark.parametrize("kernel,stride,padding", [(2, None, 0), (3, 2, 1), (3, 1, 0)])
def test_pooling_matches_direct_loops(kernel, stride, padding, dtype):
    x = randn(2, 3, 7, 7, dtype=dtype)
    s = stride or kernel
    out = F.max_pool2d(x, kernel, stride, padding)
    assert out.dtype is dtype
    assert_close(out, ref.pool2d(f64(x), kernel, s, padding, "max"))
    assert_close(
        F.avg_pool2d(x, kernel, stride, padding), ref.pool2d(f64(x), kernel, s, padding, "avg"), n=kernel * kernel
    )
    assert_close(
        F.avg_pool2d(x, kernel, stride, padding, count_include_pad=False),
        ref.pool2d(f64(x), kernel, s, padding, "avg", count_include_pad=False),
        n=kernel * kernel,
    )


def test_pooling_backward():
    x = distinct(1, 2, 5, 5)
    assert gradcheck(lambda t: F.max_pool2d(t, 2), [x])
    assert gradcheck(lambda t: F.max_pool2d(t, 3, 2, 1), [x])
    assert gradcheck(lambda t: F.max_pool2d(t, 2, 1, dilation=2), [x])
    assert gradcheck(lambda t: F.avg_pool2d(t, 3, 2, 1), [x])
    assert gradcheck(lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=False), [x])


def test_tiled_max_pool_rectangular_windows_nan_and_unbatched_input():
    """stride = kernel (the one-op path): rectangular windows, a NaN is the window's maximum and takes its
    gradient, unread edge rows and columns get none, and a (C, H, W) input works."""
    a = np.arange(2 * 5 * 7, dtype=np.float64).reshape(2, 5, 7) % 11
    a[1, 0, 1] = np.nan
    x = ampcore.tensor(a, requires_grad=True)
    out = F.max_pool2d(x, (2, 3))
    expected = ref.pool2d(a[None], 1, 1, 0, "max")[0, :, :4, :6].reshape(2, 2, 2, 2, 3).max((2, 4))
    np.testing.assert_array_equal(out.numpy(), expected)  # NaN propagates, as np.max
    out.sum().backward()
    grad = x.grad.numpy()
    assert grad[1, 0, 1] == 1.0 and grad[1, :2, :3].sum() == 1.0  # the NaN window sends it to the NaN only
    assert grad.sum() == out.numel() and not grad[:, 4, :].any() and not grad[:, :, 6].any()
    assert gradcheck(lambda t: F.max_pool2d(t, (2, 3)), [distinct(1, 2, 5, 7)])


def test_max_pool_sends_the_gradient_to_the_first_maximum():
    x = ampcore.tensor([[[[1.0, 1.0], [0.0, 1.0]]]], requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[1.0, 0.0], [0.0, 0.0]])


def test_max_pool_gradient_never_goes_to_padding_when_the_window_is_all_minus_inf():
    # torch only looks at real elements: each -inf input gets its window's gradient, none is lost in the padding
    x = ampcore.tensor(np.full((1, 1, 2, 2), -np.inf, np.float32), requires_grad=True)
    out = F.max_pool2d(x, 2, padding=1)
    np.testing.assert_array_equal(out.numpy(), np.full((1, 1, 2, 2), -np.inf))
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[1.0, 1.0], [1.0, 1.0]])
    y = ampcore.tensor([[[[-np.inf, -np.inf, 3.0], [-np.inf, -np.inf, -np.inf]]]], requires_grad=True)
    F.max_pool2d(y, 3, stride=1, padding=1).sum().backward()  # windows 0, 3: first real -inf; 1, 2, 4, 5: the 3
    np.testing.assert_array_equal(y.grad.numpy()[0, 0], [[2.0, 0.0, 4.0], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16], ids=str)
@pytest.mark.parametrize("padding,count_include_pad", [(0, True), (1, False)])
def test_low_precision_avg_pool_sums_in_float32_and_rounds_once(dtype, padding, count_include_pad):
    # a 32 x 32 window of values up to 6e4 sums to ~3e7: inf in float16, though the mean is ~3e4
    x = ampcore.tensor((np.random.default_rng(0).random((1, 2, 32, 32)) * 6e4).astype(dtype.numpy), dtype=dtype)
    out = F.avg_pool2d(x, 32, 1, padding, count_include_pad=count_include_pad)
    assert out.dtype is dtype
    assert_close(out, ref.pool2d(f64(x), 32, 1, padding, "avg", count_include_pad), n=32 * 32)


def test_avg_pool_divisor_override_and_unbatched_input():
    x = randn(3, 4, 4)
    out = F.avg_pool2d(x, 2, divisor_override=3)
    np.testing.assert_allclose(out.numpy(), ref.pool2d(f64(x)[None], 2, 2, 0, "avg")[0] * 4 / 3, rtol=1e-6)


def test_pooling_errors_name_the_values():
    with pytest.raises(ValueError, match=r"padding 2 must be at most half the effective kernel size \(3, 3\)"):
        F.max_pool2d(ampcore.ones(1, 1, 5, 5), 3, padding=2)
    with pytest.raises(ValueError, match=r"4-D \(N, C, H, W\) or 3-D \(C, H, W\) input, got shape \(5, 5\)"):
        F.avg_pool2d(ampcore.ones(5, 5), 2)
    with pytest.raises(ValueError, match=r"kernel_size must be an int or a sequence of 2 ints, got \(1, 2, 3\)"):
        F.max_pool2d(ampcore.ones(1, 1, 5, 5), (1, 2, 3))
    with pytest.raises(NotImplementedError, match="ceil_mode"):
        F.max_pool2d(ampcore.ones(1, 1, 5, 5), 2, ceil_mode=True)
