"""Gradient clipping and flattening parameters to one vector (torch.nn.utils names; torch keeps them in
clip_grad and convert_parameters)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ... import dtypes as dt
from ...autograd import no_grad
from ...ops import cat
from ...tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]

TensorOrTensors = Tensor | Iterable[Tensor]


def _as_list(parameters: TensorOrTensors) -> list[Tensor]:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _acc_dtype(t: Tensor) -> dt.DType:
    return dt.float64 if t.dtype == dt.float64 else dt.float32


def _norm_power(g: Tensor, norm_type: float) -> Tensor:
    """sum(|g|**p) for finite p, max(|g|) for p = inf; a 0-d tensor in float32 (float64 for float64)."""
    a = g.detach().to(dtype=_acc_dtype(g)).abs()
    if math.isinf(norm_type):
        return a.amax() if g.numel() else a.sum() * 0.0
    if norm_type == 2.0:
        return (a * a).sum()
    if norm_type == 1.0:
        return a.sum()
    return (a ** float(norm_type)).sum()


def clip_grad_norm_(
    parameters: TensorOrTensors, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False
) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their joint ``norm_type``-norm
    is at most ``max_norm``; returns the norm before clipping as a 0-d tensor.

    torch's rule: ``coef = min(max_norm / (total_norm + 1e-6), 1)``, every
    gradient multiplied by ``coef`` (in float32 for float16/bfloat16
    gradients, then rounded back).  The norm is accumulated in float32
    (float64 for float64 gradients) and stays on the device: no host sync
    unless ``error_if_nonfinite`` is set, when a non-finite norm raises
    RuntimeError and leaves the gradients alone.  ValueError for a negative
    ``max_norm`` or a ``norm_type`` that is not positive.
    """
    max_norm, norm_type = float(max_norm), float(norm_type)
    if max_norm < 0 or math.isnan(max_norm):
        raise ValueError(f"max_norm must be non-negative, got {max_norm!r}")
    if not norm_type > 0:
        raise ValueError(f"norm_type must be positive (or inf), got {norm_type!r}")
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        from ...creation import tensor

        return tensor(0.0)
    with no_grad():
        anchor = grads[0]
        parts = [_norm_power(g, norm_type).to(device=anchor.device, dtype=_acc_dtype(anchor)) for g in grads]
        if math.isinf(norm_type):
            total = parts[0]
            for part in parts[1:]:
                total = total.maximum(part)
        else:
            total = parts[0]
            for part in parts[1:]:
                total = total + part
            total = total.sqrt() if norm_type == 2.0 else total if norm_type == 1.0 else total ** (1.0 / norm_type)
        if error_if_nonfinite and not math.isfinite(float(total)):
            raise RuntimeError(
                f"the total norm of order {norm_type} of the gradients is non-finite ({float(total)}), "
                "so they cannot be clipped; pass error_if_nonfinite=False to clip anyway"
            )
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            c = coef.to(device=g.device, dtype=_acc_dtype(g))
            g._data = (g.to(dtype=c.dtype) * c).to(dtype=g.dtype)._data
    return total


def clip_grad_value_(parameters: TensorOrTensors, clip_value: float) -> None:
    """Clamp every gradient of ``parameters`` in place to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad._data = p.grad.clamp(-clip_value, clip_value)._data


def parameters_to_vector(parameters: TensorOrTensors) -> Tensor:
    """All ``parameters`` flattened and joined into one 1-D tensor (a copy, in their promoted dtype)."""
    params = _as_list(parameters)
    if not params:
        raise ValueError("parameters_to_vector needs at least one parameter")
    with no_grad():
        return cat([p.detach().reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: TensorOrTensors) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into ``parameters`` (cast to each one's dtype).

    ValueError if ``vec`` is not 1-D or its length differs from the parameters' total size;
    nothing is changed then.
    """
    params = _as_list(parameters)
    total = sum(p.numel() for p in params)
    if not isinstance(vec, Tensor) or vec.ndim != 1 or vec.shape[0] != total:
        got = vec.shape if isinstance(vec, Tensor) else type(vec).__name__
        raise ValueError(f"expected a 1-D tensor of {total} elements, got {got}")
    with no_grad():
        chunks, start = [], 0
        for p in params:
            chunks.append(vec[start : start + p.numel()].reshape(p.shape).to(device=p.device, dtype=p.dtype).clone())
            start += p.numel()
    for p, c in zip(params, chunks):
        p._data = c._data
