"""The floating-point elementwise primitives as this backend's own kernels: unary and binary math,
comparisons, and ``where`` (every dtype).

Not CuPy's ufuncs: CuPy compiles every kernel it generates with ``-ftz=true`` (see :mod:`.compiler`), so
``cp.add``, ``cp.sqrt``, comparisons, ``astype`` ... flush float32 subnormals (and bfloat16's, computed in
float32) to zero on a GPU.  These kernels compile with ``--ftz=false`` and call the CUDA math functions
CuPy's ufuncs call (``expf``, ``logf``, ``powf``, ``erff`` ...), so results are CuPy's where CuPy is right.

One flat kernel per (op, dtype, operand kinds): array operands are broadcast and made contiguous first (a
copy, no arithmetic), a Python scalar travels by value in the compute type (float32 for the 16-bit dtypes,
as the cpu backend computes them); float16/bfloat16 are widened exactly, computed in float32 and rounded
once in the same kernel.  ``where`` selects stored bits (as unsigned integers of the element's width), so
signed zeros, NaN payloads and a scalar's sign pass unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CuArray, contiguous
from .codegen import FLOAT_CTYPES, PRELUDE, CType, ctype
from .launch import BLOCK, blocks_for, raw_kernel
from .runtime import import_cupy

__all__ = ["UNARY", "BINARY", "COMPARE", "sources", "unary", "binary", "where"]

# Statements setting ``r`` from ``x`` (and ``y``), in the compute type T.  {f} is the float32 suffix of the
# math functions ("f" or ""), {one} T's 1, {nan} a quiet NaN of T.
UNARY = {
    "neg": "r = -x;",
    "abs": "r = fabs{f}(x);",
    "exp": "r = exp{f}(x);",
    # log of a negative subnormal is NaN (CUDA's double log gave -inf on an H200), so say it outright
    "log": "r = x < 0 ? {nan} : log{f}(x);",
    "sqrt": "r = sqrt{f}(x);",
    "rsqrt": "r = {one} / sqrt{f}(x);",
    "tanh": "r = tanh{f}(x);",
    "sigmoid": "const T e = exp{f}(-fabs{f}(x)); r = x >= 0 ? {one} / ({one} + e) : e / ({one} + e);",
    "erf": "r = erf{f}(x);",
    "sign": "r = x > 0 ? {one} : (x < 0 ? -{one} : x);",  # +-0 and NaN give themselves
    "sin": "r = sin{f}(x);",
    "cos": "r = cos{f}(x);",
}
BINARY = {
    "add": "r = x + y;",
    "sub": "r = x - y;",
    "mul": "r = x * y;",
    "div": "r = x / y;",
    # pow(x, 1) is x exactly (C99); CUDA's double pow was an ulp off for subnormal x on an H200
    "pow": "r = y == {one} ? x : pow{f}(x, y);",
    "maximum": "r = (x != x || x >= y) ? x : y;",  # NaN from either side, as NumPy's maximum
    "minimum": "r = (x != x || x <= y) ? x : y;",
}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

_NAN = {"float": "__int_as_float(0x7fc00000)", "double": "__longlong_as_double(0x7ff8000000000000LL)"}
_ONE = {"float": "1.0f", "double": "1.0"}
_BITS = {
    1: ("unsigned char", np.uint8),
    2: ("unsigned short", np.uint16),
    4: ("unsigned int", np.uint32),
    8: ("unsigned long long", np.uint64),
}
_KINDS = ("aa", "as", "sa")  # each operand an array or a scalar


def _statement(template: str, c: CType) -> str:
    t = c.compute
    return template.format(f="f" if t == "float" else "", one=_ONE[t], nan=_NAN[t])


def _operand(kind: str, name: str, c: CType) -> tuple[str, str]:
    """(the parameter, the C expression of element ``i`` in the compute type) of one operand."""
    if kind == "s":
        return f"{c.compute} {name}", name
    return f"const {c.storage} *__restrict__ {name}", c.load(name, "i")


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


def _unary_source(op: str, c: CType) -> str:
    param, x = _operand("a", "a", c)
    body = f"typedef {c.compute} T; const T x = {x}; T r; {_statement(UNARY[op], c)} {c.store('out', 'i', 'r')}"
    return _kernel(f"{op}_{c.tag}", [param, f"{c.storage} *__restrict__ out"], body)


def _binary_source(op: str, c: CType, kinds: str) -> str:
    (pa, xa), (pb, xb) = _operand(kinds[0], "a", c), _operand(kinds[1], "b", c)
    if op in COMPARE:
        body = f"typedef {c.compute} T; const T x = {xa}, y = {xb}; out[i] = x {COMPARE[op]} y;"
        return _kernel(f"{op}_{c.tag}_{kinds}", [pa, pb, "bool *__restrict__ out"], body)
    body = (
        f"typedef {c.compute} T; const T x = {xa}, y = {xb}; T r; {_statement(BINARY[op], c)} "
        f"{c.store('out', 'i', 'r')}"
    )
    return _kernel(f"{op}_{c.tag}_{kinds}", [pa, pb, f"{c.storage} *__restrict__ out"], body)


def _where_source(width: int, kinds: str) -> str:
    u = _BITS[width][0]
    pa = f"{u} a" if kinds[0] == "s" else f"const {u} *__restrict__ a"
    pb = f"{u} b" if kinds[1] == "s" else f"const {u} *__restrict__ b"
    xa, xb = (n if k == "s" else f"{n}[i]" for k, n in zip(kinds, "ab"))
    return _kernel(
        f"where_u{8 * width}_{kinds}",
        ["const bool *__restrict__ cond", pa, pb, f"{u} *__restrict__ out"],
        f"out[i] = cond[i] ? {xa} : {xb};",
    )


def sources() -> dict[str, str]:
    """Every kernel source of this family, by kernel name."""
    out = {f"{op}_{c.tag}": _unary_source(op, c) for op in UNARY for c in FLOAT_CTYPES}
    out.update(
        {
            f"{op}_{c.tag}_{k}": _binary_source(op, c, k)
            for op in (*BINARY, *COMPARE)
            for c in FLOAT_CTYPES
            for k in _KINDS
        }
    )
    out.update({f"where_u{8 * w}_{k}": _where_source(w, k) for w in _BITS for k in _KINDS})
    return out


def _launch(key: tuple, source: Any, name: str, size: int, args: tuple) -> None:
    if size:
        kernel = raw_kernel(key, source, name)
        kernel((min(blocks_for(size, BLOCK), 65535 * 8),), (BLOCK,), (*args, np.int64(size)))


def _flat(data: Any, shape: tuple[int, ...]) -> Any:
    """``data`` broadcast to ``shape``, C-contiguous (a copy only when it is not already)."""
    if data.shape == shape and data.flags.c_contiguous:
        return data
    return contiguous(import_cupy().broadcast_to(data, shape))


def unary(op: str, x: CuArray) -> CuArray:
    """``op`` of a floating ``x``, in ``x``'s dtype."""
    cp, c = import_cupy(), ctype(x.dtype)
    with cp.cuda.Device(x.device_index):
        src = contiguous(x.data)
        out = cp.empty(src.shape, dtype=c.cupy_dtype)
        _launch(("unary", op, c.tag), lambda: _unary_source(op, c), f"{op}_{c.tag}", src.size, (src, out))
        return CuArray(out, x.dtype)


