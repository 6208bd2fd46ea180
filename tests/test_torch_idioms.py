"""The torch idioms issue 27's GPT port needed edits for, written as a torch user writes them (import renamed)."""

from __future__ import annotations

import math

import numpy as np

import ampcore as torch
import ampcore.nn as nn
from ampcore.nn import functional as F

B, T, C, V = 2, 5, 8, 11


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = nn.Linear(C, 3 * C)
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, T, T))

    def forward(self, x):
        q, k, v = self.c_attn(x).split(C, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C))
        att = att.masked_fill(self.bias[:, :T, :T] == 0, float("-inf"))
        return F.softmax(att, dim=-1) @ v


def test_a_gpt_style_forward_backward_and_top_k_sampling_run_unchanged():
    torch.manual_seed(1337)
    model = nn.ModuleDict(dict(wte=nn.Embedding(V, C), h=nn.ModuleList([Block()]), lm_head=nn.Linear(C, V)))
    idx = torch.randint(V, (B, T))
    x = model.wte(idx) + model["wte"](torch.arange(0, T, dtype=torch.long))
    for block in model.h:
        x = block(x)
    logits = model.lm_head(x)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), idx.view(-1), ignore_index=-1)
    loss.backward()
    assert math.isfinite(float(f"{loss:.4f}")) and model.h[0].c_attn.weight.grad is not None
    assert "h.0.c_attn.weight" in model.state_dict()
    with torch.inference_mode():
        logits = model.lm_head(x.detach())[:, -1, :]
        v, _ = torch.topk(logits, min(3, logits.size(-1)))
        logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
        idx_next = torch.multinomial(probs, num_samples=1)
    kept = np.argsort(-logits.numpy(), axis=1, kind="stable")[:, :3]
    assert (probs > 0).sum(-1).tolist() == [3, 3]
    assert all(int(n) in row for n, row in zip(idx_next.view(-1).tolist(), kept))
    assert torch.cat((idx, idx_next), dim=1).shape == (B, T + 1)
