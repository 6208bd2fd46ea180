"""The fused Adam/AdamW step on OpenCL: every tensor of a parameter group in a few multi-tensor launches.

Per element, op for op the CPU backend's ``adamw_step`` (and the core's
``adamw_step_reference``), each operation rounded on its own (no fma
contraction), so on a device with correctly rounded division and square root
the results are the CPU backend's bits.  The arithmetic is float32 (float64
for float64 parameters); a float16/bfloat16 parameter is widened, updated and
rounded once.  Parameters and moments are updated in place, as the contract
allows (the optimizer passes arrays it owns).  The step-dependent scalars
(bias corrections, step size) are kernel arguments: a new step compiles nothing.

``adamw_step_amp`` is the same step for a fused optimizer under a GradScaler: the
step count and the found-inf flag stay on the device (no host read), and each
work-item computes the two bias corrections from the count, in double as the
host does (:func:`ampcore.cgen.adamw_amp_constants`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt
from ampcore.kernels import check_adamw_step

from .amp import (
    NO_CONTRACT,
    Launch,
    TileShape,
    buffer_args,
    max_variant,
    plan_launches,
    pointer_params,
    select_code,
    tile_shape,
)
from .array import CLArray
from .codegen import CType, ctype, prelude

__all__ = ["adamw_step", "adamw_step_amp", "kernels"]

_SCALARS = cgen.ADAMW_SCALARS


def _validate(
    params: Sequence[Any],
    grads: Sequence[Any],
    exp_avgs: Sequence[Any],
    exp_avg_sqs: Sequence[Any],
    step: Any,
    hyper: dict[str, float],
) -> None:
    """Every check, before any write: opencl arrays on one device, then the checks all backends share."""
    state = None
    for i, arrays in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        if not all(isinstance(a, CLArray) for a in arrays):
            raise TypeError(
                f"adamw_step tensor {i}: expected opencl device arrays, got "
                f"{', '.join(type(a).__name__ for a in arrays)}"
            )
        for a in arrays:
            if state is None:
                state = a.state
            elif a.state is not state:
                raise ValueError(
                    f"adamw_step tensor {i}: arrays on different devices "
                    f"(opencl:{state.index} and opencl:{a.state.index})"
                )
    check_adamw_step(
        params, grads, exp_avgs, exp_avg_sqs, step, hyper, shape_of=lambda a: a.shape, dtype_of=lambda a: a.dtype
    )


def _source(p_type: CType, g_type: CType, k: int, shape: TileShape, fp64: bool, amp: bool = False) -> str:
    """The step kernel for K tensors; ``amp``: the fused AMP step's, which reads the step count and the skip
    flag on the device (:func:`ampcore.cgen.adamw_amp_constants`, double arithmetic: needs ``fp64``)."""
    c = "double" if p_type.tag == "f64" else "float"
    pointers = [
        ("p", f"__global {p_type.storage}"),
        ("g", f"__global const {g_type.storage}"),
        ("m", f"__global {c}"),
        ("v", f"__global {c}"),
    ]
    scalars = ", ".join(f"{c} {name}" for name in (cgen.ADAMW_AMP_SCALARS if amp else _SCALARS))
    prologue = ""
    if amp:
        doubles = ", ".join(f"double {name}" for name in cgen.ADAMW_AMP_DOUBLES)
        scalars = f"__global const float *steps, __global const float *skip, {scalars}, {doubles}"
        prologue = cgen.adamw_amp_constants(cgen.OPENCL, p_type.tag, "steps", "skip", "    ")
    body = cgen.adamw_element(cgen.OPENCL, p_type.tag, p_type.storage, g_type.tag, ("p", "g", "m", "v"), "i", " " * 12)
    return (
        prelude(fp64)
        + NO_CONTRACT
        + f"""
