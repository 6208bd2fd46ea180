"""What an op is: a forward and a backward rule written against the kernel table.

``forward(ctx, k, *arrays, **params)`` gets backend arrays and the backend's
:class:`~ampcore.kernels.KernelTable` ``k`` and returns one array; it may save
anything on ``ctx``.  ``backward(ctx, k, grad)`` returns one gradient array (or
None) per array input.  Ops are stateless singletons; the op name is what the
cast policy, traces and error messages use.
"""

from __future__ import annotations

from typing import Any


class Op:
    """Base class of ops with a backward rule."""

    name: str = ""
    differentiable: bool = True
    same_dtype: bool = False  # the output has the first tensor input's dtype (checked on every call)

    def forward(self, ctx: Any, k: Any, *arrays: Any, **params: Any) -> Any:
        raise NotImplementedError

    def backward(self, ctx: Any, k: Any, grad: Any) -> tuple[Any, ...]:
        raise NotImplementedError(f"op {self.name!r} has no backward rule")

    def __repr__(self) -> str:
        return f"<op {self.name}>"


def unbroadcast(k: Any, grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``grad`` over the axes broadcasting added or stretched, back to ``shape``."""
    gshape = k.shape_of(grad)
    if gshape == shape:
        return grad
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and gshape[lead + i] != 1)
    return k.reshape(k.sum(grad, axes, True), shape)
