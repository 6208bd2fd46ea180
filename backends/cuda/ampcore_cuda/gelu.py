"""Fused GELU and its backward as one elementwise kernel each, computed in float64 and rounded once.

Phi(x) = erfc(-x / sqrt 2) / 2, not (1 + erf(x / sqrt 2)) / 2: no cancellation
for negative x.  The tanh form uses (1 + tanh y) / 2 = sigmoid(2y) from
a = exp(-|2y|) <= 1, which never cancels as tanh saturates (the opencl
backend's formulation).  float64 costs little here: the kernel is
memory-bound, and CUDA's double erfc/exp are within a few double ulps, so the
float32/16-bit results are all but always correctly rounded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .array import CuArray, contiguous
from .codegen import FLOAT_CTYPES, PRELUDE, CType, ctype
from .launch import BLOCK, raw_kernel
from .runtime import import_cupy

__all__ = ["sources", "gelu", "gelu_backward", "kernels"]

APPROXIMATIONS = ("none", "tanh")

_SIGMOID_2Y = """    const double y2 = 1.5957691216057308 * (x + 0.044715 * x * x * x);
    const double a = exp(-fabs(y2));
    const double p = 1.0 / (1.0 + a);
    const double s = y2 >= 0 ? p : a * p;
"""
_FORWARD = {"none": "0.5 * x * erfc(-x * 0.7071067811865476)", "tanh": "x * s"}
_BACKWARD = {
    "none": "gy * (0.5 * erfc(-x * 0.7071067811865476) + x * (0.3989422804014327 * exp(-0.5 * x * x)))",
    "tanh": "gy * (s + x * (a * p * p) * (1.5957691216057308 * (1.0 + 3.0 * 0.044715 * x * x)))",
}


def _store_double(c: CType, value: str) -> str:
    """Round a double once to ``c``: float32 directly, 16-bit through round-to-odd float (still one rounding)."""
    if c.tag == "f64":
        return f"out[i] = {value};"
    if c.tag == "f32":
        return f"out[i] = __double2float_rn({value});"
    return c.store("out", "i", f"double_to_float_odd({value})")


def _name(c: CType, approximate: str, backward: bool) -> str:
    return f"gelu{'_backward' if backward else ''}_{approximate}_{c.tag}"


def _source(c: CType, approximate: str, backward: bool) -> str:
    expr = (_BACKWARD if backward else _FORWARD)[approximate]
    gy_param = f"const {c.storage} *__restrict__ gys, " if backward else ""
    gy_load = f"    const double gy = (double){c.load('gys', 'i')};\n" if backward else ""
    prep = _SIGMOID_2Y if approximate == "tanh" else ""
    return (
        PRELUDE
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
{_name(c, approximate, backward)}(const {c.storage} *__restrict__ xs, {gy_param}{c.storage} *__restrict__ out,
        long long size) {{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < size;
         i += (long long)gridDim.x * blockDim.x) {{
        const double x = (double){c.load("xs", "i")};
{gy_load}{prep}        const double v = {expr};
        {_store_double(c, "v")}
    }}
}}
"""
    )


def sources() -> dict[str, str]:
    """Every kernel source of this family, by kernel name."""
    return {_name(c, a, b): _source(c, a, b) for c in FLOAT_CTYPES for a in APPROXIMATIONS for b in (False, True)}


def _launch(x: CuArray, gy: CuArray | None, approximate: str) -> CuArray:
    what = "gelu" if gy is None else "gelu_backward"
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"{what}: approximate must be 'none' or 'tanh', got {approximate!r}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{what}: input must be floating, got {x.dtype.name}")
    if gy is not None and (gy.shape != x.shape or gy.dtype != x.dtype):
        raise ValueError(f"{what}: gradient {gy!r} must have the input's shape and dtype ({x!r})")
    cupy = import_cupy()
    c = ctype(x.dtype)
    with cupy.cuda.Device(x.device_index):
        out = cupy.empty(x.shape, dtype=c.cupy_dtype)
        if x.size:
            backward = gy is not None
            kernel = raw_kernel(
                ("gelu", c.tag, approximate, backward),
                lambda: _source(c, approximate, backward),
                _name(c, approximate, backward),
            )
            inputs = [contiguous(x.data)] + ([contiguous(gy.data)] if backward else [])
            grid = min(-(-x.size // BLOCK), 65535 * 8)  # grid-stride loop beyond this
            kernel((grid,), (BLOCK,), (*inputs, out, np.int64(x.size)))
    return CuArray(out, x.dtype)


def gelu(x: CuArray, approximate: str = "none") -> CuArray:
    """x * Phi(x) (``approximate="none"``) or torch's tanh form, rounded once to ``x``'s dtype."""
    return _launch(x, None, approximate)


def gelu_backward(x: CuArray, gy: CuArray, approximate: str = "none") -> CuArray:
    """gy * gelu'(x), rounded once to ``x``'s dtype; ``gy`` has ``x``'s shape and dtype."""
    return _launch(x, gy, approximate)


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    return {"gelu": gelu, "gelu_backward": gelu_backward}
