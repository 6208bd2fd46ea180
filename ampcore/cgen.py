"""One source for the kernel text that ampcore's C dialects share, rendered per dialect.

The opencl and cuda backends write their kernels in two dialects of C (OpenCL C
and CUDA C) but compute the same things the same way: the bit-level
float16/bfloat16 <-> float32 conversions with round-to-nearest-even,
round-to-odd double -> float (so a double result is rounded once to 16 bits),
how an element of each dtype is loaded and stored, the unscale kernel's
overflow test, the element formulas of the AdamW step, the loss-scale update
and the softmax family.  Each is written once here and rendered for a
:class:`Dialect` (the qualifiers, type names, bit casts, rounding intrinsics and
thread indices of one dialect), in the way tinygrad renders one kernel IR for
several targets.  A third-party backend for another C dialect (HIP, Metal,
SYCL) describes it as a :class:`Dialect` and reuses the renderers.

The launch-shape arithmetic the backends share (tiles of a multi-tensor launch,
rows of a reduction along an axis, a group size fitted to a row) is plain
Python here.

Pure strings and integers: nothing from a device library, nothing from the rest
of ampcore.  A dtype is named by its tag (:data:`TAGS`); :func:`element_type`,
:func:`compute_type` and :func:`nonfinite` raise ValueError naming a tag they
do not know, :func:`load` and :func:`store` treat any other tag as a type
stored as it computes.

Example::

    from ampcore import cgen

    source = cgen.conversions(cgen.CUDA) + f'''
    {cgen.CUDA.kernel} scale_f16(unsigned short *x, float a, long long n) {{
        const long long i = {cgen.CUDA.global_id};
        if (i < n) {cgen.store("f16", "unsigned short", "x", "i", cgen.load("f16", "x", "i") + " * a")}
    }}'''
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Dialect",
    "OPENCL",
    "CUDA",
    "TAGS",
    "FLOAT_TAGS",
    "FLOAT8_TAGS",
    "float8_conversions",
    "element_type",
    "compute_type",
    "half_conversions",
    "bfloat16_conversions",
    "double_conversions",
    "conversions",
    "load",
    "store",
    "nonfinite",
    "unscale_element",
    "ADAMW_SCALARS",
    "ADAMW_NO_DECAY",
    "ADAMW_DECOUPLED",
    "ADAMW_L2",
    "adamw_scalars",
    "adamw_element",
    "ADAMW_AMP_SCALARS",
    "ADAMW_AMP_DOUBLES",
    "adamw_amp_scalars",
    "adamw_amp_constants",
    "adamw_amp_steps_kernel",
    "update_scale_kernel",
    "SOFTMAX_OPS",
    "ROW_BASE",
    "nan_max",
    "ceil_div",
    "tile_starts",
    "row_geometry",
    "fit_group_size",
]

TAGS: dict[str, str] = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int32": "i32",
    "int64": "i64",
    "bool": "b8",
    "float8_e4m3fn": "f8e4m3",
    "float8_e5m2": "f8e5m2",
    "float8_e8m0fnu": "f8e8m0",
}
"""Each dtype's tag (by the dtype's name): the renderers' ``tag`` argument, and short enough for kernel names."""
FLOAT_TAGS = ("f32", "f64", "f16", "bf16")
FLOAT8_TAGS = ("f8e4m3", "f8e5m2", "f8e8m0")
# tag -> the format's name in the conversion helpers (float_to_e4m3, e4m3_to_float, ...)
_F8 = {"f8e4m3": "e4m3", "f8e5m2": "e5m2", "f8e8m0": "e8m0"}


