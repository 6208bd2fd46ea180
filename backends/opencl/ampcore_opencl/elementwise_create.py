"""Creation kernels of the opencl backend: full, arange, uniform and normal, all filled on the device.

Random numbers come from a counter-based generator: element ``i`` of a
tensor with seed ``s`` is SplitMix64's finaliser applied to ``mix(s) + (i + 1)
* golden`` (the SplitMix64 stream, which passes BigCrush), so every work-item
computes its own element with no state, and the same seed gives the same bits
on every launch and every device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CLArray, empty
from .codegen import ctype, prelude
from .devices import device_state
from .elementwise_gen import kernel_pair, launch_linear, storage_scalar

__all__ = ["kernels", "splitmix64"]

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15

_RANDOM_HELPERS = """
inline ulong ew_mix(ulong z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    return z ^ (z >> 31);
}
inline ulong ew_bits(ulong key, long i) { return ew_mix(key + (ulong)(i + 1) * 0x9E3779B97F4A7C15UL); }
"""

# The largest value below 1 of each 2-byte dtype: a float32 sample just below 1 would round up to 1.0.
_BELOW_ONE = {"f16": "0x1.ffcp-1f", "bf16": "0x1.fep-1f"}

_SAMPLE = {
    ("uniform", False): "float v = (float)(uint)(ew_bits(key, i) >> 40) * 0x1p-24f;",  # exact: 24 bits
    ("uniform", True): "double v = (double)(ew_bits(key, i) >> 11) * 0x1p-53;",
    # Box-Muller on u1 in (0, 1] (log stays finite) and u2 in [0, 1), one sample per element.
    ("normal", False): """ulong r = ew_bits(key, i);
    float u1 = convert_float((r & 0xffffffffUL) + 1) * 0x1p-32f, u2 = (float)(uint)(r >> 40) * 0x1p-24f;
    float v = sqrt(-2.0f * log(u1)) * cospi(2.0f * u2);""",
    ("normal", True): """double u1 = (double)((ew_bits(key, 2 * i) >> 11) + 1) * 0x1p-53;
    double u2 = (double)(ew_bits(key, 2 * i + 1) >> 11) * 0x1p-53;
    double v = sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);""",
}


def splitmix64(z: int) -> int:
    """SplitMix64's finaliser on the host (the seed's key; the kernel has the same function)."""
    z &= _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def full(shape: Sequence[int], value: Any, dtype: Any, device_index: int = 0) -> CLArray:
    """``shape`` filled with ``value`` rounded once to ``dtype`` (inf, NaN and -0.0 kept)."""
    dtype = dt.as_dtype(dtype)
    state = device_state(device_index)
    out = empty(state, shape, dtype)
    if out.size:
        pattern = np.asarray(storage_scalar(value, dtype), dtype=ctype(dtype).host).reshape(1)
        state.fill(out.buffer, pattern, out.nbytes)
    return out


def _arange_length(start: Any, stop: Any, step: Any) -> int:
    if all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
        return max(0, -((int(start) - int(stop)) // int(step)))  # exact ceil division
    return max(0, math.ceil((float(stop) - float(start)) / float(step)))


def arange(start: Any, stop: Any, step: Any, dtype: Any, device_index: int = 0) -> CLArray:
    """``start + i * step`` for ``i`` below ``ceil((stop - start) / step)``, like NumPy: in int64 when
    every argument is an integer, else in double (float where the device has none) rounded once to
    ``dtype`` (integers truncate)."""
    dtype = dt.as_dtype(dtype)
    state, ct = device_state(device_index), ctype(dtype)
    out = empty(state, (_arange_length(start, stop, step),), dtype)
    if out.size == 0:
        return out
    integral = all(isinstance(v, (int, np.integer)) for v in (start, stop, step)) and not dtype.is_floating_point
    work = "long" if integral else "double" if state.fp64 else "float"
    if integral:
        first, delta = np.int64(start), np.int64(step)
    else:  # NumPy fills start + i * delta with delta = (start + step) - start
        first, delta = float(start), (float(start) + float(step)) - float(start)
        first, delta = (
            (np.float64(first), np.float64(delta)) if work == "double" else (np.float32(first), np.float32(delta))
        )
    value = f"first + ({work})i * delta" if not integral else "(long)((ulong)first + (ulong)i * (ulong)delta)"
    if ct.tag == "f16" and work == "double":
        value = f"double_to_float_odd({value})"
    store = ct.store("out", "i", value, value_type="float" if ct.tag == "f16" else work)
    name = f"ew_arange_{ct.tag}_{work}"
    params = [f"__global {ct.storage} *out", f"{work} first", f"{work} delta", "long base", "long n"]
    source = prelude(state.fp64) + kernel_pair(name, params, "long i = base + get_global_id(0);", "i >= n", store)
    launch_linear(
        state,
        ("arange", ct.tag, work),
        name,
        lambda: source,
        [None, first.dtype, delta.dtype],
        [out.buffer, first, delta],
        out.size,
    )
    return out


def _random(kind: str) -> Callable[..., CLArray]:
    def kernel(shape: Sequence[int], dtype: Any, seed: int, device_index: int = 0) -> CLArray:
        dtype = dt.as_dtype(dtype)
        if not dtype.is_floating_point:
            raise TypeError(f"{kind}() makes floating-point samples, not {dtype.name}; use a float dtype")
        state, ct = device_state(device_index), ctype(dtype)
        out = empty(state, shape, dtype)
        if out.size == 0:
            return out
        wide = ct.tag == "f64"
        sample = _SAMPLE[(kind, wide)]
        if kind == "uniform" and ct.tag in _BELOW_ONE:
            sample += f"\n    v = fmin(v, {_BELOW_ONE[ct.tag]});"
        store = ct.store("out", "i", "v", value_type="double" if wide else "float")
        name = f"ew_{kind}_{ct.tag}"
        params = [f"__global {ct.storage} *out", "ulong key", "long base", "long n"]
        source = (
            prelude(state.fp64)
            + _RANDOM_HELPERS
            + kernel_pair(name, params, "long i = base + get_global_id(0);", "i >= n", f"{sample}\n    {store}")
        )
        launch_linear(
            state,
            (kind, ct.tag),
            name,
            lambda: source,
            [None, np.uint64],
            [out.buffer, np.uint64(splitmix64(int(seed)))],
            out.size,
        )
        return out

    kernel.__name__ = kind
    kernel.__doc__ = f"{kind} samples of ``dtype`` in ``shape``, deterministic in ``seed``."
    return kernel


def kernels() -> dict[str, Callable[..., Any]]:
    """The creation kernels, keyed by contract name."""
    return {"full": full, "arange": arange, "uniform": _random("uniform"), "normal": _random("normal")}
