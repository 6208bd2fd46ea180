"""Scaled dot-product attention (the math path: softmax(q k^T * scale + mask) v)."""

from __future__ import annotations

import math
from typing import Any

from ... import dtypes as dt
from ...creation import arange, tensor
from ...dispatch import composite
from ...ops import amax, take
from ...ops import elementwise as ew
from ...tensor import Tensor
from ._utils import check_float, check_tensor
from .activation import softmax
from .dropout import apply_dropout

__all__ = ["scaled_dot_product_attention"]


@composite("scaled_dot_product_attention")
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value for (..., L, E) queries and (..., S, E) / (..., S, Ev) keys/values.

    ``scale`` defaults to 1 / sqrt(E); query and key are each multiplied by
    sqrt(scale) before their product, so float16 scores do not overflow.  A
    query whose every key is masked out attends to nothing: its output row
    is 0 (torch's "safe softmax"), not NaN.  A bool ``attn_mask`` keeps positions
    where True; a float mask is added to the scores; ``is_causal`` keeps
    key j <= query i.  ``dropout_p`` > 0 drops attention weights.  With
    ``enable_gqa`` the key/value heads (dim -3) are shared by groups of query heads.
    Raises ValueError for mismatched shapes, both a mask and ``is_causal``, or a bad mask dtype.
    """
    _check_shapes(query, key, value)
    if enable_gqa:
        key, value = _repeat_heads(key, query.shape[-3]), _repeat_heads(value, query.shape[-3])
    scores = _scaled_scores(query, key, 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale)
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention(): pass either attn_mask or is_causal=True, not both")
        attn_mask = _causal_mask(query.shape[-2], key.shape[-2], query)
    if attn_mask is None:
        weights = softmax(scores, -1)
    else:
        weights = _safe_softmax(_apply_mask(scores, attn_mask))
    if dropout_p > 0.0:
        weights = apply_dropout(weights, dropout_p)
    return weights @ value


def _scaled_scores(query: Tensor, key: Tensor, scale: float) -> Tensor:
    """query @ key^T * scale, computed as (query * s) @ (key * s)^T with s = sqrt(|scale|), as torch's math path.

    Scaling before the matmul keeps float16 scores finite: q . k of two
    moderately large vectors overflows 65504 long before the scaled score does.
    """
    s = math.sqrt(abs(scale))
    return (query * (-s if scale < 0 else s)) @ (key * s).mT


def _safe_softmax(scores: Tensor) -> Tensor:
    """Softmax over the last axis, with rows whose every score is -inf (fully masked) set to 0, as torch >= 2.5.

    Those rows are zeroed before the softmax too, so neither the forward nor
    the gradient ever sees the NaN that softmax of an all -inf row would give.
    """
    if scores.shape[-1] == 0:
        return softmax(scores, -1)
    masked = amax(scores.detach(), -1, keepdim=True) == float("-inf")
    return ew.where(masked, 0.0, softmax(ew.where(masked, 0.0, scores), -1))


def _check_shapes(query: Any, key: Any, value: Any) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_float(t, name, "scaled_dot_product_attention")
        if t.ndim < 2:
            raise ValueError(f"scaled_dot_product_attention(): {name} needs at least 2 dimensions, got {t.shape}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"scaled_dot_product_attention(): query {query.shape}, key {key.shape} and value "
            f"{value.shape} do not fit; expected (..., L, E), (..., S, E) and (..., S, Ev)"
        )


def _causal_mask(n_queries: int, n_keys: int, like: Tensor) -> Tensor:
    """True where key j <= query i (top-left aligned, as torch)."""
    rows = arange(n_queries, device=like.device).reshape(n_queries, 1)
    return arange(n_keys, device=like.device).reshape(1, n_keys) <= rows


def _apply_mask(scores: Tensor, mask: Tensor) -> Tensor:
    check_tensor(mask, "attn_mask", "scaled_dot_product_attention")
    if mask.dtype == dt.bool_:
        return ew.where(mask, scores, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise ValueError(f"scaled_dot_product_attention(): attn_mask must be bool or floating, got {mask.dtype.name}")
    return scores + ew.cast(mask, scores.dtype)


def _repeat_heads(t: Tensor, n_heads: int) -> Tensor:
    """Repeat each of t's heads (dim -3) so there are ``n_heads``, like repeat_interleave."""
    if t.ndim < 3 or n_heads % t.shape[-3]:
        raise ValueError(
            f"scaled_dot_product_attention(): {n_heads} query heads are not a multiple of the "
            f"key/value heads of shape {t.shape}"
        )
    group = n_heads // t.shape[-3]
    return take(t, tensor([h // group for h in range(n_heads)], device=t.device), t.ndim - 3)
