"""Elementwise kernels of the opencl backend: every program (``elementwise``), cast and creation.

A program's kernel is OpenCL C rendered from the program itself (:func:`ampcore.expr.c.render`) into the
template of :mod:`.elementwise_gen`, per (program, dtype, operand layout, work type), and compiled once;
Python numbers travel as kernel arguments, so a changing scalar never recompiles.  float16/bfloat16 compute
in float32 and are rounded once on the store (or in ``half`` for a program of one correctly rounded
operation, on a device whose half arithmetic passed the probe).  float32 ``erf`` and ``pow`` compute in
double where the device has it: OpenCL allows them 16 ulp, more than the
contract's 2 (erf) and 4 (pow) ulps (:data:`ampcore.conformance.tolerance.ELEMENTWISE_ULPS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt
from ampcore.expr import Override, Program, direct_call, render

from . import elementwise_create as create
from .array import CLArray, empty
from .codegen import CType, ctype
from .devices import DeviceState
from .elementwise_gen import Operand, plan, run, scalar_arg, source, storage_scalar

__all__ = ["kernels"]


# float16/bfloat16 neg and abs flip or clear the sign bit of the stored word: exact, NaN payloads kept, and no
# conversion (the program would widen, negate and round, quieting a signalling NaN).
_SIGN_BIT_OPS = {"neg": "(ushort)({0} ^ 0x8000)", "abs": "(ushort)({0} & 0x7fff)"}


def _overrides(ct: CType, state: DeviceState) -> dict[str, Override]:
    """Functions this device computes differently from ampcore.expr.c's spelling, each with its reason."""
    if ct.tag != "f32" or not state.fp64:
        return {}
    # float32 erf and pow in double where the device has it: OpenCL allows them 16 ulp, more than the contract's
    # tolerance; in double they are correctly rounded to float once.
    return {
        "erf": lambda a, t: f"(float)erf((double){a[0]})",
        "pow": lambda a, t: f"(float)pow((double){a[0]}, (double){a[1]})",
    }


def _store(out: CType, work: str) -> Callable[[str], str]:
    """Store a value of type ``work`` into ``out``'s storage, rounded once."""
    if out.tag == "b8":
        return lambda v: f"out[i] = (uchar)({v});"
    if work == "half":
        return lambda v: out.store("out", "i", f"(float)({v})")
    return lambda v: out.store("out", "i", v, value_type=work)


def _raw(prog: Program, operands: list[Any], state: DeviceState, out: CLArray, p: Any) -> CLArray:
    """A program that only chooses among its operands (where), on their stored bits: NaN payloads, -0.0 and
    int64 kept exactly."""
    ct = out.ctype
    ops = [
        Operand(ctype(dt.bool_) if kind == "b" else ct, m, "uchar" if kind == "b" else ct.storage, raw=True)
        for kind, m in zip(prog.inputs, p.modes)
    ]
    values = [
        v if isinstance(v, CLArray) else storage_scalar(v, dt.bool_ if k == "b" else out.dtype)
        for v, k in zip(operands, prog.inputs)
    ]
    rendered = render(prog, cgen.OPENCL, ct.storage, [f"v{k}" for k in range(prog.arity)])
    kname = f"ew_{prog.name}_{ct.tag}_bits"

    def make() -> str:
        return source(
            kname, ct, lambda v: f"out[i] = {v};", ops, rendered.result, "", p.strided, state.fp64, lines=rendered.lines
        )

    # The kernel's name is in the key: two programs of one structure (clamp_min is maximum) build apart, or the
    # second would look its own name up in the first one's build.
    return run(state, (prog.key, kname, p.modes, "bits"), kname, make, out, ops, values, p)


def _sign_bits(name: str, x: CLArray, out: CLArray, p: Any) -> CLArray:
    ct, state = x.ctype, x.state
    ops = [Operand(ct, p.modes, ct.storage, raw=True)]
    kname = f"ew_{name}_{ct.tag}"

    def make() -> str:
        return source(kname, ct, lambda v: f"out[i] = {v};", ops, _SIGN_BIT_OPS[name], "", p.strided, state.fp64)

    return run(state, (name, ct.tag, p.modes, "bits"), kname, make, out, ops, [x], p)


