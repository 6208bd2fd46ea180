"""AMP kernels on CUDA: ``unscale_and_check`` (every gradient of a dtype in one launch) and ``update_scale``.

Neither reads anything back to the host: ``found_inf`` and the scale stay on
the device, and the only host synchronisation of a training step is the
GradScaler's read of ``found_inf`` for the skip decision.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt

from .array import CuArray, contiguous, unwrap_all
from .codegen import FLOAT_CTYPES, PRELUDE, CType, ctype
from .launch import BLOCK, ILP, MULTI_TENSOR_HELPERS, TILE, multi_tensor_meta, raw_kernel
from .runtime import import_cupy

__all__ = ["sources", "unscale_and_check", "update_scale", "kernels"]


def _unscale_source(c: CType) -> str:
    compute = "double" if c.tag == "f64" else "float"
    return (
        PRELUDE
        + MULTI_TENSOR_HELPERS
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
unscale_and_check_{c.tag}(const long long *__restrict__ meta, int n_tensors, const float *__restrict__ inv_scale,
                          float *__restrict__ found_inf) {{
    const long long blk = blockIdx.x;
    const int t = mt_tensor(meta, n_tensors, blk);
    {c.storage} *g = ({c.storage} *)mt_ptr(meta, n_tensors, 1, t, 0);
    const long long n = mt_size(meta, n_tensors, t);
    const long long base = (blk - meta[t]) * {TILE};
    const {compute} inv = ({compute})inv_scale[0];
    int bad = 0;
    #pragma unroll
    for (int j = 0; j < {ILP}; ++j) {{
        const long long i = base + (long long)j * {BLOCK} + threadIdx.x;
        if (i < n) {{
{cgen.unscale_element(cgen.CUDA, c.tag, c.storage, "g", "i", " " * 12)}        }}
    }}
    /* only ever set: the flag accumulates over calls; every block that saw one writes the same 1.0f */
    if (__syncthreads_or(bad) && threadIdx.x == 0) found_inf[0] = 1.0f;
}}
"""
    )


_UPDATE_SOURCE = PRELUDE + cgen.update_scale_kernel(
    cgen.CUDA, "double growth, double backoff", "(double)s * growth", "(double)s * backoff"
)


def sources() -> dict[str, str]:
    """Every kernel source of this family, by kernel name."""
    out = {f"unscale_and_check_{c.tag}": _unscale_source(c) for c in FLOAT_CTYPES}
    out["update_scale"] = _UPDATE_SOURCE
    return out


def _one_device(arrays: Sequence[CuArray], what: str) -> int:
    devices = {a.device_index for a in arrays}
    if len(devices) > 1:
        raise ValueError(f"{what}: arrays on different devices ({', '.join(f'cuda:{d}' for d in sorted(devices))})")
    return devices.pop()


def _check_scalar(name: str, a: Any, want: dt.DType, what: str) -> None:
    if not isinstance(a, CuArray) or a.dtype != want or a.size != 1:
        raise TypeError(f"{what}: {name} must be a 1-element {want.name} cuda array, got {a!r}")


def unscale_and_check(
    grads: Sequence[CuArray], inv_scale: CuArray, found_inf: CuArray
) -> tuple[list[CuArray], CuArray]:
    """Multiply every gradient in place by ``inv_scale[0]`` (read on the device) and set ``found_inf[0]`` to 1.0
    if any unscaled value is inf/NaN or overflows its dtype; never clears it.

    One launch per gradient dtype, however many gradients.  A buffer listed
    twice is scaled once.  TypeError for a non-floating gradient or a bad
    ``inv_scale``/``found_inf``; ValueError for arrays on different devices.
    """
    grads = list(grads)
    unwrap_all([*grads, inv_scale, found_inf], "unscale_and_check")
    _check_scalar("inv_scale", inv_scale, dt.float32, "unscale_and_check")
    _check_scalar("found_inf", found_inf, dt.float32, "unscale_and_check")
    device = _one_device([*grads, inv_scale, found_inf], "unscale_and_check")
    cupy = import_cupy()
    by_dtype: dict[dt.DType, list[tuple[Any]]] = {}
    seen: set[tuple[int, int]] = set()
    for i, g in enumerate(grads):
        if not g.dtype.is_floating_point:
            raise TypeError(f"unscale_and_check: gradient {i} is {g.dtype.name}; gradients must be floating")
        if not (g.data.flags.c_contiguous or g.data.flags.f_contiguous):
            # A strided or broadcast view: the kernel scales a dense block of memory, so scale a copy (and
            # return it) rather than write through the view's gaps.
            with cupy.cuda.Device(device):
                g = grads[i] = CuArray(contiguous(g.data), g.dtype)
        key = (g.data.data.ptr, g.size)
        if g.size and key not in seen:
            seen.add(key)
            by_dtype.setdefault(g.dtype, []).append((g.data,))
    with cupy.cuda.Device(device):
        for dtype, groups in by_dtype.items():
            c = ctype(dtype)
            meta, blocks = multi_tensor_meta(device, groups)
            kernel = raw_kernel(
                ("unscale_and_check", c.tag), functools.partial(_unscale_source, c), f"unscale_and_check_{c.tag}"
            )
            kernel((blocks,), (BLOCK,), (meta, np.int32(len(groups)), inv_scale.data, found_inf.data))
    return grads, found_inf


def update_scale(
    scale: CuArray,
    growth_tracker: CuArray,
    found_inf: CuArray,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
) -> tuple[CuArray, CuArray]:
    """torch's dynamic loss-scale rule (``_amp_update_scale_``, spelled out in
    :func:`ampcore.cgen.update_scale_kernel`) in one device thread, no host read.

    Products in float64, rounded once to float32 (torch's float * double).
    Updates ``scale`` and ``growth_tracker`` in place and returns them.
    """
    _check_scalar("scale", scale, dt.float32, "update_scale")
    _check_scalar("growth_tracker", growth_tracker, dt.int32, "update_scale")
    _check_scalar("found_inf", found_inf, dt.float32, "update_scale")
    if isinstance(growth_interval, bool) or not isinstance(growth_interval, (int, np.integer)):
        raise TypeError(f"update_scale: growth_interval must be an int, got {growth_interval!r}")
    device = _one_device([scale, growth_tracker, found_inf], "update_scale")
    cupy = import_cupy()
    interval = max(min(int(growth_interval), 2**63 - 1), -(2**63))
    with cupy.cuda.Device(device):
        # In place (the contract allows it; one thread reads both before it writes): a captured step (a CUDA graph)
        # then moves the same scale at every replay.
        out_scale, out_tracker = scale.data, growth_tracker.data
        kernel = raw_kernel(("update_scale",), lambda: _UPDATE_SOURCE, "update_scale")
        kernel(
            (1,),
            (1,),
            (
                scale.data,
                growth_tracker.data,
                found_inf.data,
                out_scale,
                out_tracker,
                np.float64(growth_factor),
                np.float64(backoff_factor),
                np.int64(interval),
            ),
        )
    return CuArray(out_scale, dt.float32), CuArray(out_tracker, dt.int32)


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    return {"unscale_and_check": unscale_and_check, "update_scale": update_scale}
