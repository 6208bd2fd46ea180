"""The one-operand math ops: exp, log, log1p and expm1, the roots, tanh and sigmoid, erf, sin and cos, and the sign
changes."""

from __future__ import annotations

import math

from ... import expr as E
from ..declare import Domain, unary

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

unary("neg", E.neg, grad=lambda k, x, y, g: k.neg(g), operators=("__neg__",), small_results="near zero")
unary(
    "abs",
    E.abs_,
    grad=lambda k, x, y, g: k.mul(g, k.sign(x)),
    reads="x",
    operators=("__abs__",),
    small_results="near zero",
)
# sign(NaN) is left open: NumPy gives NaN, torch gives 0 (pytorch/pytorch#41245).
unary("sign", E.sign, small_results="near zero", nan_unspecified=True)
unary(
    "exp",
    E.exp,
    grad=lambda k, x, y, g: k.mul(g, y),
    reads="y",
    domain=Domain(-8, 8),
    small_results="negative tail",
)
unary(
    "log",
    E.log,
    grad=lambda k, x, y, g: k.div(g, x),
    reads="x",
    domain=Domain(2.0**-6, 64),
    small_results="near one",
)
unary("sqrt", E.sqrt, grad=lambda k, x, y, g: k.div(g, k.mul(y, 2.0)), reads="y", domain=Domain(0.0, 64))
unary(
    "rsqrt",
    lambda x: 1 / E.sqrt(x),  # IEEE: rsqrt(-0) = -inf, which a hardware reciprocal square root need not give
    grad=lambda k, x, y, g: k.mul(g, k.mul(k.mul(y, k.mul(y, y)), -0.5)),
    reads="y",
    domain=Domain(2.0**-6, 64),
    ulps=(2, 1, 1),  # CUDA's rsqrtf 2 ulps, rsqrt 1; 1/sqrt(x) in float64: two correctly rounded operations
)
unary(
    "log1p",
    E.log1p,
    grad=lambda k, x, y, g: k.div(g, k.add(x, 1.0)),
    reads="x",
    domain=Domain(-0.75, 8),
    small_results="near zero",
)
unary(
    "expm1",
    E.expm1,
    grad=lambda k, x, y, g: k.mul(g, k.add(y, 1.0)),
    reads="y",
    domain=Domain(-8, 8),
    small_results="near zero",
)
unary(
    "tanh",
    E.tanh,
    grad=lambda k, x, y, g: k.mul(g, k.sub(1.0, k.mul(y, y))),
    reads="y",
    small_results="near zero",
)


def _sigmoid(x: E.Expr) -> E.Expr:
    e = E.exp(-abs(x))  # never overflows
    return E.select(x >= 0, 1 / (1 + e), e / (1 + e))


unary(
    "sigmoid",
    _sigmoid,
    grad=lambda k, x, y, g: k.mul(g, k.mul(y, k.sub(1.0, y))),
    reads="y",
    ulps=(3, 3, 3),  # exp's 2 ulps, shrunk by t / (1 + t) <= 1, plus half an ulp for the sum and the quotient
    small_results="negative tail",
)
unary(
    "erf",
    E.erf,
    grad=lambda k, x, y, g: k.mul(g, k.mul(k.exp(k.neg(k.mul(x, x))), _TWO_OVER_SQRT_PI)),
    reads="x",
    small_results="near zero",
)
unary(
    "sin",
    E.sin,
    grad=lambda k, x, y, g: k.mul(g, k.cos(x)),
    reads="x",
    domain=Domain(-8, 8),
    small_results="near zero",
)
unary(
    "cos",
    E.cos,
    grad=lambda k, x, y, g: k.neg(k.mul(g, k.sin(x))),
    reads="x",
    domain=Domain(-8, 8),
    small_results="near pi/2",
)
unary(
    "relu",
    lambda x: E.maximum(x, 0),
    grad=lambda k, x, y, g: k.where(k.gt(y, 0.0), g, 0.0),  # torch's rule: no gradient at 0
    reads="y",
)
