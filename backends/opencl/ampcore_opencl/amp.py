"""AMP kernels on OpenCL: ``unscale_and_check``, ``update_scale``, ``gelu`` / ``gelu_backward``, and the
multi-tensor launch machinery that ``unscale_and_check`` and ``adamw_step`` (:mod:`.optim`) share.

Multi-tensor launches.  A model has hundreds of gradients, most of them small,
and one launch each would cost more than the arithmetic.  OpenCL 1.2 has no
arrays of pointers, so a kernel variant takes K buffer arguments (K in
:data:`VARIANTS`, the smallest that holds the list; longer lists are chunked)
plus a meta buffer of per-buffer tile starts and sizes.  Work-group ``w``
finds its buffer by a binary search of the tile starts (the same for the whole
group), then covers one tile of that buffer, shaped by the device
(:func:`tile_shape`):

- GPUs and accelerators: :data:`LOCAL_SIZE` work-items, one consecutive
  element each (coalesced);
- CPU devices: one work-item looping over :data:`CPU_TILE` consecutive
  elements.  The search then runs once per tile instead of once per element,
  and the compiler vectorises the loop: 4-5x faster than one element per
  work-item on both PoCL and Intel's runtime (measured, see
  benchmarks/README.md), where PoCL did not vectorise across work-items at
  all (the buffer ``switch`` stops its work-group vectoriser).

Only buffer counts, dtypes and the tile shape are in the source; sizes travel
in the meta buffer (cached by value: the same layout every step uploads
nothing) and scalars as arguments, so nothing recompiles from step to step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt

from .array import CLArray
from .codegen import CType, ctype, prelude
from .devices import DeviceState

__all__ = [
    "VARIANTS",
    "LOCAL_SIZE",
    "CPU_TILE",
    "TileShape",
    "tile_shape",
    "Launch",
    "plan_launches",
    "select_code",
    "unscale_and_check",
    "update_scale",
    "gelu",
    "gelu_backward",
    "kernels",
]

VARIANTS = (1, 2, 4, 8, 16, 32)
# Work-items per group on a GPU, one element each: a tile of LOCAL_SIZE consecutive elements of one buffer.
LOCAL_SIZE = 256
# Elements per tile on a CPU device, all in one work-item's loop: large enough that the buffer search is
# noise, small enough that a 2M-element gradient list still makes hundreds of work-groups for the cores.
CPU_TILE = 4096
_FLOAT_DTYPES = (dt.float32, dt.float64, dt.float16, dt.bfloat16)

# Bit-for-bit agreement with the CPU backend (and between devices) needs every operation rounded on its
# own: no a * b + c contracted into an fma.
NO_CONTRACT = cgen.OPENCL.no_contract


# --------------------------------------------------------------------------- multi-tensor launches
@dataclass(frozen=True)
class Launch:
    """One launch over ``len(groups)`` tensors (each a tuple of same-size arrays) in a K-buffer variant."""

    k: int
    groups: list[tuple[CLArray, ...]]
    meta: Any  # int64 buffer: tile start of each of the K slots, then each slot's size
    n_groups: int


def local_size(state: DeviceState) -> int:
    return min(LOCAL_SIZE, state.max_work_group_size)


@dataclass(frozen=True)
class TileShape:
    """How a multi-tensor launch covers a tile: ``local`` work-items of ``per_item`` consecutive elements."""

    local: int
    per_item: int

    @property
    def tile(self) -> int:
        return self.local * self.per_item


def tile_shape(state: DeviceState) -> TileShape:
    """One work-item looping over CPU_TILE elements on a CPU device; LOCAL_SIZE work-items of one element
    elsewhere (see the module docstring)."""
    from .devices import is_cpu

    if is_cpu(state.device):
        return TileShape(1, CPU_TILE)
    return TileShape(local_size(state), 1)


def max_variant(state: DeviceState, pointers_per_tensor: int, scalar_bytes: int) -> int:
    """The largest K whose arguments fit the device's parameter limit (1024 bytes on PoCL, the minimum)."""
    limit = int(getattr(state.device, "max_parameter_size", 1024))
    pointer = int(getattr(state.device, "address_bits", 64)) // 8
    fitting = [k for k in VARIANTS if (k * pointers_per_tensor + 1) * pointer + scalar_bytes <= limit]
    return fitting[-1] if fitting else 1


