"""Source generation and launching shared by the elementwise kernels.

One template covers every elementwise kernel: an output written at the
linear index, and operands that are each a full-size array (read at the same
index), a one-element array (read at 0), a host scalar (a kernel argument) or
a broadcast array (read through strides).  Kernels with no broadcast operand
are *linear*: no index arithmetic at all.  The others are *strided*: a 3-D
range over (innermost axis, the next one, the rest) of the collapsed
broadcast layout, so layouts of up to three collapsed axes (bias add, row
scaling, (B, T, C) against (B, 1, C)) need no division; each further axis
costs a div/mod.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CLArray, broadcast_strides, collapse
from .codegen import CType, ctype, prelude
from .devices import DeviceState

__all__ = [
    "Operand",
    "Plan",
    "plan",
    "addressing",
    "source",
    "kernel_pair",
    "launch_linear",
    "run",
    "scalar_arg",
    "storage_scalar",
    "CAP",
]

CAP = 256  # work-group size: PoCL vectorises a work-group's loop; GPUs like 256 too

# 64-bit integers from the host: long/ulong conversions that never invoke C's undefined signed overflow.
_UNSIGNED = {"int": "uint", "long": "ulong"}

# float -> half and bfloat16 from a double or an integer, rounded once: round to odd in float first (24 bits
# keep enough for a correct second rounding to 11 or 8 bits).
ODD_HELPERS = """
inline float long_to_float_odd(long x) {
    float f = convert_float_rtz(x);
    if (convert_long_rtz(f) != x) f = as_float(as_uint(f) | 1u);
    return f;
}
"""


@dataclass(frozen=True)
class Operand:
    """One input of a kernel: its dtype, how it is addressed, the C type it is read as.

    ``mode``: ``c`` full-size (linear index), ``p`` one element, ``s`` host scalar, ``b`` broadcast.
    ``raw``: read the storage bits unconverted (``where``, bit-level neg/abs).
    """

    ct: CType
    mode: str
    work: str  # C type the kernel computes in
    raw: bool = False

    def param(self, k: int) -> str:
        if self.mode == "s":
            return f"{self.ct.storage if self.raw else 'float' if self.work == 'half' else self.work} s{k}"
        return f"__global const {self.ct.storage} *restrict p{k}"

    def read(self, k: int, index: str) -> str:
        if self.mode == "s":
            return f"s{k}"
        idx = "0" if self.mode == "p" else index
        if self.raw:
            return f"p{k}[{idx}]"
        return f"({self.work})({self.ct.load(f'p{k}', idx)})"


def scalar_arg(value: Any, dtype: dt.DType, work: str) -> Any:
    """A Python number as a kernel over ``dtype`` arrays computes with it: a float in the compute type (float32
    for float16/bfloat16, as the cpu and cuda backends and torch's opmath take it: rounding it to the 16-bit
    dtype first made ``x * (1 / 0.9)`` differ from theirs, and from the fused chain of a captured step, which
    holds the constant in float32), an int wrapped to the integer dtype."""
    if dtype.is_floating_point:
        return np.float64(float(value)) if work == "double" else np.float32(float(value))
    if dtype == dt.bool_:
        return np.int32(bool(value))
    bits = np.iinfo(dtype.numpy).bits
    wrapped = int(value) & ((1 << bits) - 1)  # out-of-range Python ints wrap, as NumPy's astype does
    return dtype.numpy.type(wrapped - (1 << bits) if wrapped >> (bits - 1) else wrapped)


def storage_scalar(value: Any, dtype: dt.DType) -> Any:
    """The storage bits of a Python number in ``dtype`` (uint16 for float16/bfloat16, uint8 for bool)."""
    if dtype.is_floating_point:
        return dt.convert(np.asarray(float(value)), dtype).view(ctype(dtype).host)[()]
    if dtype == dt.bool_:
        return np.uint8(bool(value))
    return scalar_arg(value, dtype, "")


def _scalar_numpy(op: Operand) -> Any:
    if op.mode != "s":
        return None
    if op.raw:
        return op.ct.host
    return {"float": np.float32, "double": np.float64, "int": np.int32, "long": np.int64, "half": np.float32}[op.work]


@dataclass(frozen=True)
class Plan:
    """How a launch addresses its operands: ``modes`` per operand, and for strided launches the collapsed
    ``shape`` and per-broadcast-operand strides."""

    modes: str
    n: int
    shape: tuple[int, ...] = ()
    strides: tuple[tuple[int, ...], ...] = ()

    @property
    def strided(self) -> bool:
        return "b" in self.modes


def plan(out_shape: Sequence[int], operands: Sequence[Any]) -> Plan:
    """The addressing of ``operands`` (CLArrays or Python numbers) broadcast to ``out_shape``."""
    n = math.prod(out_shape)
    modes = "".join(
        "s" if not isinstance(v, CLArray) else "c" if v.size == n else "p" if v.size == 1 else "b" for v in operands
    )
    if "b" not in modes:
        return Plan(modes, n)
    strides = [broadcast_strides(v.shape, out_shape) for v, m in zip(operands, modes) if m == "b"]
    shape, collapsed = collapse(out_shape, *strides)
    return Plan(modes, n, shape, tuple(collapsed))


def kernel_pair(name: str, params: Sequence[str], index: str, check: str, body: str) -> str:
    """Two kernels over one body: ``name`` without a bounds check, for launches that tile exactly, and
    ``name_tail`` with ``check``.  PoCL vectorises a work-group's loop only without the early return: the
    unchecked kernel is 3-10x faster."""
    head = f"({', '.join(params)}) {{\n    {index}\n"
    return (
        f"\n__kernel void {name}{head}    {body}\n}}\n"
        f"\n__kernel void {name}_tail{head}    if ({check}) return;\n    {body}\n}}\n"
    )


def source(
    name: str,
    out: CType,
    store: Callable[[str], str],
    operands: Sequence[Operand],
    expr: str,
    helpers: str,
    strided: bool,
    fp64: bool,
    native_half: bool = False,
    lines: Sequence[str] = (),
) -> str:
    """The OpenCL source of one elementwise kernel pair (see :func:`kernel_pair`): ``out[i] = expr(v0, ...)``,
    ``lines`` (statements over the operands ``v0, ...``) computed first."""
    params = [f"__global {out.storage} *restrict out"] + [op.param(k) for k, op in enumerate(operands)]
    extra, index, check, body = addressing("".join(op.mode for op in operands), strided)
    params += extra
    for k, op in enumerate(operands):
        var_type = op.ct.storage if op.raw else op.work
        body.append(f"{var_type} v{k} = {op.read(k, f'off{k}' if op.mode == 'b' else 'i')};")
    body += lines
    body.append(store(expr.format(*[f"v{k}" for k in range(len(operands))])))
    return (
        prelude(fp64, native_half)
        + ODD_HELPERS
        + helpers
        + kernel_pair(name, params, index, check, "\n    ".join(body))
    )


def addressing(modes: str, strided: bool) -> tuple[list[str], str, str, list[str]]:
    """How a kernel over operands addressed as ``modes`` finds its elements: (the parameters after the
    operands', the index statement, the bounds check, the statements defining ``i`` (the output's element)
    and ``off{k}`` (broadcast operand ``k``'s))."""
    broadcast = [k for k, mode in enumerate(modes) if mode == "b"]
    if not strided:
        return ["long base", "long n"], "long i = base + get_global_id(0);", "i >= n", []
    # range (inner, mid, rest) over the collapsed shape (..., mid, inner); meta = shape, strides
    params = ["long inner", "long mid", "int nd", "__global const long *restrict meta"]
    params += [f"long sj{k}, long sm{k}" for k in broadcast]  # strides of the two inner axes
    index = "long j = get_global_id(0), m = get_global_id(1), o = get_global_id(2);"
    body = ["long i = (o * mid + m) * inner + j;"]
    body += [f"long off{k} = j * sj{k} + m * sm{k};" for k in broadcast]
    body += [
        "if (nd > 2) {",
        "    long r = o;",
        "    for (int d = nd - 3; d > 0; --d) {",
        "        long s = meta[d], c = r % s;",
        "        r /= s;",
    ]
    body += [f"        off{k} += c * meta[{b + 1} * nd + d];" for b, k in enumerate(broadcast)]
    body += ["    }"] + [f"    off{k} += r * meta[{b + 1} * nd];" for b, k in enumerate(broadcast)]
    body += ["}"]
    return params, index, "j >= inner || m >= mid", body


def launch_linear(
    state: DeviceState,
    key: Any,
    name: str,
    make_source: Callable[[], str],
    types: list[Any],
    args: Sequence[Any],
    n: int,
) -> None:
    """Enqueue a linear kernel pair over ``n`` items: the unchecked kernel on whole work-groups, the
    checked one on the remainder (one more work-group)."""
    cap = min(CAP, state.max_work_group_size)
    local = min(cap, 1 << (n - 1).bit_length())
    whole = n // local * local
    types = types + [np.int64, np.int64]
    if whole:
        state.launch(state.kernel(key, make_source, name, types), (whole,), (local,), *args, 0, n)
    if whole < n:
        state.launch(state.kernel(key, make_source, name + "_tail", types), (local,), (local,), *args, whole, n)


def _pow2_divisor(n: int, cap: int) -> int:
    return min(cap, n & -n)


def run(
    state: DeviceState,
    key: Any,
    name: str,
    make_source: Callable[[], str],
    out: CLArray,
    operands: Sequence[Operand],
    values: Sequence[Any],
    p: Plan,
) -> CLArray:
    """Compile (once per key) and enqueue one elementwise kernel writing ``out``; nothing for empty outputs."""
    if out.size == 0:
        return out
    types = [None] + [_scalar_numpy(op) for op in operands]
    args = [out.buffer] + [v.buffer if isinstance(v, CLArray) else v for v in values]
    if not p.strided:
        launch_linear(state, key, name, make_source, types, args, out.size)
        return out
    cap = min(CAP, state.max_work_group_size)
    inner = p.shape[-1]
    mid = p.shape[-2] if len(p.shape) > 1 else 1
    rest = math.prod(p.shape[:-2])
    l0 = _pow2_divisor(inner, cap)
    l1, kname = _pow2_divisor(mid, cap // l0), name
    if l0 * l1 < 64 and (l0, l1) != (inner, mid):  # no exact tiling wide enough to vectorise: check bounds
        l0 = min(cap, 1 << (inner - 1).bit_length())
        l1, kname = min(cap // l0, 1 << (mid - 1).bit_length()), name + "_tail"
    inner_strides = [s for strides in p.strides for s in (strides[-1], strides[-2] if len(strides) > 1 else 0)]
    kernel = state.kernel(
        key, make_source, kname, types + [np.int64, np.int64, np.int32, None] + [np.int64] * len(inner_strides)
    )
    meta = state.meta(list(p.shape) + [s for strides in p.strides for s in strides])
    glob = (-(-inner // l0) * l0, -(-mid // l1) * l1, rest)
    state.launch(kernel, glob, (l0, l1, 1), *args, inner, mid, len(p.shape), meta, *inner_strides)
    return out


def unsigned(work: str) -> str:
    """The unsigned C type of an integer work type (wrapping arithmetic without undefined behaviour)."""
    return _UNSIGNED.get(work, work)
