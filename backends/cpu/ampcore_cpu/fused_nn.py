"""Fused softmax / log-softmax / GELU kernels for the CPU backend.

Each is a few whole-array NumPy passes.  float16/bfloat16 inputs are computed
in float32 and rounded once to their dtype on output (``_lowp``); softmax
subtracts the maximum first, so no input overflows ``exp``.  GELU takes the
forms that keep their relative accuracy for x << 0 (the conformance suite
judges each result at its own value): x erfc(-x / sqrt 2) / 2, and x
sigmoid(2 y) for the tanh form, where 1 + erf and 1 + tanh cancel (gelu(-10)
came out as -0, not -7.6e-23).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import expr as E

from . import compiled, gelu32, special
from .elementwise import FUNCTIONS
from .kernels import BF16, CHUNK, F16, _erf, _lowp, _quiet, _up

# The sigmoid op's own program (ampcore.ops.decls.math): exp(-|x|) over 1 + exp(-|x|) for x < 0, no cancellation.
_SIGMOID = E.evaluator(E.get("sigmoid"), FUNCTIONS)

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


_LIBM_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def _erfc(x: np.ndarray) -> np.ndarray:
    """erfc in float64: libm's for float64 results (2 ulps; the vectorised Cephes one is within 10 where it
    computes 1 - erf), the vectorised one for results rounded to float32 or narrower."""
    if x.dtype == np.float64:
        return _LIBM_ERFC(x) if x.size else np.zeros(x.shape)
    return special.erfc(x)


def gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return x * _SIGMOID(2.0 * _tanh_inner(x))
    return 0.5 * x * _erfc(-(x * _INV_SQRT2))


def gelu_backward(x: np.ndarray, gy: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        t = np.tanh(_tanh_inner(x))
        d_inner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_C * x * x)
        return gy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner)
    cdf = 0.5 * (1.0 + _erf(x * _INV_SQRT2))
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
    return gy * (cdf + x * pdf)


def _blockwise(fn: Callable[..., Any]) -> Callable[..., Any]:
    """An elementwise ``fn(x, gy?, approximate)`` run over cache-sized blocks of ``x`` (and ``gy``).

    GELU's float64 erf takes ~15 whole-array passes; on arrays past the cache each pass streams
    memory, block by block they stay in L2 (about 2x faster on a 1M-element GELU).  The same
    float64 arithmetic per element and the same single rounding on output: results are unchanged.
    """

    def kernel(*args: Any) -> Any:
        *arrays, approximate = args
        x = arrays[0]
        if x.size <= CHUNK:
            return fn(*arrays, approximate)
        flats = [np.ascontiguousarray(np.broadcast_to(a, x.shape)).reshape(-1) for a in arrays]
        first = np.asarray(fn(*[f[:CHUNK] for f in flats], approximate))
        out = np.empty(x.size, dtype=first.dtype)  # float64 from erf: _lowp still rounds only once
        out[:CHUNK] = first
        for start in range(CHUNK, x.size, CHUNK):
            out[start : start + CHUNK] = fn(*[f[start : start + CHUNK] for f in flats], approximate)
        return out.reshape(x.shape)

    kernel.__name__ = fn.__name__
    return kernel


@functools.cache
def _compiled_gelu() -> Any:
    """:mod:`._gelu_numba` on the compiled path, else None (:mod:`.compiled`)."""
    return compiled.load("_gelu_numba")


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The exact-erf GELU kernels through :mod:`._gelu_numba` on the compiled path.

    A (16, 64, 1024) array of N(0, 9) values: forward 72 -> 31 ms, backward 68 -> 43 ms against the
    blockwise NumPy kernels (single core of a 2-core Zen 3).  Other forms and inputs, and on the NumPy fallback, run
    ``fn`` (blockwise NumPy).
    """
    numpy_kernel = _blockwise(fn)

    def kernel(*args: Any) -> Any:
        *arrays, approximate = args
        loops = _compiled_gelu()
        x = arrays[0]
        if loops is None or approximate != "none" or x.dtype != np.float32 or x.size < 1024:
            return numpy_kernel(*args)
        flats = [np.ascontiguousarray(np.broadcast_to(a, x.shape), dtype=np.float32).reshape(-1) for a in arrays]
        out = np.empty(x.size, dtype=np.float64)  # float64 as the NumPy kernel's: _lowp rounds once
        getattr(loops, fn.__name__)(*flats, out)
        return out.reshape(x.shape)

    kernel.__name__ = fn.__name__
    return kernel


# The 16-bit formats as the row loops take their bits (:mod:`._softmax_numba`): bfloat16 as uint16, float16 as int16.
_ROW_BITS = {np.dtype(np.float32): None, F16: np.int16, BF16: np.uint16}


@functools.cache
def _row_loops() -> Any:
    """:mod:`._softmax_numba` on the compiled path, else None (:mod:`.compiled`)."""
    return compiled.load("_softmax_numba")


def _by_rows(fn: Callable[..., Any], fallback: Callable[..., Any]) -> Callable[..., Any]:
    """softmax, log_softmax and their backwards over the last axis of C-contiguous float32, float16 or bfloat16
    arrays of one dtype and shape in :mod:`._softmax_numba`'s row loops (NumPy's bits), else ``fallback``."""

    def kernel(*args: Any) -> Any:
        *arrays, axis = args
        x = arrays[0]
        if (
            x.ndim == 0
            or axis not in (-1, x.ndim - 1)
            or x.size == 0
            or x.dtype not in _ROW_BITS
            or any(a.dtype != x.dtype or a.shape != x.shape or not a.flags.c_contiguous for a in arrays)
        ):
            return fallback(*args)
        loops = _row_loops()
        if loops is None:
            return fallback(*args)
        bits = _ROW_BITS[x.dtype]
        rows = [(a if bits is None else a.view(bits)).reshape(-1, x.shape[-1]) for a in arrays]
        out = np.empty(x.shape, x.dtype)
        out_rows = (out if bits is None else out.view(bits)).reshape(-1, x.shape[-1])
        if fn is softmax or fn is log_softmax:
            z = np.empty(rows[0].shape, np.float32)
            loops.shifted(rows[0], z)
            if fn is softmax:
                np.exp(z, out=z)  # NumPy's exp and log: the NumPy kernels' bits
                loops.normalized(z, out_rows)
            else:
                sums = np.empty(z.shape[0], np.float32)
                loops.row_sums(np.exp(z), sums)
                loops.log_normalized(z, np.log(sums, out=sums), out_rows)
        elif fn is softmax_backward:
            loops.backward(rows[0], rows[1], out_rows)
        else:
            e = np.exp(arrays[0].reshape(rows[0].shape) if bits is None else _up(arrays[0]).reshape(rows[0].shape))
            loops.log_backward(e, rows[1], out_rows)
        return out

    kernel.__name__ = fn.__name__
    return kernel


def _kernel(fn: Callable[..., Any]) -> Callable[..., Any]:
    if fn in (gelu, gelu_backward):  # gelu32: float32 vectorized, float16/bfloat16 by table (the same bits)
        return _quiet(gelu32.float32_first(fn.__name__, _lowp(_compiled(fn))))
    if fn in (softmax, softmax_backward, log_softmax, log_softmax_backward):
        return _quiet(_by_rows(fn, _lowp(fn)))
    return _quiet(_lowp(fn))


NN_KERNELS: dict[str, Callable[..., Any]] = {
    fn.__name__: _kernel(fn)
    for fn in (softmax, softmax_backward, log_softmax, log_softmax_backward, gelu, gelu_backward)
}
