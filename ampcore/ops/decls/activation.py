"""The piecewise activations beside relu: leaky_relu, elu, selu, hardtanh, relu6, hardsigmoid and hardswish, as
torch.nn.functional has them (F.<name>, and the layers LeakyReLU, ELU, ... in ampcore.nn).

Each is an elementwise program; a parameter (leaky_relu's slope, elu's alpha, hardtanh's bounds) is an operand,
a Python number in ordinary use, so one kernel serves every value.  The F functions take torch's keywords and
``inplace=``.
"""

from __future__ import annotations

from typing import Any

from ... import expr as E
from ..declare import Domain, elementwise
from ..elementwise import binary, nary, unary

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _inplace(x: Any, inplace: bool, compute: Any, name: str) -> Any:
    return x._rebase(compute, f"{name}_") if inplace else compute(x)


def leaky_relu(input: Any, negative_slope: Any = 0.01, inplace: bool = False) -> Any:  # noqa: A002 - torch's name
    """torch.nn.functional.leaky_relu: ``x`` where positive, ``negative_slope * x`` elsewhere."""
    return _inplace(input, inplace, lambda x: binary("leaky_relu", x, negative_slope), "leaky_relu")


elementwise(
    "leaky_relu",
    lambda x, slope: E.select(x > 0, x, x * slope),
    inputs="TT",
    grads=(
        lambda k, x, slope, y, g: k.where(k.gt(x, 0.0), g, k.mul(g, slope)),
        lambda k, x, slope, y, g: k.where(k.gt(x, 0.0), 0.0, k.mul(g, x)),
    ),
    reads=("ab", "a"),
    variants=(),
    function=leaky_relu,
    torch_function="nn.functional.leaky_relu",
    signature="leaky_relu(input, negative_slope=0.01, inplace=False) -> Tensor",
    domains=(Domain(-4, 4, grid=0.25, offset=0.125), Domain(0.0, 0.5)),
)


