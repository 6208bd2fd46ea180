"""The compiled loop of :mod:`.fused_optim` (importing this module imports numba; ImportError without it).

One pass per element over the parameter, its gradient and both moments, on
the calling thread, vectorised: ``error_model="numpy"`` (division by zero gives
inf/NaN, as NumPy's, rather than a check and a Python exception in the loop)
lets LLVM vectorise it; with numba's default error model the same loop ran
3.4 ms per million float32 elements, vectorised 0.8-1.1 against 3.0 for the
NumPy passes.  Not ``prange``: on the shared 2-core host of issue 28 (load
10-15), each parallel region waited for its second thread to be scheduled: a
median 55 ms per million-element call against 1.3 ms on one thread.  The pass
is memory-bound, so a second core would save little even on a quiet host.  Each operation is the NumPy kernel's, in its
order and in the arrays' dtype (the constants are that dtype, as NumPy turns a
Python float beside a float32 array into float32), and numba contracts no
multiply-add into an FMA: the bits are the NumPy kernel's.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np


@numba.njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _update(
    p: Any, g: Any, m: Any, v: Any, i: int, c: Any, weight_decay: bool, decoupled: bool
) -> None:  # pragma: no cover - compiled
    decay, wd, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps, step_size = (
        c[0],
        c[1],
        c[2],
        c[3],
        c[4],
        c[5],
        c[6],
        c[7],
    )
    pc = p[i]
    gc = g[i]
    if weight_decay:
        if decoupled:
            pc = pc * decay
        else:
            gc = gc + pc * wd
    mi = m[i]
    mi = mi + (gc - mi) * one_minus_beta1
    vi = v[i] * beta2 + (gc * gc) * one_minus_beta2
    denom = np.sqrt(vi) / bc2_sqrt + eps
    p[i] = pc - (mi / denom) * step_size
    m[i] = mi
    v[i] = vi


@numba.njit(nogil=True, cache=True, error_model="numpy")
def adamw(
    p: Any, g: Any, m: Any, v: Any, c: Any, weight_decay: bool, decoupled: bool
) -> None:  # pragma: no cover - compiled
    """Adam(W) in place on flat ``p``, ``m``, ``v`` (``g`` read), all of one float dtype; ``c`` holds
    (decay, weight_decay, 1 - beta1, beta2, 1 - beta2, sqrt(1 - beta2**t), eps, lr / (1 - beta1**t))
    in that dtype."""
    for i in range(p.size):
        _update(p, g, m, v, i, c, weight_decay, decoupled)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def unscale(g: Any, inv: Any) -> bool:  # pragma: no cover - compiled
    """``g *= inv`` in place on a flat float array (``inv`` of its dtype: NumPy's product, bit for bit), and
    whether any product is inf or NaN.  The flag is an integer OR over the block, which LLVM vectorises."""
    bad = False
    for i in range(g.size):
        v = g[i] * inv
        g[i] = v
        bad |= not (np.abs(v) < np.inf)
    return bad