def plan_launches(state: DeviceState, groups: Sequence[tuple[CLArray, ...]], max_k: int) -> Iterator[Launch]:
    """Launches covering every non-empty group (a group's arrays share its first array's size)."""
    tile = tile_shape(state).tile
    work = [g for g in groups if g[0].size]
    for start in range(0, len(work), max_k):
        chunk = work[start : start + max_k]
        k = next(v for v in VARIANTS if v >= len(chunk))
        starts, total = cgen.tile_starts([g[0].size for g in chunk], tile)
        # Unused slots start at ``total``: the search never lands on them.
        meta = starts + [total] * (k - len(chunk)) + [g[0].size for g in chunk] + [0] * (k - len(chunk))
        yield Launch(k, list(chunk), state.meta(meta), total)


def buffer_args(launch: Launch, per_group: int) -> list[Any]:
    """The K * per_group pointer arguments, slot by slot; unused slots repeat the first buffers (never read)."""
    args = []
    for slot in range(launch.k):
        group = launch.groups[slot if slot < len(launch.groups) else 0]
        args += [group[j].buffer for j in range(per_group)]
    return args


def select_code(k: int, shape: TileShape, pointers: Sequence[tuple[str, str]]) -> str:
    """C statements that give this work-item its buffer ``b`` (a binary search of the tile starts), that
    buffer's size ``n``, its elements ``first`` <= i < ``last`` (``per_item`` of them, fewer at the end of
    the buffer, none past it), and bind each ``(name, pointer type)`` of ``pointers`` to slot ``b``'s
    buffer (arguments ``name0``..``name{K-1}``).  The kernel loops ``for (long i = first; i < last; ++i)``.

    An unrolled binary search, not a loop over the K starts: with the loop PoCL
    vectorised nothing and K = 32 ran 5-40x slower.
    """
    lines = ["    const long grp = (long)get_group_id(0);", "    int b = 0;"]
    lines += [f"    if (meta[b + {h}] <= grp) b += {h};" for h in (16, 8, 4, 2, 1) if h < k]
    lines += [
        f"    const long n = meta[{k} + b];",
        f"    const long first = (grp - meta[b]) * {shape.tile} + (long)get_local_id(0) * {shape.per_item};",
        f"    const long last = min(first + {shape.per_item}, n);",
    ]
    lines += [f"    {ptype} *{name} = {name}0;" for name, ptype in pointers]
    if k > 1:
        lines.append("    switch (b) {")
        for slot in range(1, k):
            binds = " ".join(f"{name} = {name}{slot};" for name, _ in pointers)
            lines.append(f"        case {slot}: {binds} break;")
        lines.append("    }")
    return "\n".join(lines) + "\n"


