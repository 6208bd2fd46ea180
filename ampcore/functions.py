"""torch's function forms of Tensor methods (``ampcore.exp(x)``, ``ampcore.max(x, 1)``, ``ampcore.softmax(x, -1)``),
generated from one table: each calls the method of its first argument, so a method added to Tensor (or attached
by ``ampcore.nn``, as softmax is) needs only its name here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .ops import elementwise as ew
from .tensor_base import TensorBase

__all__ = ["TORCH_FUNCTIONS", *(
    "exp log sqrt rsqrt tanh sigmoid sin cos erf abs sign relu sum mean amax argmax argmin cumsum var std clamp pow "
    "softmax log_softmax reshape permute transpose flatten squeeze unsqueeze masked_fill maximum minimum clone max min"
).split()]  # fmt: skip


def _method_function(name: str, elementwise: str | None = None) -> Callable[..., Any]:
    """``ampcore.<name>(input, *args, **kwargs)``: torch's function form of the Tensor method ``name``.

    ``elementwise`` names the binary op that ``name(a, b)`` with a tensor ``b`` means (``torch.max(a, b)``
    is ``maximum``).
    """

    def function(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002 - torch's name
        if elementwise is not None and args and isinstance(args[0], TensorBase):
            return ew.binary(elementwise, input, args[0])
        if not isinstance(input, TensorBase):
            raise TypeError(f"{name}(): input must be a Tensor, got {type(input).__name__}")
        return getattr(input, name)(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``input.{name}(*args, **kwargs)`` (torch.{name})." + (
        f" With a tensor second argument, the elementwise {elementwise}." if elementwise else ""
    )
    return function


# name -> the binary op a tensor second argument means; from this one table ampcore gets its function forms.
TORCH_FUNCTIONS: dict[str, str | None] = {
    **dict.fromkeys(("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "erf", "abs", "sign", "relu")),
    **dict.fromkeys(("sum", "mean", "amax", "argmax", "argmin", "cumsum", "var", "std", "clamp", "pow")),
    **dict.fromkeys(("softmax", "log_softmax", "reshape", "permute", "transpose", "flatten", "squeeze")),
    **dict.fromkeys(("unsqueeze", "masked_fill", "maximum", "minimum", "clone")),
    "max": "maximum",
    "min": "minimum",
}
(
    exp, log, sqrt, rsqrt, tanh, sigmoid, sin, cos, erf, abs, sign, relu,  # noqa: A001 - torch's names
    sum, mean, amax, argmax, argmin, cumsum, var, std, clamp, pow,  # noqa: A001 - torch's names
    softmax, log_softmax, reshape, permute, transpose, flatten, squeeze,
    unsqueeze, masked_fill, maximum, minimum, clone, max, min,  # noqa: A001 - torch's names
) = (_method_function(name, binary) for name, binary in TORCH_FUNCTIONS.items())  # fmt: skip
