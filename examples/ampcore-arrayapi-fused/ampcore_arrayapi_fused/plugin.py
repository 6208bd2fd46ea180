"""A fused softmax (forward and backward) for the ``arrayapi`` backend, installed through ``ampcore_kernels``.

Without it the core composes softmax from primitives: five kernel calls
forward (max, sub, exp, sum, div) and more backward, each dispatched through
autograd and each a pass over memory.  Here each direction is one kernel call
(float16 computed in float32, rounded once on output); README.md has the
measured gain.  The other fused kernels are left to the core on purpose, as
they measured no faster here: log_softmax (the same passes either way) and
GELU (slower fused: forward and backward each evaluate erf, which the
standard lacks and the backend evaluates as three rational approximations in
float64, while the composition evaluates it once).  ``ampcore info`` lists
this plugin as the provider of ``softmax`` and ``softmax_backward``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import ampcore
from ampcore.plugins import hookimpl

__all__ = ["ampcore_kernels", "fused_table"]


def fused_table(xp: Any, low: Any | None) -> dict[str, Callable[..., Any]]:
    """The fused softmax pair over namespace ``xp``; ``low`` is its float16 dtype (computed in float32), or None."""

    def lowp(fn: Callable[..., Any]) -> Callable[..., Any]:
        def kernel(x: Any, *rest: Any) -> Any:
            dtype = x.dtype
            up = lambda v: xp.astype(v, xp.float32) if low is not None and v.dtype == low else v  # noqa: E731
            with np.errstate(all="ignore"):  # IEEE inf/NaN, no warnings from NumPy-backed namespaces
                out = fn(up(x), *(up(r) if hasattr(r, "dtype") else r for r in rest))
            return out if out.dtype == dtype else xp.astype(out, dtype)

        kernel.__name__ = fn.__name__
        return kernel

    def row_max(x: Any, axis: int) -> Any:
        return xp.max(x, axis=axis, keepdims=True)

    def softmax(x: Any, axis: int) -> Any:
        if x.shape[axis] == 0:
            return xp.asarray(x, copy=True)
        e = xp.exp(x - row_max(x, axis))  # no input overflows exp
        return e / xp.sum(e, axis=axis, keepdims=True)

    def softmax_backward(y: Any, gy: Any, axis: int) -> Any:
        return y * (gy - xp.sum(gy * y, axis=axis, keepdims=True))

    return {fn.__name__: lowp(fn) for fn in (softmax, softmax_backward)}


@hookimpl
def ampcore_kernels(backend: ampcore.Backend) -> Mapping[str, Callable[..., Any]] | None:
    """The fused kernels for the ``arrayapi`` backend (None for any other, or when its namespace is unusable)."""
    if backend.name != "arrayapi" or not backend.availability():
        return None
    ns = backend.namespace()  # type: ignore[attr-defined]  # ampcore_arrayapi.ArrayAPIBackend
    return fused_table(ns.xp, ns.float16)
