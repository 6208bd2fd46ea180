"""Elementwise primitives: every program (``elementwise``) as this backend's own CUDA C, and ``cast``.

A program's kernel is CUDA C rendered from the program itself (:func:`ampcore.expr.c.render`), compiled once
per (program, dtype, which operands are scalars) with ``--ftz=false``: not CuPy's ufuncs, which CuPy
compiles with ``-ftz=true`` (see :mod:`.compiler`), so ``cp.add``, ``cp.sqrt``, comparisons, ``astype`` ...
flush float32 subnormals (and bfloat16's, computed in float32) to zero on a GPU.  The math functions are
the CUDA ones CuPy's ufuncs call (``expf``, ``logf``, ``powf``, ``erff`` ...), so results are CuPy's where
CuPy is right.

Array operands are broadcast and made contiguous first (a copy, no arithmetic); a Python scalar travels by
value in the compute type (float32 for the 16-bit dtypes, as the cpu backend computes them).  float16 and
bfloat16 are widened exactly, computed in float32 and rounded once in the same kernel; integers wrap.  A
program that only chooses among its operands (``where``) selects their stored bits (as unsigned integers of
the element's width), so signed zeros, NaN payloads and a scalar's sign pass unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt
from ampcore import expr as E

from .array import CuArray, contiguous
from .codegen import PRELUDE, CType, ctype
from .convert import convert, scalar_storage
from .launch import BLOCK, blocks_for, raw_kernel
from .runtime import import_cupy

__all__ = ["kernels", "elementwise", "cast", "sources"]

_BITS = {
    1: ("unsigned char", np.uint8),
    2: ("unsigned short", np.uint16),
    4: ("unsigned int", np.uint32),
    8: ("unsigned long long", np.uint64),
}
# Every dtype a program's value operands may have here (integers and bool wrap, the floats round once).
_VALUE_CTYPES = tuple(ctype(d) for d in (dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int32, dt.int64, dt.bool_))


def _overrides(compute: str) -> dict[str, E.Override]:
    """Functions computed differently from ampcore.expr.c's spelling on this backend, each with its reason."""
    if compute not in ("float", "double"):
        return {}
    suffix = "f" if compute == "float" else ""
    nan = E.constant(cgen.CUDA, compute, float("nan"))
    return {
        # log of a negative subnormal is NaN (CUDA's double log gave -inf on an H200), so say it outright
        "log": lambda a, t: f"({a[0]} < 0 ? {nan} : log{suffix}({a[0]}))",
        # pow(x, 1) is x exactly (C99); CUDA's double pow was an ulp off for subnormal x on an H200
        "pow": lambda a, t: f"({a[1]} == {E.constant(cgen.CUDA, t, 1.0)} ? {a[0]} : pow{suffix}({a[0]}, {a[1]}))",
    }


def _kernel(name: str, params: list[str], body: str) -> str:
    return (
        PRELUDE
        + f"""
extern "C" __global__ void __launch_bounds__({BLOCK})
{name}({", ".join(params)}, long long size) {{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < size;
         i += (long long)gridDim.x * blockDim.x) {{
        {body}
    }}
}}
"""
    )


def _raw(prog: E.Program) -> bool:
    """``prog`` only chooses among its operands: it runs on their stored bits."""
    return prog.moves_only and not any(leaf.is_const for leaf in prog.leaves())


def _source(prog: E.Program, c: CType, kinds: str) -> tuple[str, str]:
    """(kernel name, CUDA C source) of ``prog`` for value dtype ``c``; ``kinds`` says per operand whether it is
    an array (``a``) or a scalar (``s``)."""
    raw = _raw(prog)
    value_storage = _BITS[c.itemsize][0] if raw else c.storage
    compute = value_storage if raw else c.compute
    params, loads = [], []
    for k, (kind, where) in enumerate(zip(prog.inputs, kinds)):
        if kind == "b":
            params.append(f"int a{k}" if where == "s" else f"const bool *__restrict__ a{k}")
            loads.append(f"a{k}" if where == "s" else (f"a{k}[i]" if raw else cgen.load("b8", f"a{k}", "i")))
        elif where == "s":
            params.append(f"{compute} a{k}")
            loads.append(f"a{k}")
        else:
            params.append(f"const {value_storage} *__restrict__ a{k}")
            loads.append(f"a{k}[i]" if raw else c.load(f"a{k}", "i"))
    rendered = E.render(prog, cgen.CUDA, compute, loads, overrides=_overrides(compute))
    if prog.result == "b":
        params.append("bool *__restrict__ out")
        store = f"out[i] = {rendered.result};"
    elif raw:
        params.append(f"{value_storage} *__restrict__ out")
        store = f"out[i] = {rendered.result};"
    else:
        params.append(f"{c.storage} *__restrict__ out")
        store = c.store("out", "i", rendered.result)
    tag = f"u{8 * c.itemsize}" if raw else c.tag
    name = f"{prog.name}_{tag}_{kinds}"
    return name, rendered.helpers + _kernel(name, params, " ".join((*rendered.lines, store)))


