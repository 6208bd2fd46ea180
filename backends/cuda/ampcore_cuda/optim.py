"""The fused Adam/AdamW step on CUDA: every tensor of a (parameter dtype, gradient dtype) group in one launch.

Per element, op for op the cpu backend's ``adamw_step`` (and the core's
reference), compiled without fma contraction; CUDA's float division and
square root are correctly rounded by default, so the results should be the cpu
backend's bits (untested here: no GPU).  Arithmetic in float32 (float64 for
float64 parameters); a 16-bit parameter is widened, updated and rounded once.
Parameters and moments are updated in place, as the contract allows.  The
step-dependent scalars are kernel arguments: a new step compiles nothing and,
with the meta array cached, uploads nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt
from ampcore.kernels import check_adamw_step

from .array import CuArray
from .codegen import FLOAT_CTYPES, PRELUDE, CType, ctype
from .launch import BLOCK, ILP, MULTI_TENSOR_HELPERS, TILE, multi_tensor_meta, raw_kernel
from .runtime import import_cupy

__all__ = ["sources", "adamw_step", "kernels"]

_SCALARS = cgen.ADAMW_SCALARS


def _name(p: CType, g: CType) -> str:
    return f"adamw_step_{p.tag}_{g.tag}"


def _source(p: CType, g: CType) -> str:
    c = "double" if p.tag == "f64" else "float"
    scalars = ", ".join(f"{c} {name}" for name in _SCALARS)
    return (
        PRELUDE
        + MULTI_TENSOR_HELPERS
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
{_name(p, g)}(const long long *__restrict__ meta, int n_tensors, int mode, {scalars}) {{
    const long long blk = blockIdx.x;
    const int t = mt_tensor(meta, n_tensors, blk);
    {p.storage} *ps = ({p.storage} *)mt_ptr(meta, n_tensors, 4, t, 0);
    const {g.storage} *gs = (const {g.storage} *)mt_ptr(meta, n_tensors, 4, t, 1);
    {c} *ms = ({c} *)mt_ptr(meta, n_tensors, 4, t, 2);
    {c} *vs = ({c} *)mt_ptr(meta, n_tensors, 4, t, 3);
    const long long n = mt_size(meta, n_tensors, t);
    const long long base = (blk - meta[t]) * {TILE};
    #pragma unroll
    for (int j = 0; j < {ILP}; ++j) {{
        const long long i = base + (long long)j * {BLOCK} + threadIdx.x;
        if (i >= n) continue;
{cgen.adamw_element(cgen.CUDA, p.tag, p.storage, g.tag, ("ps", "gs", "ms", "vs"), "i", " " * 8)}    }}
}}
"""
    )


def sources() -> dict[str, str]:
    """Every kernel source of this family, by kernel name (each parameter dtype with each gradient dtype)."""
    return {_name(p, g): _source(p, g) for p in FLOAT_CTYPES for g in FLOAT_CTYPES}


def _validate(
    params: Sequence[Any],
    grads: Sequence[Any],
    exp_avgs: Sequence[Any],
    exp_avg_sqs: Sequence[Any],
    step: Any,
    hyper: dict[str, float],
) -> int:
    """Every check before any write; returns the one device index of all arrays."""
    devices = set()
    for i, arrays in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        if not all(isinstance(a, CuArray) for a in arrays):
            raise TypeError(
                f"adamw_step tensor {i}: expected cuda device arrays, got {', '.join(type(a).__name__ for a in arrays)}"
            )
        devices |= {a.device_index for a in arrays}
        if len(devices) > 1:
            raise ValueError(
                f"adamw_step tensor {i}: arrays on different devices "
                f"({', '.join(f'cuda:{d}' for d in sorted(devices))})"
            )
    check_adamw_step(
        params, grads, exp_avgs, exp_avg_sqs, step, hyper, shape_of=lambda a: a.shape, dtype_of=lambda a: a.dtype
    )
    for i, arrays in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        if not all(a.data.flags.c_contiguous for a in arrays):
            raise ValueError(f"adamw_step tensor {i}: arrays must be C-contiguous (the step writes in place)")
    return devices.pop() if devices else 0


def adamw_step(
    params: Sequence[CuArray],
    grads: Sequence[CuArray],
    exp_avgs: Sequence[CuArray],
    exp_avg_sqs: Sequence[CuArray],
    *,
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
) -> tuple[list[CuArray], list[CuArray], list[CuArray]]:
    """Adam (``decoupled=False``: L2 term added to the gradient) or AdamW (``decoupled=True``:
    ``p *= 1 - lr * weight_decay``) over one parameter group, in place; returns the updated lists.

    ValueError/TypeError (the checks every backend makes, plus one device and
    contiguous arrays) before anything is written.
    """
    params, grads, exp_avgs, exp_avg_sqs = list(params), list(grads), list(exp_avgs), list(exp_avg_sqs)
    hyper = dict(lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps), weight_decay=float(weight_decay))
    device = _validate(params, grads, exp_avgs, exp_avg_sqs, step, hyper)
    if not params:
        return params, exp_avgs, exp_avg_sqs
    mode, consts = cgen.adamw_scalars(int(step), decoupled=decoupled, **hyper)
    groups: dict[tuple[dt.DType, dt.DType], list[tuple[Any, ...]]] = {}
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        if p.size:
            groups.setdefault((p.dtype, g.dtype), []).append((p.data, g.data, m.data, v.data))
    cupy = import_cupy()
    with cupy.cuda.Device(device):
        for (pd, gd), members in groups.items():
            pc, gc = ctype(pd), ctype(gd)
            scalar = np.float64 if pd == dt.float64 else np.float32
            meta, blocks = multi_tensor_meta(device, members)
            kernel = raw_kernel(("adamw_step", pc.tag, gc.tag), functools.partial(_source, pc, gc), _name(pc, gc))
            kernel(
                (blocks,),
                (BLOCK,),
                (meta, np.int32(len(members)), np.int32(mode), *(scalar(value) for value in consts)),
            )
    return params, exp_avgs, exp_avg_sqs


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    return {"adamw_step": adamw_step}