@dataclass(frozen=True)
class Dialect:
    """How one dialect of C spells what the shared kernel text needs.

    Fields holding ``{}`` (or ``{0}``) are templates of one C expression, filled with ``str.format``;
    :attr:`add_rn` takes two, ``{a}`` and ``{b}``.
    """

    name: str
    kernel: str  # what opens a kernel definition, up to the name
    inline: str  # qualifiers of a device-side helper function
    global_: str  # qualifier of a pointer into device memory ("" where there is none), with its trailing space
    restrict: str
    local: str  # qualifier of work-group / block shared memory
    u16: str
    u32: str
    i64: str
    bool_storage: str  # element type of a bool buffer
    u64_literal: str  # suffix of a 64-bit hexadecimal literal compared against :attr:`double_bits`
    float_bits: str  # float -> its uint32 bits
    bits_float: str  # uint32 bits -> float
    double_bits: str  # double -> its 64 bits
    add_rn: str  # float addition rounded to nearest even, never fused (two arguments: {a} and {b})
    double_to_float_rz: str
    double_to_float_rn: str
    not_nan: str
    is_nan: str
    global_id: str  # this thread's index in the whole launch (a 64-bit value)
    local_id: str
    group_id: str
    local_size: str
    barrier: str  # a work-group barrier over shared memory, as a statement without its semicolon
    fp64_pragma: str  # what enables double arithmetic ("" where it is always on)
    no_contract: str  # what stops a * b + c being contracted into an fma ("" where a compiler option does)
    u64: str = "unsigned long long"  # a 64-bit unsigned integer (integer arithmetic wraps through it)
    bits_double: str = "__longlong_as_double({})"  # 64 bits -> double
    float_math_suffix: str = ""  # what float32 math functions add to the double one's name ("f": expf)


OPENCL = Dialect(
    name="opencl",
    kernel="__kernel void",
    inline="inline",
    global_="__global ",
    restrict="restrict",
    local="__local",
    u16="ushort",
    u32="uint",
    i64="long",
    bool_storage="uchar",
    u64_literal="UL",
    float_bits="as_uint({})",
    bits_float="as_float({})",
    double_bits="as_ulong({})",
    add_rn="{a} + {b}",
    double_to_float_rz="convert_float_rtz({})",
    double_to_float_rn="convert_float_rte({})",
    not_nan="({0} == {0})",  # not the isnan builtin: PoCL calls it out of line, which stops its vectoriser
    is_nan="({0} != {0})",
    global_id="(long)get_global_id(0)",
    local_id="get_local_id(0)",
    group_id="get_group_id(0)",
    local_size="get_local_size(0)",
    barrier="barrier(CLK_LOCAL_MEM_FENCE)",
    fp64_pragma="#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n",
    no_contract="#pragma OPENCL FP_CONTRACT OFF\n",
    u64="ulong",
    bits_double="as_double({})",
    float_math_suffix="",  # the builtins are overloaded on float and double
)
"""OpenCL C 1.2."""

CUDA = Dialect(
    name="cuda",
    kernel='extern "C" __global__ void',
    inline="__device__ __forceinline__",
    global_="",
    restrict="__restrict__",
    local="__shared__",
    u16="unsigned short",
    u32="unsigned int",
    i64="long long",
    bool_storage="bool",
    u64_literal="LL",
    float_bits="__float_as_uint({})",
    bits_float="__uint_as_float({})",
    double_bits="__double_as_longlong({})",
    add_rn="__fadd_rn({a}, {b})",
    double_to_float_rz="__double2float_rz({})",
    double_to_float_rn="__double2float_rn({})",
    not_nan="{0} == {0}",
    is_nan="{0} != {0}",
    global_id="(blockIdx.x * (long long)blockDim.x + threadIdx.x)",
    local_id="threadIdx.x",
    group_id="blockIdx.x",
    local_size="blockDim.x",
    barrier="__syncthreads()",
    fp64_pragma="",
    no_contract="",
    u64="unsigned long long",
    bits_double="__longlong_as_double({})",
    float_math_suffix="f",
)
"""CUDA C++ as NVRTC compiles it: no headers (so no ``INFINITY``), compiled with ``--fmad=false``."""


def element_type(d: Dialect, tag: str) -> str:
    """The C type of a buffer's elements for dtype ``tag``: float16 and bfloat16 as 16-bit words (converted by
    :func:`load` and :func:`store`), the rest as themselves; ValueError for an unknown tag."""
    types = {
        "f32": "float",
        "f64": "double",
        "f16": d.u16,
        "bf16": d.u16,
        "i32": "int",
        "i64": d.i64,
        "b8": d.bool_storage,
        **dict.fromkeys(FLOAT8_TAGS, "unsigned char"),
    }
    if tag not in types:
        raise ValueError(f"unknown dtype tag {tag!r}; valid tags are {', '.join(types)}")
    return types[tag]


