"""ampcore.nn: Module registration and state, layers against NumPy float64 references, init, clipping."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore import nn

RTOL = {dt.float32: 2e-5, dt.bfloat16: 2e-2}


def close(actual, expected, dtype=dt.float32, atol=1e-5):
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=RTOL[dtype], atol=atol)


def t64(a):
    return np.asarray(a.numpy(), dtype=np.float64)


@pytest.fixture(autouse=True)
def _seed():
    ampcore.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 5), nn.ReLU(), nn.Linear(5, 2))
        self.register_buffer("scale", ampcore.ones(1))
        self.register_buffer("scratch", ampcore.zeros(2), persistent=False)

    def forward(self, x):
        return self.head(self.bn(self.conv(x))) * self.scale


def snapshot(module):
    return {k: v.numpy().copy() for k, v in module.state_dict().items()}


def assert_snapshot_equal(module, snap):
    now = snapshot(module)
    assert now.keys() == snap.keys()
    for k in snap:
        np.testing.assert_array_equal(now[k], snap[k], err_msg=k)


# --------------------------------------------------------------------------- Parameter and Module
def test_parameter_is_a_leaf_tensor_that_requires_grad_and_shares_the_array():
    t = ampcore.randn(3)
    p = nn.Parameter(t)
    assert isinstance(p, ampcore.Tensor) and p.requires_grad and p.is_leaf
    assert p._data is t._data and "Parameter containing" in repr(p)
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    with pytest.raises(TypeError, match="floating"):
        nn.Parameter(ampcore.tensor([1, 2]))
    with pytest.raises(TypeError, match="ampcore.Tensor"):
        nn.Parameter(np.zeros(2))


def test_setattr_registers_parameters_children_and_buffers():
    m = Block()
    assert set(m._parameters) == set() and set(m._modules) == {"conv", "bn", "head"}
    assert set(m._buffers) == {"scale", "scratch"}
    with pytest.raises(TypeError, match="as parameter 'weight'"):
        m.conv.weight = ampcore.zeros(3, 2, 3, 3)
    m.conv.bias = None
    assert m.conv.bias is None and "conv.bias" not in dict(m.named_parameters())
    m.extra = nn.Parameter(ampcore.zeros(1))
    assert "extra" in dict(m.named_parameters())
    del m.extra
    assert "extra" not in dict(m.named_parameters())
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = m.nope


def test_assigning_before_init_is_a_clear_error():
    class Forgot(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ampcore.zeros(1))

    with pytest.raises(AttributeError, match=r"call super\(\)\.__init__\(\) first"):
        Forgot()


def test_named_parameters_use_dotted_names_and_list_shared_parameters_once():
    m = Block()
    names = [n for n, _ in m.named_parameters()]
    assert names == [
        "conv.weight",
        "conv.bias",
        "bn.weight",
        "bn.bias",
        "head.1.weight",
        "head.1.bias",
        "head.3.weight",
        "head.3.bias",
    ]
    tied = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    tied[1].weight = tied[0].weight
    assert [n for n, _ in tied.named_parameters()] == ["0.weight", "0.bias", "1.bias"]
    assert len(list(tied.parameters())) == 3
    assert "1.weight" in tied.state_dict()  # state_dict lists a tied tensor under every name, like torch
    assert [n for n, _ in m.named_buffers()] == [
        "scale",
        "scratch",
        "bn.running_mean",
        "bn.running_var",
        "bn.num_batches_tracked",
    ]
    assert len(list(m.modules())) == 8 and len(list(m.children())) == 3


def test_state_dict_holds_detached_copies_of_parameters_and_persistent_buffers():
    m = Block()
    sd = m.state_dict()
    assert "scratch" not in sd and "scale" in sd and "bn.num_batches_tracked" in sd
    assert all(not v.requires_grad and v._data is not m.state_dict(keep_vars=True)[k]._data for k, v in sd.items())
    before = sd["conv.weight"].numpy().copy()
    with ampcore.no_grad():
        m.conv.weight.add_(1.0)
    np.testing.assert_array_equal(sd["conv.weight"].numpy(), before)


def test_state_dict_round_trip_into_a_fresh_module_gives_identical_outputs():
    m = Block()
    x = ampcore.randn(4, 2, 4, 4)
    m(x)  # update the batch-norm running statistics
    m.eval()
    fresh = Block().eval()
    result = fresh.load_state_dict(m.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(fresh(x).numpy(), m(x).numpy())
    assert fresh.bn.num_batches_tracked.item() == 1


@pytest.mark.parametrize("problem", ["missing", "unexpected", "shape", "dtype", "not_a_tensor"])
def test_load_state_dict_errors_name_the_problem_and_change_nothing(problem):
    m = Block()
    before = snapshot(m)
    sd = Block().state_dict()  # different values everywhere
    if problem == "missing":
        del sd["head.1.bias"]
        match = "missing key.*'head.1.bias'"
    elif problem == "unexpected":
        sd["head.9.weight"] = ampcore.zeros(1)
        match = "unexpected key.*'head.9.weight'"
    elif problem == "shape":
        sd["head.3.weight"] = ampcore.zeros(7, 5)
        match = r"'head.3.weight': shape \(7, 5\) in the state dict, but \(2, 5\) in the module"
    elif problem == "dtype":
        sd["conv.bias"] = sd["conv.bias"].to(dt.bfloat16)
        match = "'conv.bias': dtype bfloat16 in the state dict, but float32"
    else:
        sd["scale"] = [1.0]
        match = "'scale': expected a Tensor, got list"
    with pytest.raises(nn.StateDictError, match=match):
        m.load_state_dict(sd)
    assert_snapshot_equal(m, before)


def test_load_state_dict_non_strict_reports_missing_and_unexpected_keys_and_loads_the_rest():
    m = nn.Linear(3, 2)
    src = nn.Linear(3, 2)
    result = m.load_state_dict({"weight": src.weight, "extra": ampcore.zeros(1)}, strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["extra"]
    np.testing.assert_array_equal(m.weight.numpy(), src.weight.numpy())
    assert m.weight._data is not src.weight._data  # loaded values are copies
    with pytest.raises(nn.StateDictError, match="shape"):
        m.load_state_dict({"weight": ampcore.zeros(2, 2)}, strict=False)


def test_train_eval_zero_grad_and_apply_reach_every_submodule():
    m = Block()
    assert m.training and m.head[1].training
    assert m.eval() is m and not any(sub.training for sub in m.modules())
    m.train()
    assert all(sub.training for sub in m.modules())
    m(ampcore.randn(2, 2, 4, 4)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(not p.grad.numpy().any() for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen[-1] == "Block" and seen.count("Linear") == 2


def test_to_dtype_casts_floating_parameters_and_buffers_in_place_but_not_integer_buffers():
    m = Block()
    weight = m.conv.weight
    m(ampcore.randn(2, 2, 4, 4)).sum().backward()
    expected = weight.numpy().astype(dt.bfloat16.numpy)
    assert m.to(dt.bfloat16) is m
    assert m.conv.weight is weight and weight.dtype is dt.bfloat16 and weight.grad.dtype is dt.bfloat16
    np.testing.assert_array_equal(weight.numpy(), expected)
    assert m.bn.running_mean.dtype is dt.bfloat16 and m.bn.num_batches_tracked.dtype is dt.int64
    m.float()
    assert weight.dtype is dt.float32
    with pytest.raises(TypeError, match="floating"):
        m.to(dt.int64)
    assert m.to("cpu") is m and weight.device == ampcore.device("cpu")


def test_repr_shows_the_tree_and_settings():
    text = repr(nn.Sequential(nn.Linear(2, 3, bias=False), nn.GELU("tanh")))
    assert "(0): Linear(in_features=2, out_features=3, bias=False)" in text
    assert "(1): GELU(approximate='tanh')" in text


def test_sequential_and_module_list_index_slice_and_length():
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1)]
    seq = nn.Sequential(*layers)
    assert len(seq) == 3 and seq[0] is layers[0] and seq[-1] is layers[2]
    assert isinstance(seq[1:], nn.Sequential) and list(seq[1:]) == layers[1:]
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert [n for n, _ in named.named_children()] == ["fc", "act"]
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    ml = nn.ModuleList(layers)
    ml.append(nn.Sigmoid())
    assert len(ml) == 4 and ml[3].__class__ is nn.Sigmoid
    assert len(list(ml.parameters())) == 4
    del ml[0]
    assert len(ml) == 3 and ml[0] is layers[1]


def children(m):
    return [(name, type(child).__name__) for name, child in m.named_children()]


def test_sequential_delete_renumbers_so_append_never_replaces_a_module():
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Tanh())
    del seq[0]
    seq.append(nn.Sigmoid())
    assert children(seq) == [("0", "ReLU"), ("1", "Tanh"), ("2", "Sigmoid")]  # torch's result
    seq = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.GELU())
    del seq[::2]
    assert children(seq) == [("0", "Tanh"), ("1", "GELU")]
    named = nn.Sequential(OrderedDict([("a", nn.ReLU()), ("b", nn.Tanh()), ("c", nn.Sigmoid())]))
    del named[1:2]
    assert children(named) == [("0", "ReLU"), ("1", "Sigmoid")]  # torch renumbers named ones too
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh(), nn.Sigmoid()])
    del ml[0]
    ml.append(nn.GELU())
    assert children(ml) == [("0", "Tanh"), ("1", "Sigmoid"), ("2", "GELU")]


@pytest.mark.parametrize(
    "register",
    [
        lambda: nn.Sequential(nn.Linear(2, 2)).register_parameter("0", nn.Parameter(ampcore.zeros(1))),
        lambda: nn.Linear(2, 2).add_module("weight", nn.ReLU()),
        lambda: nn.Linear(2, 2).register_buffer("weight", ampcore.zeros(1)),
        lambda: nn.Linear(2, 2).register_buffer("bias", None),
        lambda: with_attribute("foo", 3).add_module("foo", nn.ReLU()),
        lambda: with_attribute("foo", 3).register_parameter("foo", None),
        lambda: with_attribute("foo", 3).register_buffer("foo", ampcore.zeros(1)),
        lambda: nn.Module().add_module("forward", nn.ReLU()),
    ],
    ids=[
        "param-over-child",
        "child-over-param",
        "buffer-over-param",
        "none-buffer-over-param",
        "child-over-plain",
        "param-over-plain",
        "buffer-over-plain",
        "child-over-method",
    ],
)
def test_registering_over_an_attribute_of_another_kind_raises_key_error(register):
    with pytest.raises(KeyError, match="attribute '(0|weight|bias|foo|forward)' already exists"):
        register()


def with_attribute(name, value):
    m = nn.Module()
    setattr(m, name, value)
    return m


def test_registration_keeps_the_existing_attribute_when_it_refuses_and_replaces_its_own_kind():
    lin = nn.Linear(2, 2)
    weight = lin.weight
    with pytest.raises(KeyError, match=r"choose another name or remove it first with delattr\(module, 'weight'\)"):
        lin.add_module("weight", nn.ReLU())
    assert lin.weight is weight and "weight" not in lin._modules
    seq = nn.Sequential(nn.ReLU())
    seq.add_module("0", nn.Tanh())  # a child replaces a child, as in torch
    assert children(seq) == [("0", "Tanh")]
    lin.register_parameter("bias", None)  # a parameter replaces a parameter
    assert lin.bias is None
    lin.weight = None
    lin.weight = nn.Parameter(ampcore.zeros(2, 2))  # assignment still rebinds, as in torch
    assert lin.weight.shape == (2, 2)


# --------------------------------------------------------------------------- layers vs NumPy float64
def test_linear_forward_matches_numpy_and_default_init_range():
    layer = nn.Linear(20, 7)
    x = ampcore.randn(5, 20)
    w, b = t64(layer.weight), t64(layer.bias)
    close(layer(x).numpy(), t64(x) @ w.T + b)
    bound = 1 / math.sqrt(20)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    big = nn.Linear(400, 300)
    w = t64(big.weight)
    assert np.abs(w).max() <= 1 / 20 and abs(w.std() - (1 / 20) / math.sqrt(3)) < 1e-3


def test_linear_gradients_match_numpy_and_come_back_in_the_weights_layout():
    layer = nn.Linear(6, 4)
    x = ampcore.randn(5, 6, requires_grad=True)
    g = ampcore.randn(5, 4)
    layer(x).backward(g)
    gv = t64(g)
    close(layer.weight.grad.numpy(), gv.T @ t64(x))
    close(layer.bias.grad.numpy(), gv.sum(0))
    close(x.grad.numpy(), gv @ t64(layer.weight))
    # the fused optimizer step and the scaler's unscale read it without a transposing copy
    assert layer.weight.grad._data.flags.c_contiguous


def conv2d_reference(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (x.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for oc in range(o):
        g = oc // per_group
        for i in range(oh):
            for j in range(ow):
                patch = x[
                    :,
                    g * cg : (g + 1) * cg,
                    i * stride[0] : i * stride[0] + dilation[0] * (kh - 1) + 1 : dilation[0],
                    j * stride[1] : j * stride[1] + dilation[1] * (kw - 1) + 1 : dilation[1],
                ]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3)) + (b[oc] if b is not None else 0.0)
    return out


@pytest.mark.parametrize(
    "kwargs", [dict(), dict(stride=2, padding=1), dict(padding=(2, 1), dilation=2), dict(groups=2, bias=False)]
)
def test_conv2d_forward_matches_numpy(kwargs):
    conv = nn.Conv2d(4, 6, 3, **kwargs)
    x = ampcore.randn(2, 4, 7, 6)
    ref = conv2d_reference(
        t64(x),
        t64(conv.weight),
        t64(conv.bias) if conv.bias is not None else None,
        conv.stride,
        conv.padding,
        conv.dilation,
        conv.groups,
    )
    close(conv(x).numpy(), ref)


@pytest.mark.parametrize("stride", [2, (1, 2)])
def test_conv2d_rejects_same_padding_with_a_stride_in_the_constructor(stride):
    with pytest.raises(ValueError, match=r"padding='same' is not supported for strided convolutions, got stride="):
        nn.Conv2d(2, 2, 3, stride=stride, padding="same")
    assert nn.Conv2d(2, 2, 3, padding="same")(ampcore.ones(1, 2, 5, 5)).shape == (1, 2, 5, 5)


def test_conv2d_default_init_uses_fan_in_of_one_group():
    conv = nn.Conv2d(8, 4, (3, 2), groups=2)
    assert conv.weight.shape == (4, 4, 3, 2)
    bound = 1 / math.sqrt(4 * 3 * 2)
    assert np.abs(t64(conv.weight)).max() <= bound and np.abs(t64(conv.bias)).max() <= bound
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)


def test_layer_norm_and_group_norm_match_numpy():
    x = ampcore.randn(3, 4, 6)
    ln = nn.LayerNorm(6)
    with ampcore.no_grad():
        ln.weight.copy_(ampcore.randn(6))
        ln.bias.copy_(ampcore.randn(6))
    xv = t64(x)
    norm = (xv - xv.mean(-1, keepdims=True)) / np.sqrt(xv.var(-1, keepdims=True) + 1e-5)
    close(ln(x).numpy(), norm * t64(ln.weight) + t64(ln.bias))
    gn = nn.GroupNorm(2, 4)
    xg = ampcore.randn(2, 4, 3, 3)
    v = t64(xg).reshape(2, 2, -1)
    ref = ((v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5)).reshape(2, 4, 3, 3)
    close(gn(xg).numpy(), ref)


def test_batch_norm_uses_batch_stats_in_training_and_running_stats_in_eval():
    bn = nn.BatchNorm2d(3, momentum=0.25)
    x = ampcore.randn(4, 3, 2, 2) * 2.0 + 1.0
    xv = t64(x)
    mean, var = xv.mean((0, 2, 3)), xv.var((0, 2, 3))
    expected = (xv - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
    close(bn(x).numpy(), expected, atol=1e-4)
    assert bn.running_mean.dtype is dt.float32 and bn.num_batches_tracked.item() == 1
    close(bn.running_mean.numpy(), 0.25 * mean)
    close(bn.running_var.numpy(), 0.75 + 0.25 * var * 16 / 15)  # unbiased, as torch
    bn.eval()
    rm, rv = t64(bn.running_mean), t64(bn.running_var)
    close(bn(x).numpy(), (xv - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5), atol=1e-4)
    assert bn.num_batches_tracked.item() == 1
    with pytest.raises(ValueError, match="4-D"):
        bn(ampcore.randn(3, 3))


def test_batch_norm_with_momentum_none_keeps_a_cumulative_average():
    bn = nn.BatchNorm2d(2, momentum=None)
    xs = [ampcore.randn(3, 2, 2, 2) for _ in range(3)]
    for x in xs:
        bn(x)
    close(bn.running_mean.numpy(), np.mean([t64(x).mean((0, 2, 3)) for x in xs], axis=0))


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_refused_batch_changes_no_state_and_an_empty_batch_only_counts(momentum):
    bn = nn.BatchNorm2d(3, momentum=momentum)
    bn(ampcore.randn(4, 3, 2, 2))
    snap = snapshot(bn)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(ampcore.randn(1, 3, 1, 1))
    assert_snapshot_equal(bn, snap)  # num_batches_tracked included
    assert bn(ampcore.randn(0, 3, 2, 2)).shape == (0, 3, 2, 2)
    np.testing.assert_array_equal(bn.running_mean.numpy(), snap["running_mean"])
    np.testing.assert_array_equal(bn.running_var.numpy(), snap["running_var"])
    assert bn.num_batches_tracked.item() == 2  # torch counts the empty batch


def test_embedding_looks_up_rows_and_zeroes_the_padding_row():
    emb = nn.Embedding(10, 4, padding_idx=-1)
    assert emb.padding_idx == 9 and not emb.weight.numpy()[9].any()
    idx = ampcore.tensor([[1, 9], [3, 1]])
    out = emb(idx)
    np.testing.assert_array_equal(out.numpy(), emb.weight.numpy()[[[1, 9], [3, 1]]])
    out.sum().backward()
    grad = emb.weight.grad.numpy()
    assert grad[1].tolist() == [2.0] * 4 and not grad[9].any()


def test_dropout_zeroes_a_fraction_and_scales_in_training_and_is_identity_in_eval():
    drop = nn.Dropout(0.25)
    x = ampcore.ones(200, 100)
    y = drop(x).numpy()
    assert abs((y == 0).mean() - 0.25) < 0.02 and set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    drop.eval()
    assert drop(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_dropout_inplace_writes_into_the_input_and_keeps_its_gradient_flowing():
    drop = nn.Dropout(0.5, inplace=True)
    assert repr(drop) == "Dropout(p=0.5, inplace=True)"
    x = ampcore.ones(50, 40)
    y = drop(x)
    assert y is x and (x.numpy() == 0).any() and set(np.unique(x.numpy())) <= {0.0, 2.0}
    lin = nn.Linear(4, 4)
    h = lin(ampcore.ones(64, 4))
    assert drop(h) is h
    kept = h.numpy() != 0
    h.sum().backward()
    # d(sum)/d(bias) counts the kept (scaled by 2) entries of each column
    np.testing.assert_allclose(lin.bias.grad.numpy(), 2.0 * kept.sum(0))
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        drop(ampcore.ones(3, requires_grad=True))
    drop.eval()
    assert drop(h) is h  # the identity in eval, as in torch


def test_relu_inplace_in_a_graph_gives_torch_gradients():
    lin = nn.Linear(3, 5)
    x = ampcore.randn(8, 3)
    ref = nn.Linear(3, 5)
    ref.load_state_dict(lin.state_dict())
    nn.Sequential(lin, nn.ReLU(inplace=True))(x).sum().backward()
    nn.Sequential(ref, nn.ReLU())(x).sum().backward()
    np.testing.assert_array_equal(lin.weight.grad.numpy(), ref.weight.grad.numpy())


def test_activations_match_numpy():
    x = ampcore.randn(4, 5) * 3.0
    v = t64(x)
    erf = np.vectorize(math.erf)
    cases = {
        nn.ReLU(): np.maximum(v, 0),
        nn.Sigmoid(): 1 / (1 + np.exp(-v)),
        nn.Tanh(): np.tanh(v),
        nn.SiLU(): v / (1 + np.exp(-v)),
        nn.GELU(): 0.5 * v * (1 + erf(v / math.sqrt(2))),
        nn.GELU("tanh"): 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
        nn.Softmax(dim=0): np.exp(v) / np.exp(v).sum(0),
        nn.LogSoftmax(dim=1): v - np.log(np.exp(v).sum(1))[:, None],
        nn.Identity(7, x=1): v,
        nn.Flatten(0): v.reshape(-1),
    }
    for module, ref in cases.items():
        close(module(x).numpy(), ref, atol=2e-5)
    with pytest.raises(TypeError, match="dim"):
        nn.Softmax()


def test_losses_match_numpy():
    logits = ampcore.randn(6, 4)
    target = ampcore.tensor([0, 3, 1, 1, 2, 0])
    v, tv = t64(logits), target.numpy()
    logp = v - np.log(np.exp(v).sum(1, keepdims=True))
    close(nn.CrossEntropyLoss()(logits, target).item(), -logp[np.arange(6), tv].mean())
    close(
        nn.NLLLoss(reduction="sum")(ampcore.tensor(logp.astype(np.float32)), target).item(),
        -logp[np.arange(6), tv].sum(),
    )
    a, b = ampcore.randn(5, 3), ampcore.randn(5, 3)
    d = t64(a) - t64(b)
    close(nn.MSELoss()(a, b).item(), (d**2).mean())
    close(nn.L1Loss(reduction="sum")(a, b).item(), np.abs(d).sum())
    close(nn.SmoothL1Loss(beta=0.5)(a, b).item(), np.where(np.abs(d) < 0.5, 0.5 * d**2 / 0.5, np.abs(d) - 0.25).mean())
    y = ampcore.rand(5, 3)
    p = 1 / (1 + np.exp(-t64(a)))
    bce = -(t64(y) * np.log(p) + (1 - t64(y)) * np.log(1 - p))
    close(nn.BCEWithLogitsLoss()(a, y).item(), bce.mean())
    close(nn.BCELoss()(ampcore.tensor(p.astype(np.float32)), y).item(), bce.mean(), atol=1e-4)
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")


def mha_reference(q, k, v, w_in, b_in, w_out, b_out, heads, mask=None):
    """batch-first float64 multi-head attention; returns (output, weights averaged over heads)."""
    e = q.shape[-1]
    d = e // heads
    qp, kp, vp = (x @ w_in[i * e : (i + 1) * e].T + b_in[i * e : (i + 1) * e] for i, x in enumerate((q, k, v)))
    split = lambda x: x.reshape(x.shape[0], x.shape[1], heads, d).transpose(0, 2, 1, 3)  # noqa: E731
    scores = split(qp) @ split(kp).transpose(0, 1, 3, 2) / math.sqrt(d)
    if mask is not None:
        scores = scores + mask
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    out = (w @ split(vp)).transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], e)
    return out @ w_out.T + b_out, w.mean(1)


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_matches_numpy_with_and_without_weights(batch_first):
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first)
    with ampcore.no_grad():
        mha.in_proj_bias.copy_(ampcore.randn(24) * 0.1)
        mha.out_proj.bias.copy_(ampcore.randn(8) * 0.1)
    q, k = ampcore.randn(2, 5, 8), ampcore.randn(2, 3, 8)
    pad = ampcore.tensor([[False, False, True], [False, False, False]])
    params = [t64(p) for p in (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)]
    mask = np.where(pad.numpy(), -np.inf, 0.0)[:, None, None, :]
    ref_out, ref_w = mha_reference(t64(q), t64(k), t64(k), *params, heads=2, mask=mask)
    args = (q, k, k) if batch_first else (q.transpose(0, 1), k.transpose(0, 1), k.transpose(0, 1))
    out, weights = mha(*args, key_padding_mask=pad)
    out = out if batch_first else out.transpose(0, 1)
    close(out.numpy(), ref_out, atol=1e-5)
    close(weights.numpy(), ref_w, atol=1e-6)
    assert not weights.numpy()[0, :, 2].any()
    fast, none = mha(*args, key_padding_mask=pad, need_weights=False)
    assert none is None
    close((fast if batch_first else fast.transpose(0, 1)).numpy(), ref_out, atol=1e-5)
    per_head = mha(*args, key_padding_mask=pad, average_attn_weights=False)[1]
    assert per_head.shape == (2, 2, 5, 3)


def test_multihead_attention_self_attention_unbatched_with_causal_mask():
    mha = nn.MultiheadAttention(4, 1)
    x = ampcore.randn(3, 4)
    params = [t64(p) for p in (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)]
    causal = np.triu(np.full((3, 3), -np.inf), 1)
    ref_out, ref_w = mha_reference(t64(x)[None], t64(x)[None], t64(x)[None], *params, heads=1, mask=causal)
    out, w = mha(x, x, x, is_causal=True)
    close(out.numpy(), ref_out[0])
    close(w.numpy(), ref_w[0], atol=1e-6)
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(6, 4)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_float16_scales_queries_before_the_product_so_scores_stay_finite(need_weights):
    # Every projected value is 0.7 * 64 = 44.8: q . k = 64 * 44.8**2 overflows float16, q / 8 . k does not.
    mha = nn.MultiheadAttention(64, 1).half()
    with ampcore.no_grad():
        mha.in_proj_weight.fill_(0.7)
    x = ampcore.ones(2, 1, 64, dtype=dt.float16)
    params = [t64(p) for p in (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)]
    ref_out, ref_w = mha_reference(
        t64(x).transpose(1, 0, 2), t64(x).transpose(1, 0, 2), t64(x).transpose(1, 0, 2), *params, heads=1
    )
    out, weights = mha(x, x, x, need_weights=need_weights)
    np.testing.assert_allclose(t64(out.transpose(0, 1)), ref_out, rtol=4 * 2.0**-10, atol=4 * 2.0**-10 * 64)
    if need_weights:
        np.testing.assert_array_equal(t64(weights), ref_w)  # exactly [[0.5, 0.5], [0.5, 0.5]]


# --------------------------------------------------------------------------- init
def test_init_functions_fill_with_torchs_distributions():
    w = nn.Parameter(ampcore.empty(200, 300))
    nn.init.xavier_uniform_(w)
    bound = math.sqrt(6 / 500)
    assert np.abs(t64(w)).max() <= bound and abs(t64(w).std() - bound / math.sqrt(3)) < 2e-3
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(t64(w).std() - math.sqrt(2 / 300)) < 2e-3
    nn.init.normal_(w, 1.0, 0.5, generator=ampcore.Generator(1))
    assert abs(t64(w).mean() - 1.0) < 0.01
    assert nn.init.zeros_(w) is w and not w.numpy().any()
    nn.init.ones_(w)
    assert (w.numpy() == 1).all() and w.is_leaf and w.grad_fn is None
    b = nn.Parameter(ampcore.empty(64, 64, dtype=dt.bfloat16))
    nn.init.uniform_(b, -2, 2)
    assert b.dtype is dt.bfloat16 and np.abs(t64(b)).max() <= 2
    with pytest.raises(ValueError, match="fan in"):
        nn.init.xavier_uniform_(ampcore.empty(3))
    assert nn.init.calculate_gain("tanh") == 5 / 3


# --------------------------------------------------------------------------- clip_grad_norm_
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_matches_numpy_and_scales_every_gradient(norm_type):
    params = [nn.Parameter(ampcore.randn(5, 4)), nn.Parameter(ampcore.randn(7))]
    for p in params:
        p.grad = ampcore.randn(*p.shape) * 3.0
    grads = [t64(p.grad) for p in params]
    flat = np.concatenate([g.ravel() for g in grads])
    expected = np.abs(flat).max() if math.isinf(norm_type) else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    total = nn.utils.clip_grad_norm_(params, max_norm=1.0, norm_type=norm_type)
    assert isinstance(total, ampcore.Tensor) and total.ndim == 0
    close(total.item(), expected, atol=1e-5)
    coef = min(1.0 / (expected + 1e-6), 1.0)
    for p, g in zip(params, grads):
        close(p.grad.numpy(), g * coef, atol=1e-6)


def test_clip_grad_norm_leaves_small_gradients_alone_and_can_refuse_non_finite_norms():
    p = nn.Parameter(ampcore.zeros(3))
    p.grad = ampcore.tensor([0.1, 0.2, 0.2])
    assert abs(nn.utils.clip_grad_norm_(p, 10.0).item() - 0.3) < 1e-6
    close(p.grad.numpy(), [0.1, 0.2, 0.2])
    p.grad = ampcore.tensor([1.0, math.inf, 0.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert math.isinf(p.grad.numpy()[1])
    bf = nn.Parameter(ampcore.zeros(4, dtype=dt.bfloat16))
    bf.grad = ampcore.full((4,), 2.0, dtype=dt.bfloat16)
    total = nn.utils.clip_grad_norm_([bf], 1.0)
    assert total.dtype is dt.float32 and bf.grad.dtype is dt.bfloat16
    close(bf.grad.numpy(), [0.5] * 4, dt.bfloat16)


def test_parameters_to_vector_and_back():
    m = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(m.parameters())
    assert vec.shape == (8,)
    nn.utils.vector_to_parameters(vec * 2.0, m.parameters())
    np.testing.assert_allclose(nn.utils.parameters_to_vector(m.parameters()).numpy(), vec.numpy() * 2)
    with pytest.raises(ValueError, match="8 elements"):
        nn.utils.vector_to_parameters(ampcore.zeros(3), m.parameters())


def test_nn_public_surface():
    assert {
        "functional",
        "utils",
        "init",
        "Module",
        "Parameter",
        "Linear",
        "MultiheadAttention",
        "CrossEntropyLoss",
    } <= set(nn.__all__)
    assert all(hasattr(nn, name) for name in nn.__all__)


# --------------------------------------------------------------------------- ModuleDict
def test_module_dict_registers_its_modules_for_parameters_and_state_dict():
    d = nn.ModuleDict({"wte": nn.Embedding(5, 3), "h": nn.ModuleList([nn.Linear(3, 3)]), "ln_f": nn.LayerNorm(3)})
    assert list(d) == ["wte", "h", "ln_f"] and len(d) == 3 and "h" in d and "nope" not in d
    assert set(d.state_dict()) == {"wte.weight", "h.0.weight", "h.0.bias", "ln_f.weight", "ln_f.bias"}
    assert len(list(d.parameters())) == 5

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(5, 3), lm=nn.Linear(3, 5)))

    assert sorted(GPT().state_dict()) == [
        "transformer.lm.bias",
        "transformer.lm.weight",
        "transformer.wte.weight",
    ]


def test_module_dict_behaves_as_an_ordered_dict_of_modules():
    relu, tanh = nn.ReLU(), nn.Tanh()
    d = nn.ModuleDict([("a", relu), ("b", tanh)])
    assert d["a"] is relu and list(d.keys()) == ["a", "b"] and list(d.values()) == [relu, tanh]
    assert list(d.items()) == [("a", relu), ("b", tanh)]
    d["c"] = nn.Sigmoid()
    d.update({"a": tanh})
    assert d["a"] is tanh and list(d) == ["a", "b", "c"]
    d.update(nn.ModuleDict({"z": relu}))
    assert d.pop("b") is tanh and list(d) == ["a", "c", "z"]
    del d["c"]
    assert list(d) == ["a", "z"]
    d.clear()
    assert len(d) == 0 and list(d.parameters()) == []


def test_module_dict_errors_name_the_key():
    d = nn.ModuleDict({"a": nn.ReLU()})
    with pytest.raises(KeyError, match=r"no module named 'b' in this ModuleDict; it has \['a'\]"):
        d["b"]
    with pytest.raises(KeyError, match="'b'"):
        del d["b"]
    with pytest.raises(TypeError, match="is not a Module subclass"):
        d["x"] = 3
    with pytest.raises(TypeError, match=r"element 0 must be a \(name, module\) pair"):
        nn.ModuleDict([nn.ReLU()])


def test_assigning_over_a_child_or_parameter_keeps_its_place_as_in_torch():
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
    seq[0] = nn.Linear(2, 2)
    setattr(seq, "0", nn.Identity())  # an existing name: the Sequential keeps its order
    assert [type(m).__name__ for m in seq] == ["Identity", "ReLU", "Linear"]
    layer = nn.Linear(2, 2)
    names = [n for n, _ in layer.named_parameters()]
    layer.weight = nn.Parameter(ampcore.zeros(2, 2))
    assert [n for n, _ in layer.named_parameters()] == names == ["weight", "bias"]