def _flat(data: Any, shape: tuple[int, ...]) -> Any:
    """``data`` broadcast to ``shape``, C-contiguous (a copy only when it is not already)."""
    if data.shape == shape and data.flags.c_contiguous:
        return data
    return contiguous(import_cupy().broadcast_to(data, shape))


def elementwise(prog: E.Program) -> Callable[..., CuArray]:
    """The kernel of ``prog`` on CuPy arrays (the contract's ``elementwise`` primitive)."""
    values = [i for i, kind in enumerate(prog.inputs) if kind == "T"]
    raw = _raw(prog)

    def kernel(*operands: Any) -> CuArray:
        ref = next((operands[i] for i in values if isinstance(operands[i], CuArray)), None)
        if ref is None:
            raise TypeError(f"{prog.name} needs an array operand of its value dtype")
        c = ctype(ref.dtype)
        if not c.dtype.is_floating_point and not prog.ints:
            raise TypeError(f"{prog.name} needs a floating array, got {c.dtype.name}: cast it to float32 first")
        cp = import_cupy()
        arrays = [v for v in operands if isinstance(v, CuArray)]
        shape = tuple(np.broadcast_shapes(*(v.data.shape for v in arrays)))
        kinds = "".join("a" if isinstance(v, CuArray) else "s" for v in operands)
        with cp.cuda.Device(ref.device_index):
            args = [_argument(v, k, shape, c, raw) for v, k in zip(operands, prog.inputs)]
            result = dt.bool_ if prog.result == "b" else ref.dtype
            out = cp.empty(shape, dtype=ctype(result).cupy_dtype)
            out_arg = out.view(_BITS[c.itemsize][1]) if raw else out
            if out.size:
                name, source = _source(prog, c, kinds)
                launch = raw_kernel(("ew", prog.key, c.tag, kinds), lambda: source, name)
                launch((min(blocks_for(out.size, BLOCK), 65535 * 8),), (BLOCK,), (*args, out_arg, np.int64(out.size)))
            return CuArray(out, result)

    kernel.__name__ = prog.name
    kernel.__doc__ = f"The program {prog.name!r} ({prog.key}) on CuPy arrays."
    return kernel


def _argument(v: Any, kind: str, shape: tuple[int, ...], c: CType, raw: bool) -> Any:
    """One kernel argument: an array broadcast and made contiguous (its bits, for a raw program), or a
    Python number by value (its stored bits, for a raw program)."""
    if kind == "b":
        return _flat(v.data, shape) if isinstance(v, CuArray) else np.int32(bool(v))
    if isinstance(v, CuArray):
        flat = _flat(v.data, shape)
        return flat.view(_BITS[c.itemsize][1]) if raw else flat
    if raw:
        return scalar_storage(v, c.dtype).view(_BITS[c.itemsize][1])
    if c.compute == "double":
        return np.float64(v)
    if c.compute == "float":
        return np.float32(v)
    return c.cupy_dtype.type(v) if c.dtype != dt.bool_ else np.int32(bool(v))


def cast(x: CuArray, dtype: Any) -> CuArray:
    """``x`` converted to ``dtype`` (always a new array), narrowing floats rounded once to nearest-even."""
    dtype = dt.as_dtype(dtype)
    cp = import_cupy()
    with cp.cuda.Device(x.device_index):
        return CuArray(convert(x.data, x.dtype, dtype), dtype)


def _kinds(prog: E.Program) -> list[str]:
    """The operand layouts compiled for ``prog``: all arrays, and each value operand alone a scalar (the core
    passes at most one Python number to an elementwise kernel)."""
    out = ["a" * prog.arity]
    out += ["a" * i + "s" + "a" * (prog.arity - i - 1) for i, kind in enumerate(prog.inputs) if kind == "T"]
    return out if prog.arity > 1 else out[:1]


def sources(programs: Sequence[E.Program] | None = None) -> dict[str, str]:
    """Every kernel source of this family, by kernel name: each registered program for each dtype it takes."""
    out: dict[str, str] = {}
    for prog in programs if programs is not None else [E.get(n) for n in E.names()]:
        assert prog is not None
        for c in _VALUE_CTYPES:
            if not c.dtype.is_floating_point and not prog.ints:
                continue
            for kinds in _kinds(prog):
                name, source = _source(prog, c, kinds)
                out[name] = source
    return out


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    return {"elementwise": elementwise, "cast": cast}