def compute_type(d: Dialect, tag: str) -> str:
    """The C type arithmetic on dtype ``tag`` runs in: float for float16/bfloat16, int for bool."""
    storage = element_type(d, tag)
    return "float" if tag in ("f16", "bf16") or tag in _F8 else "int" if tag == "b8" else storage


# --------------------------------------------------------------------------- 16-bit conversions
def half_conversions(d: Dialect) -> str:
    """``half_to_float`` (exact, subnormals, inf, NaN) and ``float_to_half`` (round to nearest even, overflow
    to inf, NaN kept NaN with its sign) in integer arithmetic, relying on no float denormals.

    float -> float16 lets the float adder round a subnormal: ``|x| + 0.5`` puts the float16 subnormal's bits
    at the bottom of the mantissa.

    Both are branch-free: every case's result is computed and one is selected, so a compiler vectorises
    them (across work-items, or the 16 stores of a GEMM block).  Written with early returns, the same
    arithmetic made Intel's OpenCL CPU compiler run the float16 GEMM 3-5x slower than the float32 one.
    """
    u16, u32, f, b = d.u16, d.u32, d.bits_float, d.float_bits
    half_sub = d.add_rn.format(a=f.format("a"), b="0.5f")
    return f"""
{d.inline} float half_to_float({u16} h) {{
    {u32} e = h & 0x7fffu;
    float f = e < 0x400u ? (float)e * 5.9604644775390625e-8f : {f.format("(e << 13) + 0x38000000u")};
    f = e >= 0x7c00u ? {f.format("(e << 13) | 0x7f800000u")} : f;
    return {f.format(f"{b.format('f')} | (({u32})(h & 0x8000u) << 16)")};
}}
{d.inline} {u16} float_to_half(float f) {{
    {u32} x = {b.format("f")}, sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    {u32} r = a >= 0x38800000u ? (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13
                                 : {b.format(half_sub)} - 0x3f000000u;
    r = a >= 0x477ff000u ? 0x7c00u : r;
    r = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : r;
    return ({u16})(sign | r);
}}
"""


def bfloat16_conversions(d: Dialect) -> str:
    """``bf16_to_float`` (a shift) and ``float_to_bf16``: round to nearest even on the bit pattern (add 0x7fff
    plus the lowest kept bit, then truncate), NaN kept NaN (quiet, sign kept) instead of rounding into inf."""
    u16, u32 = d.u16, d.u32
    return f"""
{d.inline} float bf16_to_float({u16} u) {{ return {d.bits_float.format(f"(({u32})u) << 16")}; }}
{d.inline} {u16} float_to_bf16(float f) {{
    {u32} b = {d.float_bits.format("f")};
    if ((b & 0x7fffffffu) > 0x7f800000u) return ({u16})((b >> 16) | 0x40u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return ({u16})(b >> 16);
}}
"""


def double_conversions(d: Dialect) -> str:
    """``double_to_float_odd`` (truncate, then set the last bit when inexact: rounding that float to 16 bits
    is then the only rounding) and ``double_to_bf16``; needs :func:`bfloat16_conversions` before it."""
    odd = d.bits_float.format(f"{d.float_bits.format('f')} | 1u")
    return f"""{d.fp64_pragma}
/* double -> float rounded to odd, so a later rounding to 16 bits is the only one (a double result). */
{d.inline} float double_to_float_odd(double d) {{
    float f = {d.double_to_float_rz.format("d")};
    if ({d.not_nan.format("d")} && (double)f != d) f = {odd};
    return f;
}}
{d.inline} {d.u16} double_to_bf16(double d) {{ return float_to_bf16(double_to_float_odd(d)); }}
"""


