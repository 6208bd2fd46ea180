"""The spine of every op call: device check, autocast, kernel, graph record.

``call(op, *tensors, **params)`` is the only way ops reach a backend.  The
autocast step (casting inputs per the cast policy) is filled in by
:mod:`ampcore.autocast`; everything else lives here.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .autograd import Context, Node, is_grad_enabled

if TYPE_CHECKING:
    from .ops.base import Op
    from .tensor import Tensor

__all__ = ["call", "common_device", "composite", "registered_ops", "KernelError"]

# Every op name users can call, -> "primitive" or "composite"; the cast policy
# must have a decision for each (see ampcore.policy).
_OPS: dict[str, str] = {}

# Set by ampcore.autocast: called as hook(name, fn, args, kwargs) at each
# composite-op boundary; None while autocast is not loaded.
autocast_hook: Callable[..., Any] | None = None


def registered_ops() -> dict[str, str]:
    """Op name -> kind, for every op the dispatcher knows."""
    return dict(_OPS)


def composite(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a Tensor-level function built from primitives as the op ``name``.

    The boundary is where autocast decides the op's dtype; the primitives
    inside run on whatever the boundary handed them.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        _OPS[name] = "composite"

        @functools.wraps(fn)
        def op(*args: Any, **kwargs: Any) -> Any:
            hook = autocast_hook
            if hook is None:
                return fn(*args, **kwargs)
            return hook(name, fn, args, kwargs)

        op.op_name = name  # type: ignore[attr-defined]
        return op

    return decorate


class KernelError(RuntimeError):
    """A backend kernel raised; names the op and the backend, chained to the original error."""

    def __init__(self, op: str, backend: str, error: BaseException):
        self.op = op
        self.backend = backend
        super().__init__(f"op {op!r} failed on backend {backend!r}: {type(error).__name__}: {error}")


def common_device(tensors: Sequence["Tensor"]) -> Any:
    """The one device all ``tensors`` are on; ValueError naming both if they differ."""
    first = tensors[0]
    for t in tensors[1:]:
        if t.device != first.device:
            raise ValueError(
                f"tensors on different devices ({str(first.device)!r} and {str(t.device)!r}) cannot be combined; "
                "move one with .to(device)"
            )
    return first


def call(op: "Op", *inputs: Any, **params: Any) -> "Tensor":
    """Run ``op`` on ``inputs`` (Tensors on one device, or Python scalar constants)
    and record it for autograd."""
    from .tensor import Tensor

    tensors = [t for t in inputs if isinstance(t, Tensor)]
    anchor = common_device(tensors)
    backend = anchor._backend
    ctx = Context()
    ctx.needs_input_grad = tuple(isinstance(t, Tensor) and t.requires_grad for t in inputs)
    ctx.device_index = anchor.device.index
    arrays = [t._data if isinstance(t, Tensor) else t for t in inputs]
    try:
        out = op.forward(ctx, backend.kernels, *arrays, **params)
    except (ValueError, TypeError, IndexError, KernelError):
        raise
    except Exception as exc:
        raise KernelError(op.name, backend.name, exc) from exc
    needs_grad = op.differentiable and is_grad_enabled() and any(ctx.needs_input_grad)
    node = Node(op, ctx, [t if isinstance(t, Tensor) else None for t in inputs]) if needs_grad else None
    return Tensor._wrap(out, anchor.device, backend, grad_fn=node)
