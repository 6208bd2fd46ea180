"""The fused Adam/AdamW step on CUDA: every tensor of a (parameter dtype, gradient dtype) group in one launch.

Per element, op for op the cpu backend's ``adamw_step`` (and the core's
reference), compiled without fma contraction; CUDA's float division and
square root are correctly rounded by default, so the results should be the cpu
backend's bits (untested here: no GPU).  Arithmetic in float32 (float64 for
float64 parameters); a 16-bit parameter is widened, updated and rounded once.
Parameters and moments are updated in place, as the contract allows.  The
step-dependent scalars are kernel arguments: a new step compiles nothing and,
with the meta array cached, uploads nothing.

``adamw_step_amp`` is the same step for a fused optimizer under a GradScaler: the
step count and the found-inf flag stay on the device (no host read), and the
kernel computes the step's two bias-correction scalars from the count, in
double as the host does (:func:`ampcore.cgen.adamw_amp_constants`).
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

__all__ = ["sources", "adamw_step", "adamw_step_amp", "kernels"]

_SCALARS = cgen.ADAMW_SCALARS


def _name(p: CType, g: CType, amp: bool = False) -> str:
    return f"adamw_step{'_amp' if amp else ''}_{p.tag}_{g.tag}"


def _source(p: CType, g: CType, amp: bool = False) -> str:
    """The step kernel; ``amp``: the fused AMP step's, which reads the step count and the skip flag on the
    device (:func:`ampcore.cgen.adamw_amp_constants`) instead of taking the step's scalars as arguments."""
    c = "double" if p.tag == "f64" else "float"
    names = cgen.ADAMW_AMP_SCALARS if amp else _SCALARS
    scalars = ", ".join(f"{c} {name}" for name in names)
    if amp:
        doubles = ", ".join(f"double {name}" for name in cgen.ADAMW_AMP_DOUBLES)
        scalars = f"const float *__restrict__ steps, const float *__restrict__ skip, {scalars}, {doubles}"
    prologue = cgen.adamw_amp_constants(cgen.CUDA, p.tag, "steps", "skip", "    ") if amp else ""
    return (
        PRELUDE
        + MULTI_TENSOR_HELPERS
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
{_name(p, g, amp)}(const long long *__restrict__ meta, int n_tensors, int mode, {scalars}) {{
{prologue}    const long long blk = blockIdx.x;
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


_STEPS_NAME = "adamw_amp_steps"


def _steps_source() -> str:
    return cgen.adamw_amp_steps_kernel(cgen.CUDA)


def sources() -> dict[str, str]:
    """Every kernel source of this family, by kernel name (each parameter dtype with each gradient dtype)."""
    out = {_name(p, g, amp): _source(p, g, amp) for p in FLOAT_CTYPES for g in FLOAT_CTYPES for amp in (False, True)}
    return {**out, _STEPS_NAME: _steps_source()}


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


def _check_flag(value: Any, name: str, device: int, params: Sequence[Any]) -> Any:
    if not (isinstance(value, CuArray) and value.dtype == dt.float32 and value.size == 1):
        raise TypeError(f"adamw_step_amp: {name} must be a 1-element float32 cuda array, got {value!r}")
    if params and value.device_index != device:
        raise ValueError(f"adamw_step_amp: {name} is on cuda:{value.device_index}, the tensors on cuda:{device}")
    if not value.data.flags.c_contiguous:
        raise ValueError(f"adamw_step_amp: {name} must be C-contiguous (the count is advanced in place)")
    return value.data.reshape(1)


def adamw_step_amp(
    params: Sequence[CuArray],
    grads: Sequence[CuArray],
    exp_avgs: Sequence[CuArray],
    exp_avg_sqs: Sequence[CuArray],
    steps: CuArray,
    skip: CuArray,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
) -> tuple[list[CuArray], list[CuArray], list[CuArray], CuArray]:
    """:func:`adamw_step` numbered ``steps + 1`` and skipped where ``skip`` is nonzero, both read on the device
    (1-element float32 arrays): no host read.  The step's bias corrections are computed in each thread, in
    double, as the host computes them for :func:`adamw_step` (:func:`ampcore.cgen.adamw_amp_constants`).  In
    place, the step count too (after the step's kernels: a captured step advances it at every replay);
    returns the lists and ``steps``.

    The checks of :func:`adamw_step` (with step 1) and TypeError for ``steps``/``skip`` that are not
    1-element float32 cuda arrays, before anything is written.
    """
    params, grads, exp_avgs, exp_avg_sqs = list(params), list(grads), list(exp_avgs), list(exp_avg_sqs)
    hyper = dict(lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps), weight_decay=float(weight_decay))
    device = _validate(params, grads, exp_avgs, exp_avg_sqs, 1, hyper)
    device = device if params else getattr(steps, "device_index", 0)
    steps_data, skip_data = _check_flag(steps, "steps", device, params), _check_flag(skip, "skip", device, params)
    mode, consts, doubles = cgen.adamw_amp_scalars(decoupled=decoupled, **hyper)
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
            source = functools.partial(_source, pc, gc, True)
            kernel = raw_kernel(("adamw_step_amp", pc.tag, gc.tag), source, _name(pc, gc, True))
            args = (meta, np.int32(len(members)), np.int32(mode), steps_data, skip_data)
            kernel((blocks,), (BLOCK,), (*args, *(scalar(x) for x in consts), *(np.float64(x) for x in doubles)))
        raw_kernel((_STEPS_NAME,), _steps_source, _STEPS_NAME)((1,), (1,), (steps_data, skip_data))
    return params, exp_avgs, exp_avg_sqs, steps


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    return {"adamw_step": adamw_step, "adamw_step_amp": adamw_step_amp}
