"""The one-operand math ops: exp, log, the roots, tanh and sigmoid, erf, sin and cos, and the sign changes."""

from __future__ import annotations

import math

import numpy as np

from ... import expr as E
from ..declare import Domain, unary

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

unary("neg", E.neg, grad=lambda k, x, y, g: k.neg(g), operators=("__neg__",))
unary("abs", E.abs_, grad=lambda k, x, y, g: k.mul(g, k.sign(x)), reads="x", operators=("__abs__",))
unary("sign", E.sign)
unary("exp", E.exp, grad=lambda k, x, y, g: k.mul(g, y), reads="y", domain=Domain(-3, 3))
unary("log", E.log, grad=lambda k, x, y, g: k.div(g, x), reads="x", domain=Domain(0.1, 5))
unary("sqrt", E.sqrt, grad=lambda k, x, y, g: k.div(g, k.mul(y, 2.0)), reads="y", domain=Domain(0.1, 5))
unary(
    "rsqrt",
    lambda x: 1 / E.sqrt(x),  # IEEE: rsqrt(-0) = -inf, which a hardware reciprocal square root need not give
    grad=lambda k, x, y, g: k.mul(g, k.mul(k.mul(y, k.mul(y, y)), -0.5)),
    reads="y",
    domain=Domain(0.2, 5),
)
unary("tanh", E.tanh, grad=lambda k, x, y, g: k.mul(g, k.sub(1.0, k.mul(y, y))), reads="y", domain=Domain(-3, 3))


def _sigmoid(x: E.Expr) -> E.Expr:
    e = E.exp(-abs(x))  # never overflows
    return E.select(x >= 0, 1 / (1 + e), e / (1 + e))


unary(
    "sigmoid",
    _sigmoid,
    grad=lambda k, x, y, g: k.mul(g, k.mul(y, k.sub(1.0, y))),
    reads="y",
    reference=lambda z: 0.5 * (1.0 + np.tanh(0.5 * z)),  # the tanh form, independent of the expression's
    domain=Domain(-4, 4),
)
unary(
    "erf",
    E.erf,
    grad=lambda k, x, y, g: k.mul(g, k.mul(k.exp(k.neg(k.mul(x, x))), _TWO_OVER_SQRT_PI)),
    reads="x",
    domain=Domain(-2.5, 2.5),
)
unary("sin", E.sin, grad=lambda k, x, y, g: k.mul(g, k.cos(x)), reads="x", domain=Domain(-3, 3))
unary("cos", E.cos, grad=lambda k, x, y, g: k.neg(k.mul(g, k.sin(x))), reads="x", domain=Domain(-3, 3))
unary(
    "relu",
    lambda x: E.maximum(x, 0),
    grad=lambda k, x, y, g: k.where(k.gt(y, 0.0), g, 0.0),  # torch's rule: no gradient at 0
    reads="y",
)