__kernel __attribute__((reqd_work_group_size({shape.local}, 1, 1)))
void adamw_step({pointer_params(k, pointers)}, __constant long *meta, int mode, {scalars}) {{
{prologue}{select_code(k, shape, pointers)}
    for (long i = first; i < last; ++i) {{
{body}    }}
}}
"""
    )


def adamw_step(
    params: Sequence[CLArray],
    grads: Sequence[CLArray],
    exp_avgs: Sequence[CLArray],
    exp_avg_sqs: Sequence[CLArray],
    *,
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
) -> tuple[list[CLArray], list[CLArray], list[CLArray]]:
    """Adam (``decoupled=False``: L2 term added to the gradient) or AdamW (``decoupled=True``:
    ``p *= 1 - lr * weight_decay``) over one parameter group, in place; returns the updated lists.

    ValueError/TypeError (the CPU backend's checks, plus one device for all
    arrays) before anything is written.  One launch per (parameter dtype,
    gradient dtype) for up to K tensors (K = 16 on a 1024-byte argument limit).
    """
    params, grads, exp_avgs, exp_avg_sqs = list(params), list(grads), list(exp_avgs), list(exp_avg_sqs)
    hyper = dict(lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps), weight_decay=float(weight_decay))
    _validate(params, grads, exp_avgs, exp_avg_sqs, step, hyper)
    if not params:
        return params, exp_avgs, exp_avg_sqs
    state = params[0].state
    mode, scalars = cgen.adamw_scalars(int(step), decoupled=decoupled, **hyper)
    by_dtypes: dict[tuple[dt.DType, dt.DType], list[tuple[CLArray, ...]]] = {}
    for group in zip(params, grads, exp_avgs, exp_avg_sqs):
        by_dtypes.setdefault((group[0].dtype, group[1].dtype), []).append(group)
    shape = tile_shape(state)
    for (pd, gd), groups in by_dtypes.items():
        p_type, g_type = ctype(pd), ctype(gd)
        scalar_type = np.float64 if pd == dt.float64 else np.float32
        max_k = max_variant(state, 4, 4 + len(_SCALARS) * np.dtype(scalar_type).itemsize)
        for launch in plan_launches(state, groups, max_k):
            _run(state, launch, p_type, g_type, shape, mode, scalar_type, scalars)
    return params, exp_avgs, exp_avg_sqs


def _run(
    state: Any,
    launch: Launch,
    p_type: CType,
    g_type: CType,
    shape: TileShape,
    mode: int,
    scalar_type: Any,
    scalars: list[float],
    amp: tuple[CLArray, CLArray, list[float]] | None = None,
) -> None:
    """One launch; ``amp``: ``(steps, skip, doubles)`` of the fused AMP step."""
    names = cgen.ADAMW_AMP_SCALARS if amp else _SCALARS
    types = [None] * (4 * launch.k + 1) + [np.int32] + ([None, None] if amp else []) + [scalar_type] * len(names)
    types += [np.float64] * len(cgen.ADAMW_AMP_DOUBLES) if amp else []
    kernel = state.kernel(
        ("adamw_step_amp" if amp else "adamw_step", p_type.tag, g_type.tag, launch.k, shape),
        lambda: _source(p_type, g_type, launch.k, shape, state.fp64, amp=amp is not None),
        "adamw_step",
        types,
    )
    extra = [] if amp is None else [amp[0].buffer, amp[1].buffer]
    doubles = [] if amp is None else amp[2]
    state.launch(
        kernel,
        (launch.n_groups * shape.local,),
        (shape.local,),
        *buffer_args(launch, 4),
        launch.meta,
        mode,
        *extra,
        *scalars,
        *doubles,
    )


def _check_flag(value: Any, name: str, state: Any) -> None:
    if not (isinstance(value, CLArray) and value.dtype == dt.float32 and value.size == 1):
        raise TypeError(f"adamw_step_amp: {name} must be a 1-element float32 opencl array, got {value!r}")
    if state is not None and value.state is not state:
        raise ValueError(
            f"adamw_step_amp: {name} is on opencl:{value.state.index}, the tensors on opencl:{state.index}"
        )


def _steps_source(fp64: bool) -> str:
    return prelude(fp64) + cgen.adamw_amp_steps_kernel(cgen.OPENCL)


def adamw_step_amp(
    params: Sequence[CLArray],
    grads: Sequence[CLArray],
    exp_avgs: Sequence[CLArray],
    exp_avg_sqs: Sequence[CLArray],
    steps: CLArray,
    skip: CLArray,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
) -> tuple[list[CLArray], list[CLArray], list[CLArray], CLArray]:
    """:func:`adamw_step` numbered ``steps + 1`` and skipped where ``skip`` is nonzero, both read on the device
    (1-element float32 arrays): no host read.  The bias corrections are computed per work-item in double, as
    the host computes them for :func:`adamw_step` (:func:`ampcore.cgen.adamw_amp_constants`).  In place, the
    step count too (advanced after the step's kernels); returns the lists and ``steps``.

    A device without ``cl_khr_fp64`` has no double to compute them in: there the two flags are read on the
    host (one 8-byte transfer, which :func:`ampcore.count_host_syncs` does not see) and :func:`adamw_step`
    runs, so the bits stay :func:`adamw_step`'s.  Every check of :func:`adamw_step` (with step 1), and
    TypeError for ``steps``/``skip`` that are not 1-element float32 opencl arrays, before anything is written.
    """
    params, grads, exp_avgs, exp_avg_sqs = list(params), list(grads), list(exp_avgs), list(exp_avg_sqs)
    hyper = dict(lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps), weight_decay=float(weight_decay))
    _validate(params, grads, exp_avgs, exp_avg_sqs, 1, hyper)
    state = params[0].state if params else None
    _check_flag(steps, "steps", state)
    _check_flag(skip, "skip", state)
    state = steps.state
    if not state.fp64:
        return _amp_on_the_host(params, grads, exp_avgs, exp_avg_sqs, steps, skip, decoupled, hyper)
    mode, scalars, doubles = cgen.adamw_amp_scalars(decoupled=decoupled, **hyper)
    by_dtypes: dict[tuple[dt.DType, dt.DType], list[tuple[CLArray, ...]]] = {}
    for group in zip(params, grads, exp_avgs, exp_avg_sqs):
        by_dtypes.setdefault((group[0].dtype, group[1].dtype), []).append(group)
    shape = tile_shape(state)
    extra_bytes = 2 * 8 + len(cgen.ADAMW_AMP_DOUBLES) * 8
    for (pd, gd), groups in by_dtypes.items():
        p_type, g_type = ctype(pd), ctype(gd)
        scalar_type = np.float64 if pd == dt.float64 else np.float32
        scalar_bytes = 4 + len(cgen.ADAMW_AMP_SCALARS) * np.dtype(scalar_type).itemsize + extra_bytes
        max_k = max_variant(state, 4, scalar_bytes)
        for launch in plan_launches(state, groups, max_k):
            _run(state, launch, p_type, g_type, shape, mode, scalar_type, scalars, (steps, skip, doubles))
    kernel = state.kernel(("adamw_amp_steps",), lambda: _steps_source(state.fp64), "adamw_amp_steps")
    state.launch(kernel, (1,), (1,), steps.buffer, skip.buffer)  # in place, after the step's kernels
    return params, exp_avgs, exp_avg_sqs, steps


def _amp_on_the_host(
    params: list[CLArray],
    grads: list[CLArray],
    exp_avgs: list[CLArray],
    exp_avg_sqs: list[CLArray],
    steps: CLArray,
    skip: CLArray,
    decoupled: bool,
    hyper: dict[str, float],
) -> tuple[list[CLArray], list[CLArray], list[CLArray], CLArray]:
    """The fused AMP step on a device without double arithmetic: the two flags read on the host."""
    state = steps.state
    flags = np.empty(2, np.float32)
    state.download(flags[:1], skip.buffer)
    state.download(flags[1:], steps.buffer)
    if flags[0] != 0.0:
        return params, exp_avgs, exp_avg_sqs, steps
    step = int(flags[1]) + 1
    adamw_step(params, grads, exp_avgs, exp_avg_sqs, step=step, decoupled=decoupled, **hyper)
    host = np.full(steps.shape, step, np.float32)
    event = state.upload(steps.buffer, host)
    event.wait()
    return params, exp_avgs, exp_avg_sqs, steps


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernel by contract name: the fused Adam/AdamW step."""
    return {"adamw_step": adamw_step, "adamw_step_amp": adamw_step_amp}