# OCP float8 formats: (mantissa bits, exponent bias, largest finite code, code of an overflow, code of NaN,
# float32 bits of the largest finite value, float32 bits of 2**(24 - bias - mantissa bits): adding it to a
# value below the smallest normal leaves the subnormal code in the low bits, rounded by the float adder).
_FLOAT8_FORMATS = {
    "e4m3": (3, 7, 0x7E, 0x7F, 0x7F, 0x43E00000, 0x46800000),  # max 448; no inf: overflow is NaN (0x7f)
    "e5m2": (2, 15, 0x7B, 0x7C, 0x7E, 0x47600000, 0x43000000),  # max 57344; overflow is inf (0x7c)
}


def float8_conversions(d: Dialect) -> str:
    """``float_to_e4m3(f, saturate)`` / ``float_to_e5m2(f, saturate)``: round to nearest even on the bit
    pattern (subnormals through the float adder, as :func:`half_conversions`), NaN kept NaN with its sign,
    overflow NaN (e4m3fn has no inf) or inf (e5m2), or +-max when ``saturate``; ``e4m3_to_float`` /
    ``e5m2_to_float`` exact (NaN as the quiet NaN with its sign); ``float_to_e8m0`` / ``e8m0_to_float``: MX
    scales, ml_dtypes' rule (round half up on the mantissa, zero/negative/inf/NaN/overflow to NaN 0xff,
    a float32 subnormal to 2**-127, or 2**-126 when above 2**-127).  Bit-for-bit ml_dtypes; no float8 type
    or header needed."""
    u32, f, b = d.u32, d.bits_float, d.float_bits
    out = []
    for name, (mbits, bias, top, over, nan, top_bits, sub_bits) in _FLOAT8_FORMATS.items():
        shift = 23 - mbits
        adder = d.add_rn.format(a=f.format("a"), b=f.format(f"{sub_bits:#x}u"))
        is_nan = f"(c & 0x7fu) > {top if name == 'e4m3' else 0x7C:#x}u"
        inf = "" if name == "e4m3" else f"    if ((c & 0x7fu) == 0x7cu) return {f.format('sign | 0x7f800000u')};\n"
        out.append(f"""
{d.inline} unsigned char float_to_{name}(float v, int saturate) {{
    {u32} x = {b.format("v")}, sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (unsigned char)(sign | {nan:#x}u);
    if (saturate && a >= {top_bits:#x}u) return (unsigned char)(sign | {top:#x}u);
    if (a >= {(128 - bias) << 23:#x}u) {{
        {u32} r = a - {(127 - bias) << 23:#x}u;
        r = (r + {(1 << (shift - 1)) - 1:#x}u + ((r >> {shift}) & 1u)) >> {shift};
        return (unsigned char)(sign | (r > {top:#x}u ? {over:#x}u : r));
    }}
    return (unsigned char)(sign | ({b.format(adder)} - {sub_bits:#x}u));
}}
{d.inline} float {name}_to_float(unsigned char c) {{
    {u32} sign = (({u32})(c & 0x80u)) << 24, e = (c >> {mbits}) & {(1 << (7 - mbits)) - 1:#x}u;
    {u32} m = c & {(1 << mbits) - 1:#x}u;
    if ({is_nan}) return {f.format("sign | 0x7fc00000u")};
{inf}    {u32} bits = e == 0u ? {b.format(f"(float)m * {2.0 ** (1 - bias - mbits)!r}f")}
                        : ((e + {127 - bias}u) << 23) | (m << {shift});
    return {f.format("bits | sign")};
}}
""")
    out.append(f"""
{d.inline} unsigned char float_to_e8m0(float v) {{
    {u32} x = {b.format("v")};
    if (x == 0u || x >= 0x7f800000u) return (unsigned char)0xffu;
    {u32} e = x >> 23, m = x & 0x7fffffu;
    if (e == 0u) return (unsigned char)(m > 0x400000u ? 1u : 0u);
    e += m >= 0x400000u ? 1u : 0u;
    return (unsigned char)(e > 0xffu ? 0xffu : e);
}}
{d.inline} float e8m0_to_float(unsigned char c) {{
    return {f.format(f"c == 0xffu ? 0x7fc00000u : c == 0u ? 0x400000u : (({u32})c) << 23")};
}}
""")
    return "".join(out)