def elementwise(prog: Program) -> Callable[..., CLArray]:
    """The kernel of ``prog`` (the contract's ``elementwise`` primitive): OpenCL C rendered from the program
    (:mod:`ampcore.expr.c`) per dtype, operand layout and work type, compiled once and cached."""
    direct = direct_call(prog)
    values = [i for i, kind in enumerate(prog.inputs) if kind == "T"]
    raw = prog.moves_only and not any(leaf.is_const for leaf in prog.leaves())

    def kernel(*operands: Any) -> CLArray:
        arrays = [v for v in operands if isinstance(v, CLArray)]
        dtype = next((operands[i].dtype for i in values if isinstance(operands[i], CLArray)), None)
        if dtype is None:
            raise TypeError(f"{prog.name} needs an array operand of its value dtype")
        state, ct = arrays[0].state, ctype(dtype)
        out_shape = tuple(np.broadcast_shapes(*(v.shape for v in arrays)))
        out = empty(state, out_shape, dt.bool_ if prog.result == "b" else dtype)
        if out.size == 0:
            return out
        p = plan(out_shape, operands)
        if raw:
            return _raw(prog, list(operands), state, out, p)
        if direct in _SIGN_BIT_OPS and ct.dtype.is_floating_point and ct.itemsize == 2:
            return _sign_bits(direct, operands[0], out, p)
        if not ct.dtype.is_floating_point and not prog.ints:
            raise TypeError(f"{prog.name} needs a floating-point array, got {dtype.name}; cast it to float32 first")
        # half arithmetic rounds as float32-then-store only on half operands: a Python number (1 / 0.9) would be
        # rounded to half first, so a program with one computes in float32
        scalars = any(not isinstance(v, CLArray) for v in operands)
        native = prog.exact and ct.tag == "f16" and state.half.native and not scalars
        work = "half" if native else ct.compute
        kinds = [ctype(dt.bool_) if k == "b" else ct for k in prog.inputs]
        ops = [Operand(c, m, "int" if k == "b" else work) for c, k, m in zip(kinds, prog.inputs, p.modes)]
        args = [
            v if isinstance(v, CLArray) else scalar_arg(v, dt.bool_ if k == "b" else dtype, work)
            for v, k in zip(operands, prog.inputs)
        ]
        rendered = render(
            prog, cgen.OPENCL, work, [f"v{k}" for k in range(prog.arity)], overrides=_overrides(ct, state)
        )
        out_ct = out.ctype
        kname = f"ew_{prog.name}_{ct.tag}"

        def make() -> str:
            return source(
                kname,
                out_ct,
                _store(out_ct, work),
                ops,
                rendered.result,
                rendered.helpers,
                p.strided,
                state.fp64,
                native_half=native,
                lines=rendered.lines,
            )

        return run(state, (prog.key, kname, p.modes, work), kname, make, out, ops, args, p)  # kname: see _raw

    kernel.__name__ = prog.name
    kernel.__doc__ = f"The program {prog.name!r} ({prog.key}) on OpenCL arrays."
    return kernel


# --------------------------------------------------------------------------- cast
def _convert(src: CType, dst: CType, v: str) -> tuple[str, str]:
    """(C expression, its type) converting ``v`` (in ``src``'s compute type) so that ``dst``'s store
    rounds it exactly once."""
    if dst.tag == "b8" or (src.dtype.is_floating_point and not dst.dtype.is_floating_point):
        return v, src.compute  # the bool store tests != 0; a C cast to an integer truncates, like astype
    if not src.dtype.is_floating_point:  # integer or bool -> float: one rounding (to odd first where a second follows)
        if dst.tag in ("f16", "bf16", *cgen.FLOAT8_TAGS):
            return f"long_to_float_odd((long)({v}))", "float"
        if dst.tag in ("f32", "f64"):
            return f"convert_{dst.compute}_rte({v})", dst.compute
        return f"({dst.compute})({v})", dst.compute
    if src.tag == "f64" and dst.tag == "f16":
        return f"double_to_float_odd({v})", "float"
    if src.tag == "f64" and dst.tag == "f32":
        return f"convert_float_rte({v})", "float"
    return v, src.compute


def cast(x: CLArray, dtype: Any) -> CLArray:
    """``x`` converted to ``dtype`` in a new array: floats round to nearest-even once (float64 -> bfloat16
    too), floats to integers truncate like NumPy's astype, anything to bool is ``!= 0``."""
    dtype = dt.as_dtype(dtype)
    state, src, dst = x.state, x.ctype, ctype(dtype)
    out = empty(state, x.shape, dtype)
    if out.size == 0:
        return out
    if dtype == x.dtype:
        state.copy(out.buffer, x.buffer, x.nbytes)
        return out
    expr, typ = _convert(src, dst, "{0}")
    ops = [Operand(src, "c", src.compute)]
    kname = f"ew_cast_{src.tag}_{dst.tag}"

    def make() -> str:
        return source(
            kname,
            dst,
            lambda v: dst.store("out", "i", v, value_type=typ),
            ops,
            expr,
            "",
            False,
            state.fp64,
        )

    return run(state, ("cast", src.tag, dst.tag), kname, make, out, ops, [x], plan(x.shape, [x]))


# --------------------------------------------------------------------------- table
def kernels() -> dict[str, Callable[..., Any]]:
    """The elementwise primitive, cast and the creation kernels, keyed by contract name."""
    return {"elementwise": elementwise, "cast": cast, **create.kernels()}
