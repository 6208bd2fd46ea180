"""torch's function forms (``ampcore.exp(x)``, ``ampcore.max(x, 1)``, ``ampcore.softmax(x, -1)``).

Two sources, one table: every op declared with the ``function`` variant
(:mod:`ampcore.ops.declare`) is its own function form; the rest are generated
from :data:`METHOD_FUNCTIONS`, each calling the method of its first argument, so
a method added to Tensor (or attached by ``ampcore.nn``, as softmax is) needs
only its name there.  :data:`TORCH_FUNCTIONS` is both, and ``ampcore``
exports each of its names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .ops import declare
from .ops import elementwise as ew
from .tensor_base import TensorBase

__all__ = ["TORCH_FUNCTIONS", "METHOD_FUNCTIONS", "function_names", "on_new_function"]


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


# name -> the binary op a tensor second argument means: the function forms of methods that are not declared ops.
METHOD_FUNCTIONS: dict[str, str | None] = {
    **dict.fromkeys(("sum", "mean", "amax", "argmax", "argmin", "cumsum", "var", "std")),
    **dict.fromkeys(("softmax", "log_softmax", "reshape", "permute", "transpose", "flatten", "squeeze")),
    **dict.fromkeys(("unsqueeze", "masked_fill", "clone")),
    "max": "maximum",
    "min": "minimum",
}

TORCH_FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: _method_function(name, b) for name, b in METHOD_FUNCTIONS.items()
}
"""Every function form by name: the method-delegating ones and the declared ops' (kept current)."""
_listeners: list[Callable[[str, Callable[..., Any]], None]] = []


def _declared(decl: declare.Declaration) -> None:
    if "function" in decl.variants and decl.name not in METHOD_FUNCTIONS:
        TORCH_FUNCTIONS[decl.name] = decl.function
        globals()[decl.name] = decl.function
        for listener in list(_listeners):
            listener(decl.name, decl.function)


def function_names() -> list[str]:
    """The names of every function form, in a stable order."""
    return sorted(TORCH_FUNCTIONS)


def on_new_function(listener: Callable[[str, Callable[..., Any]], None]) -> None:
    """Call ``listener(name, function)`` for each function form declared from now on (``ampcore`` exports it)."""
    _listeners.append(listener)


globals().update(TORCH_FUNCTIONS)
declare.on_declare(_declared)  # the declared ops' function forms: those declared so far, and any later one