def conversions(d: Dialect, double: bool = True) -> str:
    """Every conversion helper (:func:`half_conversions`, :func:`bfloat16_conversions`,
    :func:`float8_conversions` and, with ``double``, :func:`double_conversions`), the prelude the element code
    of :func:`load` and :func:`store` calls."""
    return (
        half_conversions(d)
        + bfloat16_conversions(d)
        + float8_conversions(d)
        + (double_conversions(d) if double else "")
    )


# --------------------------------------------------------------------------- element access
def load(tag: str, ptr: str, index: str) -> str:
    """A C expression: element ``index`` of buffer ``ptr`` (dtype ``tag``) in its compute type (float for the
    16-bit types, int for bool)."""
    if tag == "f16":
        return f"half_to_float({ptr}[{index}])"
    if tag == "bf16":
        return f"bf16_to_float({ptr}[{index}])"
    if tag == "b8":
        return f"(int)({ptr}[{index}] != 0)"
    if tag in _F8:
        return f"{_F8[tag]}_to_float({ptr}[{index}])"
    return f"{ptr}[{index}]"


def store(tag: str, storage: str, ptr: str, index: str, value: str, value_type: str = "") -> str:
    """A C statement writing ``value`` to element ``index`` of buffer ``ptr`` (dtype ``tag``, C element type
    ``storage``), rounded once: say ``value_type="double"`` when the value is a double, so a 16-bit type is
    rounded once from it rather than through float."""
    if tag == "bf16" and value_type == "double":
        return f"{ptr}[{index}] = double_to_bf16({value});"
    if tag == "f16" and value_type == "double":  # round-to-odd float keeps it one rounding
        return f"{ptr}[{index}] = float_to_half(double_to_float_odd({value}));"
    if tag == "f16":
        return f"{ptr}[{index}] = float_to_half({value});"
    if tag == "bf16":
        return f"{ptr}[{index}] = float_to_bf16({value});"
    if tag == "b8":
        return f"{ptr}[{index}] = ({storage})(({value}) != 0);"
    if tag in _F8:  # a cast: no saturation (overflow is what the format has); a double through round-to-odd
        wide = f"double_to_float_odd({value})" if value_type == "double" else value
        return f"{ptr}[{index}] = float_to_{_F8[tag]}({wide}{'' if tag == 'f8e8m0' else ', 0'});"
    return f"{ptr}[{index}] = ({storage})({value});"


# --------------------------------------------------------------------------- unscale_and_check
# The bits of the halfway point between each float type's largest finite value and the next power of two: a
# value whose magnitude's bits reach it is, or rounds to (ties go to the even side, inf), inf/NaN when stored.
_OVERFLOW_BITS = {"f32": "0x7f800000u", "bf16": "0x7f7f8000u", "f16": "0x477ff000u"}  # inf, 0x1.ffp127f, 65520.0f


def nonfinite(d: Dialect, tag: str, var: str = "v") -> str:
    """A C expression, nonzero when ``var`` (float, or double for f64) is inf/NaN or overflows dtype ``tag``
    when stored.  An integer compare: PoCL vectorises it, where ``!(fabs(v) < limit)`` ran 2x slower."""
    if tag == "f64":
        s = d.u64_literal
        return f"(({d.double_bits.format(var)} & 0x7fffffffffffffff{s}) >= 0x7ff0000000000000{s})"
    if tag not in _OVERFLOW_BITS:
        raise ValueError(f"nonfinite: {tag!r} is not a float tag; valid tags are {', '.join(FLOAT_TAGS)}")
    return f"(({d.float_bits.format(var)} & 0x7fffffffu) >= {_OVERFLOW_BITS[tag]})"


def unscale_element(d: Dialect, tag: str, storage: str, ptr: str, index: str, indent: str) -> str:
    """C lines unscaling element ``index`` of gradient ``ptr`` in place by ``inv`` (in the compute type) and
    or-ing its overflow test into ``int bad``."""
    compute = "double" if tag == "f64" else "float"
    lines = (
        f"const {compute} v = ({compute}){load(tag, ptr, index)} * inv;",
        store(tag, storage, ptr, index, "v"),
        f"bad |= {nonfinite(d, tag)};",
    )
    return "".join(f"{indent}{line}\n" for line in lines)