def binary(op: str, a: Any, b: Any) -> CuArray:
    """``op`` (a BINARY or COMPARE name) of two operands of one floating dtype, either one a Python scalar;
    broadcasting.  Comparisons give bool."""
    ref = a if isinstance(a, CuArray) else b
    cp, c = import_cupy(), ctype(ref.dtype)
    scalar = np.float64 if c.compute == "double" else np.float32
    shape = tuple(np.broadcast_shapes(*(v.data.shape for v in (a, b) if isinstance(v, CuArray))))
    with cp.cuda.Device(ref.device_index):
        kinds = "".join("a" if isinstance(v, CuArray) else "s" for v in (a, b))
        args = [_flat(v.data, shape) if isinstance(v, CuArray) else scalar(v) for v in (a, b)]
        result = dt.bool_ if op in COMPARE else ref.dtype
        out = cp.empty(shape, dtype=ctype(result).cupy_dtype)
        _launch(
            ("binary", op, c.tag, kinds),
            lambda: _binary_source(op, c, kinds),
            f"{op}_{c.tag}_{kinds}",
            out.size,
            (*args, out),
        )
        return CuArray(out, result)


def where(cond: CuArray, a: Any, b: Any, scalar_bits: Any) -> CuArray:
    """``a`` where ``cond`` else ``b`` (broadcasting), selecting stored bits; ``scalar_bits(v)`` is a Python
    scalar branch as a NumPy scalar of the array branch's storage dtype."""
    ref = a if isinstance(a, CuArray) else b
    cp, c = import_cupy(), ctype(ref.dtype)
    u, bits = _BITS[c.itemsize]
    shape = tuple(np.broadcast_shapes(cond.data.shape, *(v.data.shape for v in (a, b) if isinstance(v, CuArray))))
    with cp.cuda.Device(ref.device_index):
        kinds = "".join("a" if isinstance(v, CuArray) else "s" for v in (a, b))
        args = [
            _flat(v.data, shape).view(bits) if isinstance(v, CuArray) else scalar_bits(v).view(bits) for v in (a, b)
        ]
        out = cp.empty(shape, dtype=c.cupy_dtype)
        width = c.itemsize
        _launch(
            ("where", width, kinds),
            lambda: _where_source(width, kinds),
            f"where_u{8 * width}_{kinds}",
            out.size,
            (_flat(cond.data, shape), *args, out.view(bits)),
        )
        return CuArray(out, ref.dtype)
