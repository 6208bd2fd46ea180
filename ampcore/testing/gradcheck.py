"""Finite-difference gradient checks in float64.

The analytic gradient (our backward rules) is compared with central
differences of the forward.  In float64 with ``eps=1e-6`` the difference
quotient is accurate to about 1e-9 relative for smooth ops, so the default
tolerances (1e-6) leave three orders of margin without hiding real errors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..autograd import no_grad
from ..tensor import Tensor


class GradcheckError(AssertionError):
    """Analytic and numerical gradients disagree."""


def _scalarize(out: Any, weights: list[np.ndarray]) -> Any:
    """Reduce the output(s) to a scalar with fixed random weights (tests every output element)."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = None
    for i, o in enumerate(o for o in outs if isinstance(o, Tensor) and o.dtype.is_floating_point):
        if len(weights) <= i:
            weights.append(np.random.default_rng(1234 + i).standard_normal(o.shape))
        term = (o * o._new_tensor(weights[i], o.dtype)).sum()
        total = term if total is None else total + term
    return total


def gradcheck(
    fn: Callable[..., Any], inputs: Sequence[Any], *, eps: float = 1e-6, atol: float = 1e-6, rtol: float = 1e-5
) -> bool:
    """Check ``fn``'s gradients w.r.t. every float64 input tensor that requires grad.

    Raises GradcheckError naming the input and the worst element; returns True on success.
    """
    tensors = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    if not tensors:
        raise ValueError("gradcheck needs at least one input tensor with requires_grad=True")
    for t in tensors:
        if t.dtype != dt.float64:
            raise TypeError(f"gradcheck needs float64 inputs for meaningful finite differences, got {t.dtype.name}")
    weights: list[np.ndarray] = []
    for t in tensors:
        t.grad = None
    _scalarize(fn(*inputs), weights).backward()
    analytic = [t.grad.numpy() if t.grad is not None else np.zeros(t.shape) for t in tensors]
    with no_grad():
        for n, (t, a) in enumerate(zip(tensors, analytic)):
            base = t.numpy().copy()
            numeric = np.zeros_like(base)
            for idx in np.ndindex(base.shape):
                for sign in (1, -1):
                    shifted = base.copy()
                    shifted[idx] += sign * eps
                    t._data = t._backend.from_numpy(shifted, dt.float64, t.device.index)
                    numeric[idx] += sign * _scalarize(fn(*inputs), weights).item()
                numeric[idx] /= 2 * eps
            t._data = t._backend.from_numpy(base, dt.float64, t.device.index)
            if not np.allclose(a, numeric, atol=atol, rtol=rtol):
                err = np.abs(a - numeric)
                worst = np.unravel_index(np.argmax(err), err.shape) if err.shape else ()
                raise GradcheckError(
                    f"gradient of input {n} (shape {t.shape}) differs at {worst}: analytic {a[worst]!r}, "
                    f"numerical {numeric[worst]!r} (atol={atol}, rtol={rtol})"
                )
    return True