# --------------------------------------------------------------------------- adamw_step
ADAMW_SCALARS = ("weight_decay", "decay", "one_minus_beta1", "beta2", "one_minus_beta2", "bc2_sqrt", "eps", "step_size")
"""The step's scalar kernel arguments, in order (see :func:`adamw_scalars`)."""
# mode: no weight decay, decoupled (AdamW: p *= decay), L2 (Adam: g += weight_decay * p)
ADAMW_NO_DECAY, ADAMW_DECOUPLED, ADAMW_L2 = 0, 1, 2


def adamw_scalars(
    step: int, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool
) -> tuple[int, list[float]]:
    """``(mode, scalars)``: the kernel's mode and its :data:`ADAMW_SCALARS` values for step ``step`` (>= 1)::

    decay = 1 - lr * weight_decay;  bc2_sqrt = sqrt(1 - beta2 ** step);  step_size = lr / (1 - beta1 ** step)
    """
    mode = ADAMW_NO_DECAY if not weight_decay else ADAMW_DECOUPLED if decoupled else ADAMW_L2
    values = dict(
        weight_decay=weight_decay,
        decay=1.0 - lr * weight_decay,
        one_minus_beta1=1.0 - beta1,
        beta2=beta2,
        one_minus_beta2=1.0 - beta2,
        bc2_sqrt=math.sqrt(1.0 - beta2 ** int(step)),
        eps=eps,
        step_size=lr / (1.0 - beta1 ** int(step)),
    )
    return mode, [values[name] for name in ADAMW_SCALARS]


def adamw_element(
    d: Dialect, p_tag: str, p_storage: str, g_tag: str, buffers: Sequence[str], index: str, indent: str
) -> str:
    """C lines of one element's Adam/AdamW step, op for op the cpu backend's, each operation rounded on its own:
    parameter, gradient, first and second moment in ``buffers`` (in that order), the scalars of
    :data:`ADAMW_SCALARS` and ``int mode`` in scope.  Float arithmetic (double for an f64 parameter); a 16-bit
    parameter is widened, updated and rounded once.  Mode is selected, not branched on: PoCL vectorises the
    selects (2x)."""
    c = "double" if p_tag == "f64" else "float"
    p, g, m, v = buffers
    lines = (
        f"{c} pc = ({c}){load(p_tag, p, index)};",
        f"{c} gc = ({c}){load(g_tag, g, index)};",
        f"{c} mc = {m}[{index}], vc = {v}[{index}];",
        f"pc = mode == {ADAMW_DECOUPLED} ? pc * decay : pc;",
        f"gc = mode == {ADAMW_L2} ? gc + pc * weight_decay : gc;",
        "mc = mc + (gc - mc) * one_minus_beta1;  /* m.lerp_(g, 1 - beta1) */",
        "vc = vc * beta2 + (gc * gc) * one_minus_beta2;",
        f"const {c} denom = sqrt(vc) / bc2_sqrt + eps;",
        "pc = pc - (mc / denom) * step_size;",
        f"{m}[{index}] = mc;",
        f"{v}[{index}] = vc;",
        store(p_tag, p_storage, p, index, "pc"),
    )
    return "".join(f"{indent}{line}\n" for line in lines)


# --------------------------------------------------------------------------- adamw_step_amp
ADAMW_AMP_SCALARS = tuple(name for name in ADAMW_SCALARS if name not in ("bc2_sqrt", "step_size"))
"""The fused AMP step's scalar kernel arguments in the compute type, in order: :data:`ADAMW_SCALARS` less the two
that depend on the step number, which the kernel computes from the device's step count
(:func:`adamw_amp_constants`)."""
ADAMW_AMP_DOUBLES = ("lr", "beta1_64", "beta2_64")
"""The fused AMP step's double kernel arguments, in order: what :func:`adamw_amp_constants` computes from."""


