"""Float64 NumPy references of ampcore's tensor-level ops, and their gradients.

Every reference is written from the mathematical definition in float64,
without ampcore; the conformance checks evaluate it on the inputs as the
device holds them (already rounded to the dtype under test).

Gradients come from the references themselves, by complex-step
differentiation (:func:`vjp`, :func:`derivative`): ``f'(x) = Im f(x + ih) / h``
with ``h = 1e-30``.  Nothing is subtracted, so the derivative is accurate to
float64 rounding, where central differences lose about half the digits
(truncation ~h**2, cancellation ~eps/h: 1e-10 relative at best with h ~ 1e-6) and
could not judge a float64 backward within ``tolerance(float64)`` ~ 1e-15.  So the
gradient references are independent of ampcore's backward rules: they only
differentiate the forward references.

For that, references must be analytic in the perturbed input.  The piecewise
functions (abs, sign, maximum, minimum, max, erf) are therefore the complex-safe
helpers below, which decide on the real part and carry the imaginary part
to first order; everything else is plain NumPy, which handles complex
arguments.  Helpers compare real parts only, so inputs must be tie-free where
a choice is made (max, maximum): the checks draw such inputs.

Optimizer references (:func:`adam_steps`, :func:`sgd_steps`) follow torch's
update rules in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .. import dtypes as dt

__all__ = [
    "STEP",
    "vjp",
    "derivative",
    "abs_",
    "sign",
    "maximum",
    "minimum",
    "amax",
    "argmax",
    "erf",
    "erfc",
    "sigmoid",
    "rsqrt",
    "softmax",
    "log_softmax",
    "logsumexp",
    "gelu",
    "linear",
    "layer_norm",
    "cross_entropy",
    "mse_loss",
    "conv2d",
    "attention",
    "softmax_vjp",
    "log_softmax_vjp",
    "adam_steps",
    "sgd_steps",
    "overflowing_rows",
]

Array = np.ndarray

# The complex step: tiny enough that h**2 terms vanish in float64, far above the smallest subnormal.
STEP = 1e-30


# --------------------------------------------------------------------------- gradients
def _first(out: Any) -> Array:
    """The differentiated output of a reference that may return (values, indices)."""
    return out[0] if isinstance(out, tuple) else out


def _derivatives(fn: Callable[..., Any], args: Sequence[Any], wrt: int, perturbed: Array) -> Array:
    """d fn(*args) along the imaginary perturbation already put into ``args[wrt]``."""
    call = list(args)
    call[wrt] = perturbed
    return np.imag(_first(fn(*call))) / STEP


def vjp(fn: Callable[..., Any], args: Sequence[Any], weights: Array, wrt: int) -> Array:
    """d/d args[wrt] of ``sum(weights * fn(*args))`` in float64, by complex-step differentiation.

    One evaluation of ``fn`` per element of ``args[wrt]``: meant for the small
    shapes of the conformance checks.  Integer and bool arguments pass through.
    """
    x = np.asarray(args[wrt], np.float64)
    w = np.asarray(weights, np.float64)
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        z = x.astype(np.complex128)
        z[i] += 1j * STEP
        grad[i] = np.sum(w * _derivatives(fn, args, wrt, z))
    return grad


def derivative(fn: Callable[[Array], Array], x: Array) -> Array:
    """The elementwise derivative f'(x) of an elementwise ``fn`` (one complex-step evaluation)."""
    x = np.asarray(x, np.float64)
    return _derivatives(fn, (x,), 0, x + 1j * STEP)


# --------------------------------------------------------------------------- complex-safe helpers
def abs_(z: Array) -> Array:
    """|x|, carrying a complex step with the sign of the real part (derivative sign(x))."""
    return z * np.sign(np.real(z))


def sign(z: Array) -> Array:
    """sign(x) of the real part: piecewise constant, so no derivative is carried."""
    return np.sign(np.real(z))


def maximum(a: Array, b: Array) -> Array:
    """Elementwise max, choosing by real parts (the chosen operand's derivative flows)."""
    return np.where(np.real(a) > np.real(b), a, b)


def minimum(a: Array, b: Array) -> Array:
    return np.where(np.real(a) < np.real(b), a, b)


def argmax(z: Array, axis: int) -> Array:
    """Index of the first maximum of the real part (NumPy's rule, torch's too)."""
    return np.argmax(np.real(z), axis=axis)


