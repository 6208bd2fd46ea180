"""Elementwise primitives: ``cast``, the unary and binary ops, comparisons and ``where``.

Floating dtypes run as this backend's own kernels (:mod:`.pointwise`: CuPy's ufuncs flush float32
subnormals to zero on a GPU); integers and bools, where nothing can flush, run as CuPy computes them.  A
Python scalar operand takes the compute dtype of the array operand (float32 for the 16-bit dtypes, as the
cpu backend computes them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from . import pointwise
from .array import CuArray
from .codegen import ctype
from .convert import convert, scalar_storage
from .runtime import import_cupy

__all__ = ["kernels", "cast", "where"]

# The integer forms: the core calls only these on int/bool arrays (the float-only math casts to float32 first).
_INT_UNARY: dict[str, Callable[[Any, Any], Any]] = {
    "neg": lambda cp, x: cp.negative(x),
    "abs": lambda cp, x: cp.abs(x),
    "sign": lambda cp, x: x.copy() if x.dtype == np.bool_ else cp.sign(x),
}
_INT_BINARY = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "div": "divide",
    "pow": "power",
    "maximum": "maximum",
    "minimum": "minimum",
}
_INT_COMPARE = {
    "eq": "equal",
    "ne": "not_equal",
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
}


def _int_operands(a: Any, b: Any) -> tuple[Any, Any, CuArray]:
    """Both operands as CuPy values (a scalar in the array's dtype), and the array operand."""
    ref = a if isinstance(a, CuArray) else b
    as_value = lambda v: v.data if isinstance(v, CuArray) else ctype(ref.dtype).cupy_dtype.type(v)  # noqa: E731
    return as_value(a), as_value(b), ref


def _unary(name: str) -> Callable[[CuArray], CuArray]:
    def kernel(x: CuArray) -> CuArray:
        if x.dtype.is_floating_point:
            return pointwise.unary(name, x)
        if name not in _INT_UNARY:
            raise TypeError(f"{name} needs a floating array, got {x.dtype.name}: cast it to float32 first")
        cp = import_cupy()
        with cp.cuda.Device(x.device_index):
            return CuArray(_INT_UNARY[name](cp, x.data), x.dtype)

    kernel.__name__ = name
    return kernel


def _binary(name: str, cupy_names: dict[str, str], result: dt.DType | None) -> Callable[[Any, Any], CuArray]:
    def kernel(a: Any, b: Any) -> CuArray:
        ref = a if isinstance(a, CuArray) else b
        if ref.dtype.is_floating_point:
            return pointwise.binary(name, a, b)
        cp = import_cupy()
        x, y, ref = _int_operands(a, b)
        with cp.cuda.Device(ref.device_index):
            out = cp.asarray(getattr(cp, cupy_names[name])(x, y))
            return CuArray(
                out if result is not None else out.astype(ctype(ref.dtype).cupy_dtype, copy=False), result or ref.dtype
            )

    kernel.__name__ = name
    return kernel


def cast(x: CuArray, dtype: Any) -> CuArray:
    """``x`` converted to ``dtype`` (always a new array), narrowing floats rounded once to nearest-even."""
    dtype = dt.as_dtype(dtype)
    cp = import_cupy()
    with cp.cuda.Device(x.device_index):
        return CuArray(convert(x.data, x.dtype, dtype), dtype)


def where(cond: CuArray, a: Any, b: Any) -> CuArray:
    """``a`` where ``cond`` else ``b``, broadcasting; selects stored bits, so 16-bit values, signed zeros and
    NaN payloads pass unchanged (a scalar's bits go to the kernel as they are: CuPy 14's where lost -0.0's
    sign)."""
    ref = a if isinstance(a, CuArray) else b
    return pointwise.where(cond, a, b, lambda v: scalar_storage(v, ref.dtype))


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    table: dict[str, Callable[..., Any]] = {"cast": cast, "where": where}
    table.update({name: _unary(name) for name in pointwise.UNARY})
    table.update({name: _binary(name, _INT_BINARY, None) for name in pointwise.BINARY})
    table.update({name: _binary(name, _INT_COMPARE, dt.bool_) for name in pointwise.COMPARE})
    return table
