"""The torch.nn.functional ops issue 37 added (pad, interpolate, the adaptive and 1-D/3-D average pools, conv3d
and the transposed convolutions, pixel_shuffle, one_hot, instance_norm, the channel dropouts,
multi_head_attention_forward): torch's values and gradients on the same inputs, and torch's CPU autocast dtypes."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
import ampcore.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(5)


def _compare(fn, *shapes, rtol=1e-12, **kwargs):
    """``fn(module, *tensors, **kwargs)`` on ampcore and torch: values, then every input's gradient."""
    arrays = [RNG.standard_normal(s) for s in shapes]
    ours = [ampcore.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, ty = fn(F, *ours, **kwargs), fn(TF, *theirs, **kwargs)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=rtol, atol=rtol)
    w = RNG.standard_normal(ty.shape)
    (y * ampcore.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=rtol)


PADS = [
    ((2, 3, 5), (2, 1)),
    ((2, 3, 4, 5), (1, 2, 3, 1)),
    ((3, 4, 5), (1, 1, 2, 2)),
    ((1, 2, 3, 4, 5), (1, 1, 2, 1, 1, 2)),
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize(("shape", "pad"), PADS)
def test_pad_modes(mode, shape, pad):
    _compare(lambda f, x: f.pad(x, pad, mode=mode), shape)


def test_constant_pad_with_a_value_and_negative_widths_crops():
    _compare(lambda f, x: f.pad(x, (-1, 2, 1, -2), value=3.0), (2, 4, 5))


def test_pad_refuses_what_torch_refuses():
    with pytest.raises(ValueError, match="unknown mode 'mirror'"):
        F.pad(ampcore.zeros(1, 2, 3), (1, 1), mode="mirror")
    with pytest.raises(ValueError, match="must be below the size"):
        F.pad(ampcore.zeros(1, 2, 3), (3, 0), mode="reflect")


INTERPOLATIONS = [
    ((2, 3, 5), {"scale_factor": 2.3, "mode": "nearest"}),
    ((2, 3, 4, 5), {"size": (7, 3), "mode": "nearest"}),
    ((2, 3, 4, 5), {"scale_factor": 1.7, "mode": "nearest-exact"}),
    ((1, 2, 3, 4, 5), {"scale_factor": (2, 1.5, 0.6), "mode": "nearest"}),
    ((2, 3, 4, 5), {"scale_factor": 0.7, "mode": "nearest", "recompute_scale_factor": True}),
    ((2, 3, 5), {"scale_factor": 2.3, "mode": "linear"}),
    ((2, 3, 4, 5), {"size": (7, 3), "mode": "bilinear"}),
    ((2, 3, 4, 5), {"scale_factor": 1.7, "mode": "bilinear", "align_corners": True}),
    ((2, 3, 4, 5), {"scale_factor": 2, "mode": "bilinear"}),
    ((1, 2, 3, 4, 5), {"size": (5, 6, 3), "mode": "trilinear"}),
    ((2, 3, 6, 7), {"size": (4, 3), "mode": "area"}),
]


@pytest.mark.parametrize(("shape", "kwargs"), INTERPOLATIONS)
def test_interpolate(shape, kwargs):
    _compare(lambda f, x: f.interpolate(x, **kwargs), shape, rtol=1e-6)  # torch's weights in float32 too


def test_interpolate_refuses_what_it_lacks():
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.interpolate(ampcore.zeros(1, 1, 2, 2), scale_factor=2, mode="bicubic")
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        F.interpolate(ampcore.zeros(1, 1, 2, 2))


POOLS = [
    (lambda f, x: f.adaptive_avg_pool2d(x, (3, 4)), (2, 3, 7, 9)),
    (lambda f, x: f.adaptive_avg_pool2d(x, 1), (2, 3, 5, 5)),
    (lambda f, x: f.adaptive_avg_pool2d(x, (None, 2)), (3, 5, 7)),
    (lambda f, x: f.adaptive_avg_pool1d(x, 4), (2, 3, 9)),
    (lambda f, x: f.adaptive_avg_pool3d(x, (2, 3, 3)), (1, 2, 4, 5, 7)),
    (lambda f, x: f.avg_pool1d(x, 3, 2, 1), (2, 3, 9)),
    (lambda f, x: f.avg_pool1d(x, 3, 2, 1, count_include_pad=False), (2, 3, 9)),
    (lambda f, x: f.avg_pool3d(x, (2, 3, 3), (2, 2, 1), 1), (1, 2, 4, 5, 5)),
    (lambda f, x: f.avg_pool3d(x, 3, 1, 1, count_include_pad=False), (1, 2, 4, 5, 5)),
    (lambda f, x: f.avg_pool3d(x, 2, divisor_override=3), (2, 4, 5, 5)),
]


@pytest.mark.parametrize(("fn", "shape"), POOLS)
def test_pools(fn, shape):
    _compare(fn, shape)


CONVS = [
    (lambda f, x, w, b: f.conv3d(x, w, b), (2, 3, 4, 5, 6), (4, 3, 2, 3, 3), (4,)),
    (
        lambda f, x, w, b: f.conv3d(x, w, b, stride=(2, 1, 2), padding=(1, 0, 2), dilation=(1, 2, 1), groups=2),
        (2, 4, 5, 5, 6),
        (6, 2, 3, 2, 3),
        (6,),
    ),
    (lambda f, x, w, b: f.conv_transpose2d(x, w, b), (2, 3, 4, 5), (3, 4, 3, 3), (4,)),
    (
        lambda f, x, w, b: f.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
        (2, 4, 4, 5),
        (4, 3, 3, 2),
        (6,),
    ),
    (
        lambda f, x, w, b: f.conv_transpose2d(
            x, w, b, stride=(2, 3), padding=(2, 0), dilation=2, output_padding=(1, 0)
        ),
        (2, 4, 4, 5),
        (4, 3, 3, 2),
        (3,),
    ),
    (lambda f, x, w, b: f.conv_transpose1d(x, w, b, stride=3, padding=2), (2, 3, 7), (3, 2, 4), (2,)),
    (
        lambda f, x, w, b: f.conv_transpose3d(x, w, b, stride=(1, 2, 2), padding=1),
        (1, 2, 3, 3, 4),
        (2, 3, 3, 3, 2),
        (3,),
    ),
]


@pytest.mark.parametrize(("fn", "x", "w", "b"), CONVS)
def test_convolutions(fn, x, w, b):
    _compare(fn, x, w, b, rtol=1e-10)


def test_pixel_shuffle_and_one_hot():
    _compare(lambda f, x: f.pixel_shuffle(x, 2), (2, 8, 3, 4))
    _compare(lambda f, x: f.pixel_unshuffle(x, 3), (2, 2, 6, 9))
    labels = [[0, 3], [2, 1]]
    assert F.one_hot(ampcore.tensor(labels), 5).tolist() == TF.one_hot(torch.tensor(labels), 5).tolist()
    assert F.one_hot(ampcore.tensor([2, 0])).tolist() == TF.one_hot(torch.tensor([2, 0])).tolist()
    with pytest.raises(ValueError, match="class index 5 is outside"):
        F.one_hot(ampcore.tensor([5]), 5)


def test_instance_norm_and_its_running_stats():
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    _compare(lambda f, x: f.instance_norm(x), (2, 3, 4, 5))
    _compare(lambda f, x, w, b: f.instance_norm(x, weight=w, bias=b), (2, 3, 6), (3,), (3,))
    a = RNG.standard_normal((2, 3, 4, 5))
    rm, rv = ampcore.zeros(3, dtype="float64"), ampcore.ones(3, dtype="float64")
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    F.instance_norm(ampcore.tensor(a), rm, rv, ampcore.tensor(w), ampcore.tensor(b), momentum=0.3)
    TF.instance_norm(torch.tensor(a), trm, trv, torch.tensor(w), torch.tensor(b), momentum=0.3)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-12)


