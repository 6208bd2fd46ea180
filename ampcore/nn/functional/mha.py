"""multi_head_attention_forward: torch's functional multi-head attention, which nn.MultiheadAttention runs.

Inputs are sequence-first, (L, N, E) (or unbatched (L, E)).  The projections are linears (one fused one when
query, key and value are the same tensor), ``bias_k``/``bias_v`` and ``add_zero_attn`` each append one key and
value position (the masks grow a column that may be attended), and the masks merge into one additive mask:
a bool mask marks positions that may NOT be attended (torch's convention), a float mask is added to the
scores.  With ``need_weights`` the softmax weights are computed explicitly (after dropout, as torch returns
them; averaged over heads unless ``average_attn_weights=False``), otherwise the attention runs through
``scaled_dot_product_attention``.
"""

from __future__ import annotations

import math

from ... import dtypes as dt
from ...creation import arange, zeros
from ...ops import cat
from ...tensor import Tensor
from .activation import softmax
from .attention import scaled_dot_product_attention
from .dropout import dropout
from .linear import linear
from .padding import pad

__all__ = ["multi_head_attention_forward", "additive_mask"]


def _as_additive(mask: Tensor, like: Tensor) -> Tensor:
    """A bool "may not attend" mask as 0 / -inf in ``like``'s dtype; a float mask as it is."""
    if mask.dtype == dt.bool_:
        return zeros(*mask.shape, dtype=like.dtype, device=like.device).masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise TypeError(f"attention masks must be bool or floating, got {mask.dtype.name}")
    return mask.to(dtype=like.dtype)


def additive_mask(
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
    shape: tuple[int, int, int, int],
    like: Tensor,
) -> Tensor | None:
    """attn_mask ((L, S) or (N * H, L, S)), key_padding_mask ((N, S)) and the causal mask merged into one additive
    mask broadcastable to ``shape`` = (N, H, L, S)."""
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
        padding = _as_additive(key_padding_mask, like).reshape(n, 1, 1, s)
        out = padding if out is None else out + padding
    return out


def _grow_masks(attn_mask: Tensor | None, key_padding_mask: Tensor | None) -> tuple[Tensor | None, Tensor | None]:
    """One more key position, which may be attended: a zero (False) column on each mask."""
    return (
        pad(attn_mask, (0, 1)) if attn_mask is not None else None,
        pad(key_padding_mask, (0, 1)) if key_padding_mask is not None else None,
    )


def _projections(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    e: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    separate: tuple[Tensor | None, Tensor | None, Tensor | None] | None,
) -> tuple[Tensor, Tensor, Tensor]:
    biases = [in_proj_bias[i * e : (i + 1) * e] if in_proj_bias is not None else None for i in range(3)]
    if separate is not None:
        weights = list(separate)
        if any(w is None for w in weights):
            raise ValueError("use_separate_proj_weight=True needs q_proj_weight, k_proj_weight and v_proj_weight")
    else:
        if in_proj_weight is None:
            raise ValueError("multi_head_attention_forward() needs in_proj_weight (or use_separate_proj_weight)")
        if query is key and key is value:
            qkv = linear(query, in_proj_weight, in_proj_bias)
            return qkv[..., :e], qkv[..., e : 2 * e], qkv[..., 2 * e :]
        weights = [in_proj_weight[i * e : (i + 1) * e] for i in range(3)]
    q, k, v = (linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))
    return q, k, v


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """torch.nn.functional.multi_head_attention_forward: ``(attn_output (L, N, E), attn_weights)``, the weights
    (N, L, S) (per head (N, H, L, S) with ``average_attn_weights=False``) or None without ``need_weights``.
    ValueError names a mis-shaped input or mask."""
    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ValueError(
            f"query, key and value must all be 3-D (batched) or 2-D (unbatched), got shapes {query.shape}, "
            f"{key.shape} and {value.shape}"
        )
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        key_padding_mask = key_padding_mask.unsqueeze(0) if key_padding_mask is not None else None
    length, n, e = query.shape
    if e != embed_dim_to_check:
        raise ValueError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {e}")
    if num_heads <= 0 or e % num_heads:
        raise ValueError(f"embed_dim {e} not divisible by num_heads {num_heads}")
    head = e // num_heads
    separate = (q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight else None
    q, k, v = _projections(query, key, value, e, in_proj_weight, in_proj_bias, separate)
    if bias_k is not None and bias_v is not None:
        k = cat([k, bias_k.reshape(1, 1, e).expand(1, n, e)], 0)
        v = cat([v, bias_v.reshape(1, 1, e).expand(1, n, e)], 0)
        attn_mask, key_padding_mask = _grow_masks(attn_mask, key_padding_mask)
    elif (bias_k is None) != (bias_v is None):
        raise ValueError("bias_k and bias_v must be given together")

    def heads(x: Tensor) -> Tensor:  # (S, N, E) -> (N, H, S, head)
        return x.reshape(x.shape[0], n, num_heads, head).permute(1, 2, 0, 3)

    qh = heads(q)
    kh = static_k.reshape(n, num_heads, -1, head) if static_k is not None else heads(k)
    vh = static_v.reshape(n, num_heads, -1, head) if static_v is not None else heads(v)
    if add_zero_attn:
        kh = pad(kh, (0, 0, 0, 1))
        vh = pad(vh, (0, 0, 0, 1))
        attn_mask, key_padding_mask = _grow_masks(attn_mask, key_padding_mask)
    s = kh.shape[2]
    mask = additive_mask(attn_mask, key_padding_mask, is_causal, (n, num_heads, length, s), qh)
    p = dropout_p if training else 0.0
    weights = None
    if need_weights:
        # torch scales q before the product: q . k in float16 overflows long before the scaled score does.
        scores = (qh * math.sqrt(1.0 / head)) @ kh.mT
        weights = softmax(scores + mask if mask is not None else scores, -1)
        if p > 0.0:
            weights = dropout(weights, p, True)
        out = weights @ vh
        if average_attn_weights:
            weights = weights.mean(1)
    else:
        out = scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, dropout_p=p)
    out = linear(out.permute(2, 0, 1, 3).reshape(length, n, e), out_proj_weight, out_proj_bias)
    if not batched:
        return out.squeeze(1), weights.squeeze(0) if weights is not None else None
    return out, weights