def elu(input: Any, alpha: Any = 1.0, inplace: bool = False) -> Any:  # noqa: A002 - torch's argument name
    """torch.nn.functional.elu: ``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""
    return _inplace(input, inplace, lambda x: binary("elu", x, alpha), "elu")


elementwise(
    "elu",
    lambda x, alpha: E.select(x > 0, x, alpha * E.expm1(x)),
    inputs="TT",
    grads=(
        # alpha * exp(x), as torch's elu_backward: y + alpha would cancel where y is near -alpha
        lambda k, x, alpha, y, g: k.where(k.gt(x, 0.0), g, k.mul(g, k.mul(k.exp(x), alpha))),
        lambda k, x, alpha, y, g: k.where(k.gt(x, 0.0), 0.0, k.mul(g, k.expm1(x))),
    ),
    reads=("ab", "a"),
    variants=(),
    function=elu,
    torch_function="nn.functional.elu",
    signature="elu(input, alpha=1.0, inplace=False) -> Tensor",
    ulps=(2, 2, 2),  # expm1's 1 ulp (CUDA's expm1f, glibc's expm1), then the product's half ulp
    domains=(Domain(-4, 4, grid=0.25, offset=0.125), Domain(0.25, 2.0)),
    small_results="near zero",
)


def selu(input: Any, inplace: bool = False) -> Any:  # noqa: A002 - torch's argument name
    """torch.nn.functional.selu: ``scale * elu(x, alpha)`` with the self-normalising constants."""
    return _inplace(input, inplace, lambda x: unary("selu", x), "selu")


elementwise(
    "selu",
    lambda x: _SELU_SCALE * E.select(x > 0, x, _SELU_ALPHA * E.expm1(x)),
    inputs="T",
    grads=(
        lambda k, x, y, g: k.where(
            k.gt(x, 0.0), k.mul(g, _SELU_SCALE), k.mul(g, k.mul(k.exp(x), _SELU_SCALE * _SELU_ALPHA))
        ),
    ),
    reads=("x",),
    variants=("function",),
    function=selu,
    signature="selu(input, inplace=False) -> Tensor",
    ulps=(3, 3, 3),  # expm1's 1 ulp and two products' half ulps
    domains=(Domain(-4, 4, grid=0.25, offset=0.125),),
    small_results="near zero",
)


def hardtanh(input: Any, min_val: Any = -1.0, max_val: Any = 1.0, inplace: bool = False) -> Any:  # noqa: A002
    """torch.nn.functional.hardtanh: ``input`` clamped to ``[min_val, max_val]`` (the gradient passes strictly
    inside, as torch's)."""
    return _inplace(input, inplace, lambda x: nary("hardtanh", x, min_val, max_val), "hardtanh")


elementwise(
    "hardtanh",
    lambda x, lo, hi: E.minimum(E.maximum(x, lo), hi),
    inputs="TTT",
    grads=(
        lambda k, x, lo, hi, y, g: k.where(k.logical_and(k.gt(x, lo), k.lt(x, hi)), g, 0.0),
        lambda k, x, lo, hi, y, g: k.where(k.le(x, lo), g, 0.0),
        lambda k, x, lo, hi, y, g: k.where(k.ge(x, hi), g, 0.0),
    ),
    reads=("abc", "ab", "ac"),
    variants=(),
    function=hardtanh,
    torch_function="nn.functional.hardtanh",
    signature="hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False) -> Tensor",
    domains=(Domain(-4, 4, grid=0.25, offset=0.125), Domain(-2, -1, grid=0.25), Domain(1, 2, grid=0.25)),
)


def relu6(input: Any, inplace: bool = False) -> Any:  # noqa: A002 - torch's argument name
    """torch.nn.functional.relu6: ``min(max(x, 0), 6)``."""
    return _inplace(input, inplace, lambda x: unary("relu6", x), "relu6")


elementwise(
    "relu6",
    lambda x: E.minimum(E.maximum(x, 0), 6),
    inputs="T",
    grads=(lambda k, x, y, g: k.where(k.logical_and(k.gt(x, 0.0), k.lt(x, 6.0)), g, 0.0),),
    reads=("x",),
    variants=(),
    function=relu6,
    torch_function="nn.functional.relu6",
    signature="relu6(input, inplace=False) -> Tensor",
    domains=(Domain(-8, 8, grid=0.25, offset=0.125),),
)


def hardsigmoid(input: Any, inplace: bool = False) -> Any:  # noqa: A002 - torch's argument name
    """torch.nn.functional.hardsigmoid: ``min(max(x + 3, 0), 6) / 6``."""
    return _inplace(input, inplace, lambda x: unary("hardsigmoid", x), "hardsigmoid")


elementwise(
    "hardsigmoid",
    lambda x: E.minimum(E.maximum(x + 3, 0), 6) / 6,
    inputs="T",
    grads=(lambda k, x, y, g: k.where(k.logical_and(k.gt(x, -3.0), k.lt(x, 3.0)), k.div(g, 6.0), 0.0),),
    reads=("x",),
    variants=(),
    function=hardsigmoid,
    torch_function="nn.functional.hardsigmoid",
    signature="hardsigmoid(input, inplace=False) -> Tensor",
    ulps=(2, 2, 1),  # x + 3 (exact near -3, Sterbenz) and the quotient: a half ulp each
    domains=(Domain(-5, 5, grid=0.25, offset=0.125),),
)


def hardswish(input: Any, inplace: bool = False) -> Any:  # noqa: A002 - torch's argument name
    """torch.nn.functional.hardswish: ``x * (min(max(x + 3, 0), 6) / 6)``."""
    return _inplace(input, inplace, lambda x: unary("hardswish", x), "hardswish")


# x times the factor in [0, 1], not (x * clamp) / 6 as torch writes it: the same to within an ulp, and no overflow
# for x near the dtype's maximum.


elementwise(
    "hardswish",
    lambda x: x * (E.minimum(E.maximum(x + 3, 0), 6) / 6),
    inputs="T",
    grads=(
        lambda k, x, y, g: k.where(k.lt(x, -3.0), 0.0, k.where(k.gt(x, 3.0), g, k.mul(g, k.add(k.div(x, 3.0), 0.5)))),
    ),
    reads=("x",),
    variants=(),
    function=hardswish,
    torch_function="nn.functional.hardswish",
    signature="hardswish(input, inplace=False) -> Tensor",
    ulps=(2, 2, 2),  # x + 3, the product and the quotient: a half ulp each
    domains=(Domain(-5, 5, grid=0.25, offset=0.125),),
)
