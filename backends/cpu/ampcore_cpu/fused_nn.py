"""Fused softmax / log-softmax / GELU kernels for the CPU backend.

Each is a few whole-array NumPy passes.  float16/bfloat16 inputs are computed
in float32 and rounded once to their dtype on output (``_lowp``); softmax
subtracts the maximum first, so no input overflows ``exp``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .kernels import _erf, _lowp, _quiet

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_C = 0.044715


def _row_max(x: np.ndarray, axis: int) -> np.ndarray:
    # initial=-inf: an empty axis gives an empty result (as torch), not NumPy's "zero-size array" error
    return x.max(axis=axis, keepdims=True, initial=-np.inf)


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - _row_max(x, axis))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_backward(y: np.ndarray, gy: np.ndarray, axis: int) -> np.ndarray:
    # d softmax: y * (g - sum(g * y))
    return y * (gy - (gy * y).sum(axis=axis, keepdims=True))


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    z = x - _row_max(x, axis)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def log_softmax_backward(y: np.ndarray, gy: np.ndarray, axis: int) -> np.ndarray:
    # d log_softmax: g - softmax * sum(g), with softmax = exp(y)
    return gy - np.exp(y) * gy.sum(axis=axis, keepdims=True)


def _tanh_inner(x: np.ndarray) -> np.ndarray:
    return _SQRT_2_OVER_PI * (x + _GELU_TANH_C * x * x * x)


def gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(_tanh_inner(x)))
    return 0.5 * x * (1.0 + _erf(x * _INV_SQRT2))


def gelu_backward(x: np.ndarray, gy: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        t = np.tanh(_tanh_inner(x))
        d_inner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_C * x * x)
        return gy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner)
    cdf = 0.5 * (1.0 + _erf(x * _INV_SQRT2))
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
    return gy * (cdf + x * pdf)


def _kernel(fn: Callable[..., Any]) -> Callable[..., Any]:
    return _quiet(_lowp(fn))


NN_KERNELS: dict[str, Callable[..., Any]] = {
    fn.__name__: _kernel(fn)
    for fn in (softmax, softmax_backward, log_softmax, log_softmax_backward, gelu, gelu_backward)
}
