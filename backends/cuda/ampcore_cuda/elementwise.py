"""Elementwise primitives: ``cast``, the unary and binary ops, comparisons and ``where``, through CuPy.

float32/float64/int/bool run as CuPy computes them; float16/bfloat16 are
widened to float32, computed, and rounded once (:mod:`.convert`).  A Python
scalar operand takes the compute dtype of the array operand (float32 for the
16-bit dtypes, as the cpu backend computes them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from .array import CuArray
from .codegen import ctype
from .convert import LOW, convert, down, scalar_storage, up
from .runtime import import_cupy, import_cupy_module

__all__ = ["kernels", "cast", "where"]


def _sigmoid(cp: Any, x: Any) -> Any:
    e = cp.exp(-cp.abs(x))  # never overflows
    return cp.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _erf(cp: Any, x: Any) -> Any:
    return import_cupy_module("cupyx.scipy.special").erf(x)  # cupyx ships with cupy


def _sign(cp: Any, x: Any) -> Any:
    return x.copy() if x.dtype == np.bool_ else cp.sign(x)


_UNARY: dict[str, Callable[[Any, Any], Any]] = {
    "neg": lambda cp, x: cp.negative(x), "abs": lambda cp, x: cp.abs(x), "exp": lambda cp, x: cp.exp(x),
    "log": lambda cp, x: cp.log(x), "sqrt": lambda cp, x: cp.sqrt(x), "rsqrt": lambda cp, x: 1 / cp.sqrt(x),
    "tanh": lambda cp, x: cp.tanh(x), "sigmoid": _sigmoid, "erf": _erf, "sign": _sign,
    "sin": lambda cp, x: cp.sin(x), "cos": lambda cp, x: cp.cos(x),
}
_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "pow": "power",
           "maximum": "maximum", "minimum": "minimum"}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
            "ge": "greater_equal"}


def _compute_dtype(dtype: dt.DType) -> np.dtype:
    return np.dtype(np.float32) if dtype in LOW else ctype(dtype).cupy_dtype


def _operands(a: Any, b: Any) -> tuple[Any, Any, CuArray]:
    """Both operands as CuPy values to compute with, and the array operand that sets the dtype."""
    ref = a if isinstance(a, CuArray) else b
    compute = _compute_dtype(ref.dtype)
    as_value = lambda v: up(v) if isinstance(v, CuArray) else compute.type(v)  # noqa: E731
    return as_value(a), as_value(b), ref


def _unary(name: str) -> Callable[[CuArray], CuArray]:
    fn = _UNARY[name]

    def kernel(x: CuArray) -> CuArray:
        cp = import_cupy()
        with cp.cuda.Device(x.device_index):
            return down(fn(cp, up(x)), x.dtype)

    kernel.__name__ = name
    return kernel


def _binary(name: str) -> Callable[[Any, Any], CuArray]:
    def kernel(a: Any, b: Any) -> CuArray:
        cp = import_cupy()
        x, y, ref = _operands(a, b)
        with cp.cuda.Device(ref.device_index):
            return down(getattr(cp, _BINARY[name])(x, y), ref.dtype)

    kernel.__name__ = name
    return kernel


def _compare(name: str) -> Callable[[Any, Any], CuArray]:
    def kernel(a: Any, b: Any) -> CuArray:
        cp = import_cupy()
        x, y, ref = _operands(a, b)
        with cp.cuda.Device(ref.device_index):
            return CuArray(cp.asarray(getattr(cp, _COMPARE[name])(x, y)), dt.bool_)

    kernel.__name__ = name
    return kernel


def cast(x: CuArray, dtype: Any) -> CuArray:
    """``x`` converted to ``dtype`` (always a new array), narrowing floats rounded once to nearest-even."""
    dtype = dt.as_dtype(dtype)
    cp = import_cupy()
    with cp.cuda.Device(x.device_index):
        return CuArray(convert(x.data, x.dtype, dtype), dtype)


def where(cond: CuArray, a: Any, b: Any) -> CuArray:
    """``a`` where ``cond`` else ``b``, broadcasting; selects stored bits, so 16-bit values pass unchanged."""
    ref = a if isinstance(a, CuArray) else b
    cp = import_cupy()
    value = lambda v: v.data if isinstance(v, CuArray) else cp.asarray(scalar_storage(v, ref.dtype))  # noqa: E731
    with cp.cuda.Device(ref.device_index):
        return CuArray(cp.where(cond.data, value(a), value(b)), ref.dtype)


def kernels() -> dict[str, Callable[..., Any]]:
    """This family's kernels by contract name."""
    table: dict[str, Callable[..., Any]] = {"cast": cast, "where": where}
    table.update({name: _unary(name) for name in _UNARY})
    table.update({name: _binary(name) for name in _BINARY})
    table.update({name: _compare(name) for name in _COMPARE})
    return table
