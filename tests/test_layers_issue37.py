"""The layers issue 37 added: torch's constructor signatures and defaults, state-dict names and shapes (a torch
state dict loads), and torch's outputs and gradients on the same weights."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import ampcore
import ampcore.nn as nn

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(9)

# (layer name, constructor arguments, input shape)
LAYERS = [
    ("Conv3d", (3, 4, (2, 3, 3)), {"stride": (1, 2, 1), "padding": 1}, (2, 3, 4, 5, 6)),
    ("ConvTranspose1d", (3, 2, 4), {"stride": 3, "padding": 1}, (2, 3, 5)),
    ("ConvTranspose2d", (4, 6, 3), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}, (2, 4, 4, 5)),
    ("ConvTranspose3d", (2, 3, (3, 3, 2)), {"stride": (1, 2, 2), "bias": False}, (1, 2, 3, 3, 4)),
    ("AvgPool1d", (3, 2, 1), {}, (2, 3, 9)),
    ("AvgPool3d", ((2, 3, 3), (2, 2, 1), 1), {}, (1, 2, 4, 5, 5)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 9)),
    ("AdaptiveAvgPool2d", ((3, 2),), {}, (2, 3, 7, 5)),
    ("AdaptiveAvgPool3d", (2,), {}, (1, 2, 5, 4, 3)),
    ("Upsample", (), {"scale_factor": 2, "mode": "bilinear"}, (2, 3, 4, 5)),
    ("Upsample", (), {"size": (5, 7)}, (2, 3, 4, 5)),
    ("UpsamplingNearest2d", (), {"scale_factor": 3}, (1, 2, 3, 3)),
    ("UpsamplingBilinear2d", (), {"scale_factor": 2}, (1, 2, 3, 3)),
    ("ReflectionPad1d", (2,), {}, (2, 3, 5)),
    ("ReflectionPad2d", ((1, 2, 0, 3),), {}, (2, 3, 4, 5)),
    ("ReflectionPad3d", (1,), {}, (1, 2, 3, 4, 5)),
    ("ReplicationPad2d", (2,), {}, (2, 3, 4, 5)),
    ("ZeroPad2d", ((1, 0, 2, 1),), {}, (2, 3, 4, 5)),
    ("ConstantPad1d", (2, 3.5), {}, (2, 3, 5)),
    ("CircularPad2d", (1,), {}, (2, 3, 4, 5)),
    ("PixelShuffle", (2,), {}, (2, 8, 3, 4)),
    ("PixelUnshuffle", (2,), {}, (2, 2, 4, 6)),
    ("LeakyReLU", (0.2,), {}, (3, 7)),
    ("ELU", (), {"alpha": 0.7}, (3, 7)),
    ("SELU", (), {}, (3, 7)),
    ("Hardtanh", (-0.5, 0.5), {}, (3, 7)),
    ("ReLU6", (), {}, (3, 7)),
    ("Hardsigmoid", (), {}, (3, 7)),
    ("Hardswish", (), {}, (3, 7)),
    ("InstanceNorm1d", (3,), {}, (2, 3, 6)),
    ("InstanceNorm2d", (3,), {"affine": True}, (2, 3, 4, 5)),
    ("InstanceNorm2d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 4, 5)),
    ("InstanceNorm3d", (2,), {}, (1, 2, 3, 4, 5)),
]


def _load_torchs(ours, theirs):
    ours.load_state_dict({k: ampcore.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), LAYERS, ids=[f"{c[0]}-{i}" for i, c in enumerate(LAYERS)])
def test_a_torch_layers_state_dict_loads_and_gives_torchs_outputs(name, args, kwargs, shape):
    theirs = getattr(torch.nn, name)(*args, **kwargs).double()
    ours = getattr(nn, name)(*args, **kwargs).to(dtype="float64")
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()
    }
    _load_torchs(ours, theirs)
    a = RNG.standard_normal(shape)
    x, t = ampcore.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = ours(x), theirs(t)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-9)
    w = RNG.standard_normal(ty.shape)
    (y * ampcore.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-9)
    for (n, p), tp in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-9, atol=1e-9, err_msg=n)
    if "track_running_stats" in kwargs:
        for key in ("running_mean", "running_var"):
            np.testing.assert_allclose(ours.state_dict()[key].numpy(), theirs.state_dict()[key].numpy(), rtol=1e-6)


NEW = [
    "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "AvgPool1d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "Upsample", "ReflectionPad2d",
    "ReplicationPad2d", "ZeroPad2d", "ConstantPad2d", "PixelShuffle", "LeakyReLU", "ELU", "Hardtanh",
    "Dropout1d", "Dropout2d", "Dropout3d", "InstanceNorm2d", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
]  # fmt: skip


@pytest.mark.parametrize("name", NEW)
def test_constructor_parameters_and_defaults_are_torchs(name):
    ours = inspect.signature(getattr(nn, name).__init__).parameters
    theirs = inspect.signature(getattr(torch.nn, name).__init__).parameters
    for param, spec in theirs.items():
        if param in ("self", "args", "kwargs") or spec.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if "args" in ours and param not in ours:  # RNN, LSTM and GRU forward *args to RNNBase, as torch's do
            param_spec = inspect.signature(nn.RNNBase.__init__).parameters.get(param)
            assert param_spec is not None, f"{name}: torch's parameter {param!r} is missing"
            continue
        assert param in ours, f"{name}: torch's parameter {param!r} is missing"
        if spec.default is not inspect.Parameter.empty and param not in ("device", "dtype"):
            assert ours[param].default == spec.default, f"{name}.{param}: {ours[param].default!r} vs {spec.default!r}"


def test_conv_transpose_output_size_picks_the_output_padding():
    ours, theirs = nn.ConvTranspose2d(2, 3, 3, stride=2), torch.nn.ConvTranspose2d(2, 3, 3, stride=2)
    _load_torchs(ours, theirs)
    a = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    y, ty = ours(ampcore.tensor(a), output_size=(10, 9)), theirs(torch.tensor(a), output_size=(10, 9))
    assert y.shape == tuple(ty.shape) == (1, 3, 10, 9)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="valid sizes range from 9 to 10"):
        ours(ampcore.tensor(a), output_size=(12, 9))


def test_dropout2d_layer_follows_training_mode():
    layer = nn.Dropout2d(0.5)
    x = ampcore.ones(4, 6, 2, 2)
    assert set(np.unique(layer(x).numpy()).tolist()) <= {0.0, 2.0}
    layer.eval()
    assert layer(x) is x


@pytest.mark.parametrize(
    "kwargs", [{"add_bias_kv": True}, {"add_zero_attn": True}, {"kdim": 5, "vdim": 3}, {"batch_first": True}]
)
def test_multihead_attention_options_are_torchs(kwargs):
    ours, theirs = nn.MultiheadAttention(8, 2, **kwargs), torch.nn.MultiheadAttention(8, 2, **kwargs)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    _load_torchs(ours, theirs)
    kd, vd = kwargs.get("kdim", 8), kwargs.get("vdim", 8)
    first = (3, 4) if kwargs.get("batch_first") else (4, 3)
    q = RNG.standard_normal((*first, 8)).astype(np.float32)
    k = RNG.standard_normal((*first, kd)).astype(np.float32)
    v = RNG.standard_normal((*first, vd)).astype(np.float32)
    (out, att), (t_out, t_att) = ours(*map(ampcore.tensor, (q, k, v))), theirs(*map(torch.tensor, (q, k, v)))
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(att.detach().numpy(), t_att.detach().numpy(), rtol=1e-5, atol=1e-6)