@pytest.mark.parametrize(
    ("name", "shape"), [("dropout1d", (4, 6, 5)), ("dropout2d", (4, 6, 3, 3)), ("dropout3d", (2, 6, 2, 3, 3))]
)
def test_channel_dropout_zeroes_whole_channels(name, shape):
    x = ampcore.ones(*shape, requires_grad=True)
    y = getattr(F, name)(x, 0.5)
    planes = y.detach().numpy().reshape(shape[0] * shape[1], -1)
    assert all(len(set(p.tolist())) == 1 and p[0] in (0.0, 2.0) for p in planes)
    assert 0 < (planes[:, 0] == 0).sum() < len(planes)  # 24 channels: some dropped, some kept
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())  # the gradient is the same mask, scaled
    assert getattr(F, name)(x, 0.5, training=False) is x
    unbatched = getattr(F, name)(ampcore.ones(*shape[1:]), 0.5).numpy().reshape(shape[1], -1)
    assert all(len(set(p.tolist())) == 1 for p in unbatched)


def test_multi_head_attention_forward_is_torchs():
    e, h = 8, 2
    q, k, v = (RNG.standard_normal((4, 3, e)) for _ in range(3))
    w_in, b_in = RNG.standard_normal((3 * e, e)) * 0.3, RNG.standard_normal(3 * e) * 0.1
    w_out, b_out = RNG.standard_normal((e, e)) * 0.3, RNG.standard_normal(e) * 0.1
    bias_k, bias_v = RNG.standard_normal((1, 1, e)), RNG.standard_normal((1, 1, e))
    mask = np.triu(np.ones((4, 4), bool), 3)  # (L, S): bias_k and add_zero_attn each add a key
    padding = np.zeros((3, 4), bool)
    padding[1, 3] = True

    def run(m, f, weights):
        t = m.tensor
        return f.multi_head_attention_forward(
            *(t(a) for a in (q, k, v)),
            e,
            h,
            *(t(a) for a in (w_in, b_in, bias_k, bias_v)),
            True,
            0.0,
            t(w_out),
            t(b_out),
            training=False,
            key_padding_mask=t(padding),
            attn_mask=t(mask),
            average_attn_weights=weights,
        )

    for weights in (True, False):
        out, att = run(ampcore, F, weights)
        t_out, t_att = run(torch, TF, weights)
        np.testing.assert_allclose(out.numpy(), t_out.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(att.numpy(), t_att.numpy(), rtol=1e-12, atol=1e-12)


def test_torchs_cpu_autocast_dtypes():
    """reflect and replicate pads run in float32 under torch's CPU autocast; the others keep their input's."""
    x = RNG.standard_normal((1, 2, 4, 4))
    calls = [
        lambda f, t: f.pad(t, (1, 1, 1, 1), mode="reflect"),
        lambda f, t: f.pad(t, (1, 1, 1, 1), mode="replicate"),
        lambda f, t: f.pad(t, (1, 1, 1, 1), mode="circular"),
        lambda f, t: f.interpolate(t, scale_factor=2),
        lambda f, t: f.adaptive_avg_pool2d(t, 2),
        lambda f, t: f.avg_pool3d(t.unsqueeze(0), 2),
        lambda f, t: f.pixel_shuffle(t.repeat(1, 2, 1, 1), 2),
    ]
    for call in calls:
        with ampcore.autocast("cpu", dtype=ampcore.bfloat16):
            ours = call(F, ampcore.tensor(x, dtype="bfloat16")).dtype.name
        with torch.autocast("cpu", dtype=torch.bfloat16):
            theirs = str(call(TF, torch.tensor(x, dtype=torch.bfloat16)).dtype).removeprefix("torch.")
        assert ours == theirs