def pointer_params(k: int, pointers: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{ptype} *restrict {name}{slot}" for slot in range(k) for name, ptype in pointers)


def _same_state(arrays: Sequence[Any], what: str) -> DeviceState:
    """The one device of ``arrays``; TypeError/ValueError naming the odd one out."""
    state = None
    for i, a in enumerate(arrays):
        if not isinstance(a, CLArray):
            raise TypeError(f"{what}: argument {i} is a {type(a).__name__}, expected an opencl device array")
        if state is None:
            state = a.state
        elif a.state is not state:
            raise ValueError(f"{what}: arrays on different devices (opencl:{state.index} and opencl:{a.state.index})")
    assert state is not None
    return state


# --------------------------------------------------------------------------- unscale_and_check
def _unscale_source(c: CType, k: int, shape: TileShape, fp64: bool) -> str:
    compute = "double" if c.tag == "f64" else "float"
    g = [("g", f"__global {c.storage}")]
    return (
        prelude(fp64)
        + NO_CONTRACT
        + f"""
__kernel __attribute__((reqd_work_group_size({shape.local}, 1, 1)))
void unscale_and_check({pointer_params(k, g)}, __constant long *meta,
                       __constant float *inv_scale, __global float *restrict found_inf) {{
{select_code(k, shape, g)}
    const {compute} inv = ({compute})inv_scale[0];
    int bad = 0;
    for (long i = first; i < last; ++i) {{
{cgen.unscale_element(cgen.OPENCL, c.tag, c.storage, "g", "i", "        ")}    }}
    if (bad) found_inf[0] = 1.0f;  /* once per work-item, and only ever set: the flag accumulates over calls */
}}
"""
    )


def unscale_and_check(
    grads: Sequence[CLArray], inv_scale: CLArray, found_inf: CLArray
) -> tuple[list[CLArray], CLArray]:
    """Multiply every gradient in place by ``inv_scale[0]`` (read on the device) and set ``found_inf[0]`` to
    1.0 if any unscaled value is inf/NaN (or overflows its dtype); never clears it.

    One launch per dtype for up to 32 gradients.  A buffer listed twice (two
    views of one array) is scaled once.  Returns the gradients and ``found_inf``.
    """
    grads = list(grads)
    state = _same_state([*grads, inv_scale, found_inf], "unscale_and_check")
    for name, a in (("inv_scale", inv_scale), ("found_inf", found_inf)):
        if a.dtype != dt.float32 or a.size != 1:
            raise TypeError(f"unscale_and_check: {name} must be a 1-element float32 array, got {a!r}")
    by_dtype: dict[dt.DType, list[tuple[CLArray]]] = {}
    seen: set[int] = set()
    for i, g in enumerate(grads):
        if g.dtype not in _FLOAT_DTYPES:
            raise TypeError(f"unscale_and_check: gradient {i} is {g.dtype.name}; gradients must be floating")
        if id(g.buffer) not in seen:
            seen.add(id(g.buffer))
            by_dtype.setdefault(g.dtype, []).append((g,))
    shape = tile_shape(state)
    for dtype, groups in by_dtype.items():
        c = ctype(dtype)
        for launch in plan_launches(state, groups, max_variant(state, 1, 24)):
            kernel = state.kernel(
                ("unscale_and_check", c.tag, launch.k, shape),
                functools.partial(_unscale_source, c, launch.k, shape, state.fp64),
                "unscale_and_check",
            )
            state.launch(
                kernel,
                (launch.n_groups * shape.local,),
                (shape.local,),
                *buffer_args(launch, 1),
                launch.meta,
                inv_scale.buffer,
                found_inf.buffer,
            )
    return grads, found_inf


# --------------------------------------------------------------------------- update_scale
def _update_source(fp64: bool) -> str:
    # Without fp64 the factor arrives split into float hi + lo and fma(s, hi, s * lo) stands for the
    # product rounded once: exact for factors that are float32 numbers (2, 0.5, 1.5, ...), else within the
    # rare double rounding of s * lo.
    if fp64:
        params, grow, back = "double growth, double backoff", "(double)s * growth", "(double)s * backoff"
    else:
        params = "float growth, float growth_lo, float backoff, float backoff_lo"
        grow, back = "fma(s, growth, s * growth_lo)", "fma(s, backoff, s * backoff_lo)"
    return prelude(fp64) + NO_CONTRACT + cgen.update_scale_kernel(cgen.OPENCL, params, grow, back)


def _split(value: float) -> tuple[float, float]:
    hi = float(np.float32(value))
    return hi, float(np.float32(value - hi))


def update_scale(
    scale: CLArray,
    growth_tracker: CLArray,
    found_inf: CLArray,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
) -> tuple[CLArray, CLArray]:
    """torch's dynamic loss-scale rule (``_amp_update_scale_``, spelled out in
    :func:`ampcore.cgen.update_scale_kernel`) on the device, one work-item, no host read.

    Products are taken in float64 and rounded once to float32 (torch's float *
    double), or emulated with an fma on devices without fp64.  Returns new
    ``(scale, tracker)`` arrays.
    """
    return _update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval, None)


def _update_scale(
    scale: CLArray,
    growth_tracker: CLArray,
    found_inf: CLArray,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
    use64: bool | None,
) -> tuple[CLArray, CLArray]:
    """:func:`update_scale`; ``use64=False`` takes the no-fp64 (fma) path even where the device has fp64."""
    state = _same_state([scale, growth_tracker, found_inf], "update_scale")
    use64 = state.fp64 if use64 is None else use64 and state.fp64
    for name, a, want in (
        ("scale", scale, dt.float32),
        ("growth_tracker", growth_tracker, dt.int32),
        ("found_inf", found_inf, dt.float32),
    ):
        if a.dtype != want or a.size != 1:
            raise TypeError(f"update_scale: {name} must be a 1-element {want.name} array, got {a!r}")
    if isinstance(growth_interval, bool) or not isinstance(growth_interval, (int, np.integer)):
        raise TypeError(f"update_scale: growth_interval must be an int, got {growth_interval!r}")
    if use64:
        factors: list[float] = [float(growth_factor), float(backoff_factor)]
        types = [np.float64] * 2
    else:
        factors = [*_split(float(growth_factor)), *_split(float(backoff_factor))]
        types = [np.float32] * 4
    kernel = state.kernel(
        ("update_scale", use64), lambda: _update_source(use64), "update_scale", [None] * 5 + types + [np.int64]
    )
    out_scale, out_tracker = CLArray(state, scale.shape, dt.float32), CLArray(state, growth_tracker.shape, dt.int32)
    interval = max(min(int(growth_interval), 2**63 - 1), -(2**63))  # the int32 tracker never equals a bigger one
    state.launch(
        kernel,
        (1,),
        (1,),
        scale.buffer,
        growth_tracker.buffer,
        found_inf.buffer,
        out_scale.buffer,
        out_tracker.buffer,
        *factors,
        interval,
    )
    return out_scale, out_tracker