def amax(z: Array, axis: int | tuple[int, ...], keepdims: bool = False) -> Array:
    """The maximum over ``axis`` (an int or a tuple), the chosen element carrying its derivative."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    rest = [i for i in range(z.ndim) if i not in axes]
    moved = np.transpose(z, rest + list(axes))
    flat = moved.reshape(moved.shape[: len(rest)] + (-1,))
    picked = np.take_along_axis(flat, np.argmax(np.real(flat), axis=-1)[..., None], axis=-1)[..., 0]
    if keepdims:
        picked = np.expand_dims(picked, axes)
    return picked


_ERF = np.vectorize(math.erf, otypes=[np.float64])
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf(z: Array) -> Array:
    """erf of the real part (math.erf, correctly rounded to ~1 ulp), plus the first-order imaginary term
    ``i Im(z) erf'(x)`` with erf'(x) = 2/sqrt(pi) exp(-x^2): all a complex step needs."""
    x = np.real(z)
    out = _ERF(x) if x.size else np.zeros(x.shape)
    if np.iscomplexobj(z):
        return out + 1j * np.imag(z) * _TWO_OVER_SQRT_PI * np.exp(-x * x)
    return out


_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def erfc(z: Array) -> Array:
    """erfc of the real part (math.erfc: relatively accurate where 1 - erf cancels), plus the first-order
    imaginary term ``i Im(z) erfc'(x)`` with erfc'(x) = -2/sqrt(pi) exp(-x^2)."""
    x = np.real(z)
    out = _ERFC(x) if x.size else np.zeros(x.shape)
    if np.iscomplexobj(z):
        return out - 1j * np.imag(z) * _TWO_OVER_SQRT_PI * np.exp(-x * x)
    return out


def sigmoid(z: Array) -> Array:
    """1 / (1 + exp(-x)) for x >= 0 and exp(x) / (1 + exp(x)) below: never overflows, and keeps its relative
    accuracy for x << 0 (the tanh form 0.5 (1 + tanh(x / 2)) cancels there: 10 ulps off at x = -3.8)."""
    negative = np.real(z) < 0
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.where(negative, z, -z))
        return np.where(negative, e / (1.0 + e), 1.0 / (1.0 + e))


def rsqrt(z: Array) -> Array:
    return 1.0 / np.sqrt(z)


# --------------------------------------------------------------------------- nn references
def logsumexp(z: Array, axis: int, keepdims: bool = False) -> Array:
    """log(sum(exp(z))) along ``axis``, shifted by the (real) maximum so nothing overflows."""
    m = np.max(np.real(z), axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # a row of -inf stays -inf instead of becoming NaN
    out = np.log(np.sum(np.exp(z - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis)


def softmax(z: Array, axis: int) -> Array:
    """exp(z) / sum(exp(z)) along ``axis``, shifted by the (real) maximum."""
    e = np.exp(z - np.max(np.real(z), axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(z: Array, axis: int) -> Array:
    return z - logsumexp(z, axis, keepdims=True)


def softmax_vjp(y: Array, gy: Array, axis: int) -> Array:
    """The gradient of softmax expressed in its output y: y * (gy - sum(gy * y))."""
    return y * (gy - np.sum(gy * y, axis=axis, keepdims=True))


def log_softmax_vjp(y: Array, gy: Array, axis: int) -> Array:
    """The gradient of log_softmax expressed in its output y: gy - exp(y) * sum(gy)."""
    return gy - np.exp(y) * np.sum(gy, axis=axis, keepdims=True)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(z: Array, approximate: str = "none") -> Array:
    """x * Phi(x) = x erfc(-x / sqrt 2) / 2, or torch's tanh approximation x sigmoid(2 y), y = sqrt(2/pi) (x +
    0.044715 x^3): the forms that keep their relative accuracy for x << 0, where 1 + erf and 1 + tanh cancel."""
    if approximate == "tanh":
        return z * sigmoid(2.0 * _SQRT_2_OVER_PI * (z + 0.044715 * z * z * z))
    return 0.5 * z * erfc(-z / math.sqrt(2.0))


def linear(x: Array, w: Array, b: Array) -> Array:
    return np.einsum("...i,oi->...o", x, w) + b


def layer_norm(x: Array, w: Array, b: Array, eps: float = 1e-5) -> Array:
    """Normalise over the trailing ``w.ndim`` axes with the biased variance, then scale and shift."""
    axes = tuple(range(x.ndim - w.ndim, x.ndim))
    centered = x - np.mean(x, axis=axes, keepdims=True)
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    return centered / np.sqrt(var + eps) * w + b


def cross_entropy(logits: Array, target: Array) -> Array:
    """Mean over the batch of -log softmax(logits)[target], class axis 1."""
    picked = np.take_along_axis(logits, target[:, None], axis=1)[:, 0]
    return np.mean(logsumexp(logits, 1) - picked)


def mse_loss(x: Array, t: Array) -> Array:
    d = x - t
    return np.mean(d * d)


def conv2d(x: Array, w: Array, b: Array, stride: tuple[int, int] = (1, 1), padding: tuple[int, int] = (0, 0)) -> Array:
    """Cross-correlation of (N, C, H, W) with (O, C, kh, kw) (groups=1, dilation 1), plus bias."""
    (sh, sw), (ph, pw) = stride, padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    kh, kw = w.shape[-2:]
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    return np.einsum("nchwij,ocij->nohw", win, w) + b.reshape(1, -1, 1, 1)


def attention(q: Array, k: Array, v: Array, causal: bool = False) -> Array:
    """softmax(q k^T / sqrt(E) [causal: key j <= query i]) v."""
    scores = np.einsum("...le,...se->...ls", q, k) / math.sqrt(q.shape[-1])
    if causal:
        keep = np.arange(k.shape[-2])[None, :] <= np.arange(q.shape[-2])[:, None]
        scores = np.where(keep, scores, -np.inf)
    return np.einsum("...ls,...se->...le", softmax(scores, -1), v)


def overflowing_rows(rng: np.random.Generator, shape: tuple[int, ...], dtype: dt.DType, signed: bool) -> Array:
    """Inputs for softmax / log_softmax where exp(x) overflows unless the row maximum is subtracted first:
    +-1e4 in float32/float64 (exp overflows past ~88 and ~709), 40-90 % of the largest finite value in
    float16/bfloat16.  Element 0 of each row ties the row maximum (a non-trivial softmax).  ``signed=False``
    keeps every x - max within the dtype's range, so log_softmax stays finite."""
    if dtype in (dt.float64, dt.float32):
        x = rng.uniform(-1e4 if signed else 5e3, 1e4, shape)
    else:
        x = rng.uniform(0.4, 0.9, shape) * dt.finfo(dtype).max
        x = x * rng.choice([-1.0, 1.0], shape) if signed else x
    x[..., 0] = x.max(axis=-1)
    return x


