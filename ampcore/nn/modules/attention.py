"""MultiheadAttention."""

from __future__ import annotations

import math
from typing import Any

from ... import dtypes as dt
from ...creation import arange, empty, zeros
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .linear import Linear

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention with equal query/key/value sizes.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns
    ``(attn_output, attn_weights)``.  Inputs are (L, N, E), or (N, L, E) with
    ``batch_first``, or unbatched (L, E).  Boolean masks mark positions that
    may NOT be attended (torch's MHA convention); float masks are added to the
    scores.  With ``need_weights=False`` the attention runs through
    ``F.scaled_dot_product_attention`` and the weights are None; otherwise the
    weights (after dropout, as torch) are returned, averaged over heads unless
    ``average_attn_weights=False``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if add_bias_kv or add_zero_attn:
            raise ValueError("add_bias_kv and add_zero_attn are not supported")
        if kdim not in (None, embed_dim) or vdim not in (None, embed_dim):
            raise ValueError(f"kdim and vdim must equal embed_dim ({embed_dim}), got kdim={kdim}, vdim={vdim}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, got {dropout!r}")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.dropout, self.batch_first = dropout, batch_first
        self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, device=device, dtype=dtype))
        self.register_parameter(
            "in_proj_bias", Parameter(empty(3 * embed_dim, device=device, dtype=dtype)) if bias else None
        )
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        w, b, e = self.in_proj_weight, self.in_proj_bias, self.embed_dim
        if query is key and key is value:
            qkv = F.linear(query, w, b)
            return qkv[..., :e], qkv[..., e : 2 * e], qkv[..., 2 * e :]
        parts = [(w[i * e : (i + 1) * e], b[i * e : (i + 1) * e] if b is not None else None) for i in range(3)]
        return tuple(F.linear(x, wi, bi) for x, (wi, bi) in zip((query, key, value), parts))

    def _heads(self, x: Tensor) -> Tensor:
        n, length, _ = x.shape
        return x.reshape(n, length, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(
                f"query, key and value must all be 3-D (batched) or 2-D (unbatched), got shapes "
                f"{query.shape}, {key.shape} and {value.shape}"
            )
        if query.shape[-1] != self.embed_dim:
            raise ValueError(f"query's last dimension {query.shape[-1]} does not match embed_dim {self.embed_dim}")
        if not batched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            key_padding_mask = key_padding_mask.unsqueeze(0) if key_padding_mask is not None else None
        elif not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        q, k, v = (self._heads(t) for t in self._project(query, key, value))
        n, _, length, _ = q.shape
        mask = _additive_mask(attn_mask, key_padding_mask, is_causal, (n, self.num_heads, length, k.shape[2]), q)
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            # torch scales q before the product: q . k in float16 overflows long before the scaled score does.
            scores = (q * math.sqrt(1.0 / self.head_dim)) @ k.mT
            weights = F.softmax(scores + mask if mask is not None else scores, -1)
            if p > 0.0:
                weights = F.dropout(weights, p, True)
            out = weights @ v
            if average_attn_weights:
                weights = weights.mean(1)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        out = self.out_proj(out.transpose(1, 2).reshape(n, length, self.embed_dim))
        if not batched:
            return out.squeeze(0), weights.squeeze(0) if weights is not None else None
        return (out if self.batch_first else out.transpose(0, 1)), weights

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
            f"batch_first={self.batch_first}"
        )


def _as_additive(mask: Tensor, like: Tensor) -> Tensor:
    """A bool "may not attend" mask as 0 / -inf in ``like``'s dtype; a float mask as it is."""
    if mask.dtype == dt.bool_:
        return zeros(*mask.shape, dtype=like.dtype, device=like.device).masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise TypeError(f"attention masks must be bool or floating, got {mask.dtype.name}")
    return mask.to(dtype=like.dtype)


def _additive_mask(
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
    shape: tuple[int, int, int, int],
    like: Tensor,
) -> Tensor | None:
    """attn_mask, key_padding_mask and the causal mask merged into one additive (broadcastable) mask."""
    n, h, length, s = shape
    if is_causal and attn_mask is None:
        attn_mask = arange(s, device=like.device).unsqueeze(0) > arange(length, device=like.device).unsqueeze(1)
    out = None
    if attn_mask is not None:
        if attn_mask.shape == (length, s):
            out = _as_additive(attn_mask, like)
        elif attn_mask.shape == (n * h, length, s):
            out = _as_additive(attn_mask, like).reshape(n, h, length, s)
        else:
            raise ValueError(f"attn_mask must have shape {(length, s)} or {(n * h, length, s)}, got {attn_mask.shape}")
    if key_padding_mask is not None:
        if key_padding_mask.shape != (n, s):
            raise ValueError(f"key_padding_mask must have shape {(n, s)}, got {key_padding_mask.shape}")
        pad = _as_additive(key_padding_mask, like).reshape(n, 1, 1, s)
        out = pad if out is None else out + pad
    return out