def adamw_amp_scalars(
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool
) -> tuple[int, list[float], list[float]]:
    """``(mode, scalars, doubles)``: the kernel's mode, its :data:`ADAMW_AMP_SCALARS` values (as
    :func:`adamw_scalars` computes them) and its :data:`ADAMW_AMP_DOUBLES` values."""
    mode, values = adamw_scalars(1, lr, beta1, beta2, eps, weight_decay, decoupled)
    named = dict(zip(ADAMW_SCALARS, values))
    return mode, [named[name] for name in ADAMW_AMP_SCALARS], [lr, beta1, beta2]


def _dd_mul(out: str, a: str, b: str) -> str:
    """C statement: double-double ``out = a * b`` (each a ``NAME_h``/``NAME_l`` pair), the product's rounding
    error recovered exactly with ``fma``; ``out`` may be ``a`` or ``b``."""
    return (
        f"{{ const double ph = {a}_h * {b}_h;"
        f" const double pl = fma({a}_h, {b}_h, -ph) + ({a}_h * {b}_l + {a}_l * {b}_h);"
        f" {out}_h = ph + pl; {out}_l = pl - ({out}_h - ph); }}"
    )


def adamw_amp_constants(d: Dialect, p_tag: str, steps: str, skip: str, indent: str) -> str:
    """C lines opening the fused AMP step's kernel: return where ``skip[0]`` is nonzero (found inf/NaN: nothing
    is written), else declare ``bc2_sqrt`` and ``step_size`` for step ``t = steps[0] + 1`` as
    :func:`adamw_scalars` computes them on the host (double arithmetic), each rounded once to the compute type.

    The host's ``beta ** t`` is libm's ``pow``; a device's ``pow`` is not (PoCL's double ``pow`` misses by an
    ulp at step 4, a GPU's is within 2 ulp), so the kernel raises each beta to the integer ``t`` itself: by
    squaring, in double-double (about 100 bits, the ``fma`` error-free product), rounded once to double. That is
    the correctly rounded power, which glibc's ``pow`` gives too except near a rounding midpoint (9 of 13,500
    (beta, step) pairs with step <= 1500), so a step counted on the device gives the host-counted step's bits,
    float64 parameters included, wherever glibc rounds correctly.  Needs double arithmetic (an OpenCL device with
    ``cl_khr_fp64``); ``steps`` and ``skip`` point to floats and the :data:`ADAMW_AMP_DOUBLES` are in scope."""
    c = "double" if p_tag == "f64" else "float"
    cast = "{}" if c == "double" else d.double_to_float_rn
    lines = (
        f"if ({skip}[0] != 0.0f) return;  /* found inf/NaN: the step is skipped on the device */",
        "double pw1_h = 1.0, pw1_l = 0.0, pw2_h = 1.0, pw2_l = 0.0;  /* beta1 ** t, beta2 ** t; _h is it rounded */",
        "double sq1_h = beta1_64, sq1_l = 0.0, sq2_h = beta2_64, sq2_l = 0.0;  /* beta ** (2 ** bit) */",
        f"for ({d.i64} n = ({d.i64}){steps}[0] + 1; n > 0; n >>= 1) {{",
        f"    if (n & 1) {{ {_dd_mul('pw1', 'pw1', 'sq1')} {_dd_mul('pw2', 'pw2', 'sq2')} }}",
        f"    {_dd_mul('sq1', 'sq1', 'sq1')} {_dd_mul('sq2', 'sq2', 'sq2')}",
        "}",
        f"const {c} bc2_sqrt = {cast.format('sqrt(1.0 - pw2_h)')};",
        f"const {c} step_size = {cast.format('lr / (1.0 - pw1_h)')};",
    )
    return "".join(f"{indent}{line}\n" for line in lines)


def adamw_amp_steps_kernel(d: Dialect) -> str:
    """Kernel ``adamw_amp_steps`` for one thread: the fused AMP step's count advanced in place, ``steps + 1``
    unless ``skip`` is nonzero.  Launched after the step's kernels, which read the count: in place so a
    captured step (a CUDA graph) advances the same array at every replay."""
    g = d.global_
    return f"""
{d.kernel} adamw_amp_steps({g}float *steps, {g}const float *skip) {{
    if (skip[0] == 0.0f) steps[0] = steps[0] + 1.0f;
}}
"""