# --------------------------------------------------------------------------- gelu
# Phi(x) = erfc(-x / sqrt 2) / 2 rather than (1 + erf(x / sqrt 2)) / 2: no cancellation for negative x.
# The tanh form as (1 + tanh y) / 2 = sigmoid(2y), from a = exp(-|2y|) <= 1: torch's 1 + tanh(y) and
# 1 - tanh(y)^2 cancel as tanh saturates (22 float64 eps at x = 7.16), these never do, and exp is cheaper
# than tanh.  sigmoid(2y) = p or q (y >= 0 or not), sigmoid * (1 - sigmoid) = a p^2, p = 1 / (1 + a), q = a p.
_GELU = {
    "none": "HALF * x * erfc_(-x * SQRT1_2)",
    "tanh": "x * s",
}
_GELU_BACKWARD = {
    "none": "gy * (HALF * erfc_(-x * SQRT1_2) + x * (INV_SQRT_2PI * exp(-HALF * x * x)))",
    "tanh": "gy * (s + x * (a * p * p) * (TWO_C * (ONE + THREE * GELU_C * x * x)))",
}
_SIGMOID_2Y = """    const {c} y2 = TWO_C * (x + GELU_C * x * x * x);
    const {c} a = exp(-fabs(y2));
    const {c} p = ONE / (ONE + a);
    const {c} s = y2 >= 0 ? p : a * p;
"""
_CONSTANTS = {
    "HALF": 0.5,
    "ONE": 1.0,
    "THREE": 3.0,
    "SQRT1_2": 0.7071067811865476,
    "TWO_C": 1.5957691216057308,
    "GELU_C": 0.044715,
    "INV_SQRT_2PI": 0.3989422804014327,
}


# erfc from S. L. Moshier's Cephes (ndtr.c, release 2.2), the rational approximations the CPU backend's erf
# uses: 1 - x T(x^2) / U(x^2) for |x| < 1, exp(-x^2) P(|x|) / Q(|x|) below 8 and R / S above (reflected for
# x < 0; 0 or 2 past 27), relative error ~1e-16.  Every branch is computed and one selected (no control
# flow for PoCL's vectoriser): gelu ran 2x faster than with PoCL's builtin erfc.
_CEPHES = {
    "T": (
        9.60497373987051638749e0,
        9.00260197203842689217e1,
        2.23200534594684319226e3,
        7.00332514112805075473e3,
        5.55923013010394962768e4,
    ),
    "U": (
        1.0,
        3.35617141647503099647e1,
        5.21357949780152679795e2,
        4.59432382970980127987e3,
        2.26290000613890934246e4,
        4.92673942608635921086e4,
    ),
    "P": (
        2.46196981473530512524e-10,
        5.64189564831068821977e-1,
        7.46321056442269912687e0,
        4.86371970985681366614e1,
        1.96520832956077098242e2,
        5.26445194995477358631e2,
        9.34528527171957607540e2,
        1.02755188689515710272e3,
        5.57535335369399327526e2,
    ),
    "Q": (
        1.0,
        1.32281951154744992508e1,
        8.67072140885989742329e1,
        3.54937778887819891062e2,
        9.75708501743205489753e2,
        1.82390916687909736289e3,
        2.24633760818710981792e3,
        1.65666309194161350182e3,
        5.57535340817727675546e2,
    ),
    "R": (
        5.64189583547755073984e-1,
        1.27536670759978104416e0,
        5.01905042251180477414e0,
        6.16021097993053585195e0,
        7.40974269950448939160e0,
        2.97886665372100240670e0,
    ),
    "S": (
        1.0,
        2.26052863220117276590e0,
        9.39603524938001434673e0,
        1.20489539808096656605e1,
        1.70814450747565897222e1,
        9.60896809063285878198e0,
        3.36907645100081516050e0,
    ),
}


def _horner(c: str, coefficients: tuple[float, ...], x: str, suffix: str) -> str:
    expr = f"(({c}){coefficients[0]!r}{suffix})"
    for k in coefficients[1:]:
        expr = f"({expr} * {x} + ({c}){k!r}{suffix})"
    return expr


