"""The layers of existing functionals: Conv1d, BatchNorm1d/3d, MaxPool2d, AvgPool2d, and torch's module paths."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore import nn
from ampcore.nn import functional as F

rng = np.random.default_rng(0)


def test_conv1d_is_f_conv1d_with_its_own_parameters_and_torchs_init_range():
    conv = nn.Conv1d(3, 4, 3, stride=2, padding=1, bias=True)
    x = ampcore.tensor(rng.standard_normal((2, 3, 9)).astype(np.float32))
    want = F.conv1d(x, conv.weight, conv.bias, 2, 1)
    assert np.array_equal(conv(x).detach().numpy(), want.detach().numpy()) and conv(x).shape == (2, 4, 5)
    bound = 1 / np.sqrt(3 * 3)
    assert np.abs(conv.weight.detach().numpy()).max() <= bound and conv.weight.shape == (4, 3, 3)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv1d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv1d(3, 4, 3, stride=2, padding="same")


def test_batchnorm1d_normalises_2d_and_3d_input_per_channel_and_tracks_stats():
    bn = nn.BatchNorm1d(3)
    x64 = rng.standard_normal((8, 3, 5))
    out = bn(ampcore.tensor(x64.astype(np.float32))).detach().numpy().astype(np.float64)
    mean, var = x64.mean(axis=(0, 2), keepdims=True), x64.var(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(out, (x64 - mean) / np.sqrt(var + 1e-5), atol=1e-5)
    unbiased = x64.var(axis=(0, 2), ddof=1)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * unbiased, rtol=1e-6)
    assert bn(ampcore.ones(4, 3)).shape == (4, 3)
    with pytest.raises(ValueError, match=r"BatchNorm1d expects 2-D or 3-D \(N, C\) or \(N, C, L\) input"):
        bn(ampcore.ones(2, 3, 4, 5))
    with pytest.raises(ValueError, match=r"BatchNorm3d expects 5-D"):
        nn.BatchNorm3d(3)(ampcore.ones(2, 3, 4))


def test_pool_layers_are_their_functionals_with_stride_defaulting_to_the_kernel():
    x = ampcore.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    assert np.array_equal(nn.MaxPool2d(2)(x).numpy(), F.max_pool2d(x, 2, 2).numpy())
    assert np.array_equal(nn.AvgPool2d(3, stride=1, padding=1)(x).numpy(), F.avg_pool2d(x, 3, 1, 1).numpy())
    assert nn.MaxPool2d(2)(x).shape == (2, 3, 3, 3) and "kernel_size=2, stride=2" in repr(nn.AvgPool2d(2))


def test_torchs_module_paths():
    from ampcore.nn.modules.activation import MultiheadAttention
    from ampcore.nn.modules.linear import NonDynamicallyQuantizableLinear

    assert MultiheadAttention is nn.MultiheadAttention
    assert issubclass(NonDynamicallyQuantizableLinear, nn.Linear)