# --------------------------------------------------------------------------- update_scale
def update_scale_kernel(d: Dialect, factor_params: str, grow: str, back: str) -> str:
    """torch's ``_amp_update_scale_`` as kernel ``update_scale`` for one thread: ``factor_params`` declares the
    growth and backoff factors, ``grow``/``back`` are the products of ``s`` with them as doubles (or a stand-in
    for one), each rounded once to float32::

        if found != 0:                  scale = s * backoff; tracker = 0
        elif tracker + 1 == interval:   grown = s * growth; scale = grown if finite else s; tracker = 0
        else:                           tracker = tracker + 1   (int32, wrapping)
    """
    g, rn = d.global_, d.double_to_float_rn
    return f"""
{d.kernel} update_scale({g}const float *scale, {g}const int *tracker, {g}const float *found,
                           {g}float *out_scale, {g}int *out_tracker, {factor_params}, {d.i64} interval) {{
    const float s = scale[0];
    if (found[0] != 0.0f) {{
        out_scale[0] = {rn.format(back)};
        out_tracker[0] = 0;
        return;
    }}
    const int successful = (int)(({d.u32})tracker[0] + 1u);  /* int32 wraps, as the cpu backend's tracker */
    if (({d.i64})successful == interval) {{
        const float grown = {rn.format(grow)};
        out_scale[0] = isfinite(grown) ? grown : s;
        out_tracker[0] = 0;
    }} else {{
        out_scale[0] = s;
        out_tracker[0] = successful;
    }}
}}
"""


# --------------------------------------------------------------------------- softmax family
SOFTMAX_OPS: dict[str, tuple[bool, str, str]] = {
    "softmax": (True, "exp(X - M)", "exp(X - M) / S"),
    "log_softmax": (True, "exp(X - M)", "(X - M) - log(S)"),
    "softmax_backward": (False, "G * X", "X * (G - S)"),
    "log_softmax_backward": (False, "G", "G - exp(X) * S"),
}
"""name: (needs the row max ``M``, the term a row sums into ``S``, each output), as C over ``X`` (the input, or
the forward's output for a backward) and ``G`` (the output gradient)."""

ROW_BASE = "#define ROW_BASE(o) (((o) / inner) * n * inner + (o) % inner)\n"
"""Where row ``o`` of a reduction along an axis starts (``n`` elements apart by ``inner``, see
:func:`row_geometry`)."""


def nan_max(d: Dialect, acc: str = "ACC") -> str:
    """``nan_max(a, b)`` over ``acc``: NumPy's maximum, NaN propagates."""
    return f"{d.inline} {acc} nan_max({acc} a, {acc} b) {{ return (a >= b || {d.is_nan.format('a')}) ? a : b; }}\n"


# --------------------------------------------------------------------------- launch shapes
def ceil_div(n: int, d: int) -> int:
    """``n / d`` rounded up: how many tiles of ``d`` cover ``n`` elements."""
    return -(-n // d)


def tile_starts(sizes: Sequence[int], tile: int) -> tuple[list[int], int]:
    """For a multi-tensor launch with one tile of ``tile`` elements per work-group: each tensor's first
    work-group, and the total number of work-groups."""
    starts, total = [], 0
    for size in sizes:
        starts.append(total)
        total += ceil_div(size, tile)
    return starts, total


def row_geometry(shape: Sequence[int], axis: int) -> tuple[int, int, int]:
    """``(rows, n, inner)`` of reducing ``shape`` along ``axis`` (negative counts from the end): a row is the
    ``n`` elements along the axis, ``inner`` apart; row ``o`` starts at ``(o / inner) * n * inner + o % inner``."""
    axis = axis % len(shape)  # shape[axis + 1:] of a negative axis would be the wrong dimensions
    n = shape[axis]
    inner = math.prod(shape[axis + 1 :])
    rows = math.prod(shape) // n if n else 0
    return rows, n, inner


def fit_group_size(n: int, largest: int, smallest: int = 1) -> int:
    """Work-items for one row of ``n``: ``largest``, halved while half of it still covers the row, never below
    ``smallest`` (a warp, where a reduction relies on one)."""
    size = largest
    while size > smallest and size // 2 >= n:
        size //= 2
    return size