# --------------------------------------------------------------------------- optimizers
Rounder = Callable[[Array], Array]


def _identity(a: Array) -> Array:
    return a


def adam_steps(
    p: Array,
    grads: Sequence[Array],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
    round_param: Rounder = _identity,
    amsgrad: bool = False,
) -> Iterator[tuple[Array, Array, Array]]:
    """torch's Adam (``decoupled=False``: L2 added to the gradient) or AdamW, in float64.

    Yields (param, exp_avg, exp_avg_sq) after each step.  ``round_param`` maps
    the parameter to the values its dtype can hold after every step (a
    float16 parameter holds float16 values between steps, whatever precision
    the update ran in).
    """
    p = np.asarray(p, np.float64)
    m, v, v_max = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = np.asarray(g, np.float64)
        if decoupled:
            p = p * (1.0 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = beta1 * m + (1.0 - beta1) * g
        v = beta2 * v + (1.0 - beta2) * g * g
        v_max = np.maximum(v_max, v)  # amsgrad: the running maximum of v drives the step
        m_hat, v_hat = m / (1.0 - beta1**t), (v_max if amsgrad else v) / (1.0 - beta2**t)
        p = round_param(p - lr * m_hat / (np.sqrt(v_hat) + eps))
        yield p, m, v


def sgd_steps(
    p: Array,
    grads: Sequence[Array],
    *,
    lr: float,
    momentum: float = 0.0,
    dampening: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
    round_param: Rounder = _identity,
) -> Iterator[tuple[Array, Array | None]]:
    """torch's SGD in float64; yields (param, momentum_buffer or None) after each step."""
    p = np.asarray(p, np.float64)
    buf: Array | None = None
    for g in grads:
        g = np.asarray(g, np.float64) + weight_decay * p
        if momentum:
            buf = g if buf is None else momentum * buf + (1.0 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = round_param(p - lr * g)
        yield p, buf
