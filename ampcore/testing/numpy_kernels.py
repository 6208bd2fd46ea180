"""The NumPy element functions the fake backend computes with, one by one (and the defects patch): apart from
:mod:`.fake` so that :mod:`.defects` can use them without importing it (no import circle)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as dt

__all__ = ["up", "np_dtype", "UNARY", "BINARY", "COMPARE"]

_F32 = np.dtype(np.float32)
_LOW = (dt.float16.numpy, dt.bfloat16.numpy)


def up(v: Any) -> Any:
    """A float16/bfloat16 array as float32 (computed in it, rounded once on output); anything else as it is."""
    return v.astype(_F32) if isinstance(v, np.ndarray) and v.dtype in _LOW else v


def np_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype of an ampcore dtype (or its name)."""
    return dt.as_dtype(dtype).numpy


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), as exp(x) / (1 + exp(x)) for x < 0: no overflow, and small results keep their
    relative accuracy (the tanh form 0.5 (1 + tanh(x / 2)) cancels there, and gives 0 below x = -17)."""
    e = np.exp(-np.abs(x))
    return np.where(x < 0, e / (1 + e), 1 / (1 + e))


_erf = np.vectorize(math.erf, otypes=[np.float64])
UNARY: dict[str, Callable[..., Any]] = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "erf": _erf,
    "sign": np.sign,
    "sin": np.sin,
    "cos": np.cos,
    "log1p": np.log1p,  # programs' functions the legacy kernels do not cover, so a program using them composes
    "expm1": np.expm1,
}
BINARY: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
}
COMPARE: dict[str, Callable[..., Any]] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