def _erfc_source(c: str, suffix: str) -> str:
    poly = {
        name: _horner(c, coefficients, "zz" if name in "TU" else "ao", suffix) for name, coefficients in _CEPHES.items()
    }
    return f"""
inline {c} erfc_({c} z) {{
    const {c} a = fabs(z);
    const {c} zz = z * z;
    const {c} inner = ONE - z * {poly["T"]} / {poly["U"]};
    const {c} ao = a < ({c})27 ? a : ({c})27;
    const {c} e = exp(-ao * ao);
    const {c} ratio = ao < ({c})8 ? {poly["P"]} / {poly["Q"]} : {poly["R"]} / {poly["S"]};
    const {c} tail = a < ({c})27 ? e * ratio : ({c})0;
    const {c} outer = z < ({c})0 ? ({c})2 - tail : tail;
    return isnan(z) ? z : a < ONE ? inner : outer;
}}
"""


def gelu_compute_type(state: DeviceState, dtype: dt.DType) -> str:
    """float for float16/bfloat16; double for float64, and for float32 where the device has fp64.

    OpenCL lets float erfc be 16 ulp off (exp 3, tanh 5), beyond the suite's 4 eps; from double, float32
    results are correctly rounded but for ties (0.25 eps of max(|y|, 1) measured on PoCL, whose float
    builtins happen to give 0.8 eps).  On PoCL double costs no more than float here (erfc dominates)."""
    if dtype == dt.float64 or (dtype == dt.float32 and state.fp64):
        return "double"
    return "float"


def _gelu_source(c: CType, compute: str, approximate: str, backward: bool, local: int, fp64: bool) -> str:
    suffix = "" if compute == "double" else "f"
    consts = "".join(f"#define {name} (({compute}){value!r}{suffix})\n" for name, value in _CONSTANTS.items())
    loads = f"    const {compute} x = ({compute}){c.load('xs', 'i')};\n"
    params = f"__global const {c.storage} *xs, "
    if backward:
        loads += f"    const {compute} gy = ({compute}){c.load('gys', 'i')};\n"
        params += f"__global const {c.storage} *gys, "
    if approximate == "tanh":
        loads += _SIGMOID_2Y.format(c=compute)
    expr = (_GELU_BACKWARD if backward else _GELU)[approximate]
    erfc = _erfc_source(compute, suffix) if approximate == "none" else ""
    return (
        prelude(fp64)
        + NO_CONTRACT
        + consts
        + erfc
        + f"""
__kernel __attribute__((reqd_work_group_size({local}, 1, 1)))
void gelu_kernel({params}__global {c.storage} *y, long size) {{
    const long i = (long)get_global_id(0);
    if (i >= size) return;
{loads}    const {compute} r = {expr};
    {c.store("y", "i", "r", compute)}
}}
"""
    )


def _gelu_launch(x: CLArray, gy: CLArray | None, approximate: str) -> CLArray:
    what = "gelu" if gy is None else "gelu_backward"
    if approximate not in _GELU:
        raise ValueError(f"{what}: unknown approximate {approximate!r}; valid values are 'none', 'tanh'")
    state = _same_state([x] if gy is None else [x, gy], what)
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{what}: input must be floating, got {x.dtype.name}")
    if gy is not None and (gy.shape != x.shape or gy.dtype != x.dtype):
        raise ValueError(f"{what}: gradient {gy!r} must have the input's shape and dtype ({x!r})")
    out = CLArray(state, x.shape, x.dtype)
    if not x.size:
        return out
    c, compute, local = x.ctype, gelu_compute_type(state, x.dtype), local_size(state)
    key = (what, c.tag, compute, approximate, local)
    kernel = state.kernel(
        key,
        lambda: _gelu_source(c, compute, approximate, gy is not None, local, state.fp64),
        "gelu_kernel",
        [None] * (2 if gy is None else 3) + [np.int64],
    )
    buffers = [x.buffer] if gy is None else [x.buffer, gy.buffer]
    state.launch(kernel, (-(-x.size // local) * local,), (local,), *buffers, out.buffer, x.size)
    return out


def gelu(x: CLArray, approximate: str = "none") -> CLArray:
    """x * Phi(x) (``approximate="none"``) or torch's tanh form, rounded once to ``x``'s dtype."""
    return _gelu_launch(x, None, approximate)


def gelu_backward(x: CLArray, gy: CLArray, approximate: str = "none") -> CLArray:
    """gy * gelu'(x), rounded once to ``x``'s dtype; ``gy`` has ``x``'s shape and dtype."""
    return _gelu_launch(x, gy, approximate)


def kernels() -> dict[str, Callable[..., Any]]:
    """The AMP family's kernels by contract name (the optimizer step is :mod:`.optim`'s family)."""
    return {
        "unscale_and_check": unscale_and_check,
        "update_scale": update_scale,
        "gelu": gelu,
        "gelu_backward": gelu_backward,
    }
