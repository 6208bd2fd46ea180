"""nn.Transformer and its parts: torch's module names and state dict, against a float64 NumPy encoder layer."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import ampcore
from ampcore import nn


def _layer_norm(x, w, b, eps=1e-5):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _encoder_layer_reference(x, p, nhead, norm_first):
    """torch's TransformerEncoderLayer (eval, relu), sequence-first (L, N, E), in float64."""
    length, batch, embed = x.shape
    head = embed // nhead

    def attention(h):
        qkv = h @ p["self_attn.in_proj_weight"].T + p["self_attn.in_proj_bias"]
        q, k, v = np.split(qkv, 3, axis=-1)

        def heads(t):  # (L, N, E) -> (N, H, L, d)
            return t.reshape(length, batch, nhead, head).transpose(1, 2, 0, 3)

        scores = heads(q) @ heads(k).transpose(0, 1, 3, 2) / np.sqrt(head)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        out = (weights @ heads(v)).transpose(2, 0, 1, 3).reshape(length, batch, embed)
        return out @ p["self_attn.out_proj.weight"].T + p["self_attn.out_proj.bias"]

    def feed_forward(h):
        hidden = np.maximum(h @ p["linear1.weight"].T + p["linear1.bias"], 0)
        return hidden @ p["linear2.weight"].T + p["linear2.bias"]

    def norm(h, i):
        return _layer_norm(h, p[f"norm{i}.weight"], p[f"norm{i}.bias"])

    if norm_first:
        x = x + attention(norm(x, 1))
        return x + feed_forward(norm(x, 2))
    x = norm(x + attention(x), 1)
    return norm(x + feed_forward(x), 2)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_a_float64_reference(norm_first):
    ampcore.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, norm_first=norm_first, dtype=ampcore.float64)
    layer.eval()
    x = np.random.default_rng(0).standard_normal((5, 3, 16))
    got = layer(ampcore.tensor(x, dtype=ampcore.float64)).detach().numpy()
    params = {k: v.numpy() for k, v in layer.state_dict().items()}
    want = _encoder_layer_reference(x, params, 4, norm_first)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_torchs_state_dict_names_and_deep_copied_layers():
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16)
    keys = set(model.state_dict())
    for key in (
        "encoder.layers.1.self_attn.in_proj_weight",
        "encoder.layers.0.linear2.bias",
        "encoder.norm.weight",
        "decoder.layers.0.multihead_attn.out_proj.weight",
        "decoder.layers.0.norm3.bias",
        "decoder.norm.bias",
    ):
        assert key in keys
    first, second = model.encoder.layers[0].linear1.weight, model.encoder.layers[1].linear1.weight
    assert first is not second and np.array_equal(first.detach().numpy(), second.detach().numpy())
    out = model(ampcore.randn(5, 3, 8), ampcore.randn(4, 3, 8))
    assert out.shape == (4, 3, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.tolist() == [[0.0, -np.inf, -np.inf], [0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="activation should be relu/gelu, not 'tanh'"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.parametrize(("norm_first", "batch_first"), [(False, False), (True, True)])
def test_a_torch_transformers_weights_give_torchs_outputs(norm_first, batch_first):
    import torch

    config = dict(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32)
    theirs = torch.nn.Transformer(**config, norm_first=norm_first, batch_first=batch_first).eval()
    ours = nn.Transformer(**config, norm_first=norm_first, batch_first=batch_first).eval()
    loaded = ours.load_state_dict({k: ampcore.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    assert not loaded.missing_keys and not loaded.unexpected_keys
    rng = np.random.default_rng(1)
    src, tgt = rng.standard_normal((5, 3, 16)).astype(np.float32), rng.standard_normal((4, 3, 16)).astype(np.float32)
    if batch_first:
        src, tgt = src.transpose(1, 0, 2).copy(), tgt.transpose(1, 0, 2).copy()
    causal = torch.nn.Transformer.generate_square_subsequent_mask(4)
    with torch.no_grad():
        want = theirs(torch.tensor(src), torch.tensor(tgt), tgt_mask=causal)
    got = ours(ampcore.tensor(src), ampcore.tensor(tgt), tgt_mask=nn.Transformer.generate_square_subsequent_mask(4))
    np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=0, atol=1e-5)
