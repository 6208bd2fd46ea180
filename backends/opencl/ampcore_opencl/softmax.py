"""Fused softmax / log_softmax and their backward kernels for the opencl backend.

A row (the elements along ``axis``) is reduced and written by one
work-group: the maximum, the sum of ``exp(x - max)`` (so nothing overflows),
then the outputs; rows too short to fill a work-group get one work-item
each.  float16/bfloat16/float32 compute in float, float64 in double, and each
output is rounded once.  A row of -inf (or with a NaN) gives NaN, as the cpu
backend does: ``x - max`` is NaN there.

The four kernels share one template; each is two pieces of C:

- ``term``: what the row sums (``exp(x - m)``, ``g * y`` or ``g``);
- ``result``: each output from the element, the row max ``m`` and sum ``s``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import cgen

from .array import CLArray, empty
from .codegen import ctype, prelude
from .devices import DeviceState
from .reductions import dummy, local, work_group_size

__all__ = ["kernels", "GROUP_MIN_LEN"]

GROUP_MIN_LEN = 64  # rows at least this long get a work-group each; shorter ones one work-item each

_I64 = np.dtype(np.int64)

# name: (needs the row max, term summed, result)  -- X is x (or y), G is gy, M the max, S the sum.
_OPS = cgen.SOFTMAX_OPS

_SOURCE = """
#define ACC {acc}
#define LOADX(e) (({acc})({load_x}))
#define LOADG(e) (({acc})({load_g}))
#define NEEDS_MAX {needs_max}
/* NumPy's maximum: NaN propagates. */
{nan_max}
{row_base}
inline ACC term_of(ACC X, ACC G, ACC M) {{ return {term}; }}
inline ACC result_of(ACC X, ACC G, ACC M, ACC S) {{ return {result}; }}

__kernel void sm_item(__global const {t} *x, __global const {t} *gy, __global {t} *out, long n, long inner) {{
    long o = get_global_id(0);
    long base = ROW_BASE(o);
    ACC M = 0;
#if NEEDS_MAX
    M = -INFINITY;
    for (long r = 0; r < n; ++r) M = nan_max(M, LOADX(base + r * inner));
#endif
    ACC S = 0;
    for (long r = 0; r < n; ++r) {{ long e = base + r * inner; {sum_term} }}
    for (long r = 0; r < n; ++r) {{ long e = base + r * inner; {store} }}
}}

/* Reduce v over the work-group (max when is_max); every work-item gets the result. */
inline ACC group_reduce(__local ACC *l, ACC v, int is_max) {{
    int lid = get_local_id(0), wg = get_local_size(0);
    l[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = wg >> 1; s > 0; s >>= 1) {{
        if (lid < s) l[lid] = is_max ? nan_max(l[lid], l[lid + s]) : l[lid] + l[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    ACC r = l[0];
    barrier(CLK_LOCAL_MEM_FENCE);  /* l is reused by the next reduction */
    return r;
}}

__kernel void sm_group(__global const {t} *x, __global const {t} *gy, __global {t} *out, long n, long inner,
                       __local ACC *l) {{
    long o = get_group_id(0);
    long base = ROW_BASE(o);
    int lid = get_local_id(0), wg = get_local_size(0);
    ACC M = 0;
#if NEEDS_MAX
    M = -INFINITY;
    for (long r = lid; r < n; r += wg) M = nan_max(M, LOADX(base + r * inner));
    M = group_reduce(l, M, 1);
#endif
    ACC S = 0;
    for (long r = lid; r < n; r += wg) {{ long e = base + r * inner; {sum_term} }}
    S = group_reduce(l, S, 0);
    for (long r = lid; r < n; r += wg) {{ long e = base + r * inner; {store} }}
}}
"""


def _kernel(state: DeviceState, op: str, x: CLArray, name: str) -> Any:
    c = ctype(x.dtype)
    acc = "double" if c.tag == "f64" else "float"
    needs_max, term, result = _OPS[op]

    def source() -> str:
        store = c.store("out", "e", "result_of(LOADX(e), LOADG(e), M, S)", value_type=acc if acc == "double" else "")
        sum_term = "S += term_of(LOADX(e), LOADG(e), M);"
        if op == "softmax" and c.storage == acc:
            # exp is most of the cost (PoCL's is ~25x a multiply): keep exp(x - m) in the output, which holds
            # it exactly in float32/float64, and divide it in place, instead of computing it twice
            sum_term = "ACC t = term_of(LOADX(e), 0, M); out[e] = t; S += t;"
            store = "out[e] = out[e] / S;"
        load_g = c.load("gy", "e") if op.endswith("_backward") else "0"  # forward kernels get a dummy gy
        return prelude(state.fp64) + _SOURCE.format(
            acc=acc,
            t=c.storage,
            load_x=c.load("x", "e"),
            load_g=load_g,
            needs_max=int(needs_max),
            term=term,
            result=result,
            store=store,
            sum_term=sum_term,
            nan_max=cgen.nan_max(cgen.OPENCL),
            row_base=cgen.ROW_BASE,
        )

    types = [None, None, None, _I64, _I64] + ([None] if name == "sm_group" else [])
    return state.kernel(("softmax", op, c.tag), source, name, types)


def _run(op: str, x: CLArray, gy: CLArray | None, axis: int) -> CLArray:
    if gy is not None and (gy.shape != x.shape or gy.dtype != x.dtype):
        raise ValueError(f"{op}: gy {gy.shape} {gy.dtype.name} must match y {x.shape} {x.dtype.name}")
    state = x.state
    out = empty(state, x.shape, x.dtype)
    if out.size == 0:
        return out
    rows, n, inner = cgen.row_geometry(x.shape, axis)
    g = dummy(state) if gy is None else gy.buffer
    if n < GROUP_MIN_LEN:
        state.launch(_kernel(state, op, x, "sm_item"), (rows,), None, x.buffer, g, out.buffer, n, inner)
        return out
    kernel = _kernel(state, op, x, "sm_group")
    wg = cgen.fit_group_size(n, work_group_size(state, kernel))  # no idle work-items beyond the row
    acc_size = 8 if x.dtype.name == "float64" else 4
    state.launch(kernel, (rows * wg,), (wg,), x.buffer, g, out.buffer, n, inner, local(wg * acc_size))
    return out


def softmax(x: CLArray, axis: int) -> CLArray:
    """exp(x - max) / sum(exp(x - max)) along ``axis``."""
    return _run("softmax", x, None, axis)


def log_softmax(x: CLArray, axis: int) -> CLArray:
    """(x - max) - log(sum(exp(x - max))) along ``axis``."""
    return _run("log_softmax", x, None, axis)


def softmax_backward(y: CLArray, gy: CLArray, axis: int) -> CLArray:
    """y * (gy - sum(gy * y)) along ``axis``, ``y`` the softmax output."""
    return _run("softmax_backward", y, gy, axis)


def log_softmax_backward(y: CLArray, gy: CLArray, axis: int) -> CLArray:
    """gy - exp(y) * sum(gy) along ``axis``, ``y`` the log_softmax output."""
    return _run("log_softmax_backward", y, gy, axis)


def kernels() -> dict[str, Callable[..., Any]]:
    """The fused softmax family by contract name."""
    return {
        "softmax": softmax,
        "log_softmax": log_softmax,
        "softmax_backward": softmax_backward,
        "log_softmax_backward": log_softmax_backward,
    }
