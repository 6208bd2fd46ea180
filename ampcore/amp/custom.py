"""Autocast for user code: custom ops, and custom autograd Functions (``custom_fwd`` / ``custom_bwd``).

- ``@ampcore.op("my_op", category="fp32")`` makes a Tensor-level function an
  op boundary autocast routes (and traces) like a built-in op; the category
  is registered for every device type's policy.
- ``custom_fwd`` / ``custom_bwd`` decorate a :class:`ampcore.autograd.Function`'s
  forward and backward, as torch.amp's do: with ``cast_inputs`` the forward
  runs with autocast off on inputs cast to that dtype; the backward runs
  under the autocast state the forward saw.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .. import dtypes as dt
from ..dispatch import op_boundary, register_op, registered_ops
from ..dtypes import DType
from ..policy import Category, register
from ..policy.dtype_policy import cast_tree
from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled

__all__ = ["op", "custom_fwd", "custom_bwd"]

F = TypeVar("F", bound=Callable[..., Any])


def op(name: str, category: Category | str | None = None) -> Callable[[F], F]:
    """Decorator: register a Tensor-level function as the op ``name`` (optionally with a policy category)."""
    kind = registered_ops().get(name)
    if kind is not None and kind != "custom":
        raise ValueError(f"op name {name!r} is taken by a built-in {kind} op; choose another name")
    register_op(name, "custom")
    if category is not None:
        register(name, category)
    return op_boundary(name, "custom")  # type: ignore[return-value]


def _check_device_type(device_type: Any, decorator: str) -> str:
    if not isinstance(device_type, str):
        raise TypeError(
            f"{decorator}() needs device_type= as a backend name such as 'cpu' or 'cuda', got {device_type!r}"
        )
    return device_type


def _cast(value: Any, device_type: str, dtype: DType) -> Any:
    """Floating (not float64) tensors on ``device_type`` in ``value`` (nested) cast to ``dtype``."""
    return cast_tree(value, dtype, lambda t: t.dtype != dt.float64 and t.device.type == device_type)


def custom_fwd(fwd: F | None = None, *, device_type: str, cast_inputs: DType | str | None = None) -> Any:
    """Decorate a custom Function's ``forward``.

    Without ``cast_inputs`` the forward runs under the caller's autocast
    state (ops inside are autocast as usual).  With it, inside an enabled
    region the forward runs with autocast off and its floating inputs cast
    to ``cast_inputs``; outside a region ``cast_inputs`` does nothing.
    """
    _check_device_type(device_type, "custom_fwd")
    target = dt.as_dtype(cast_inputs) if cast_inputs is not None else None
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        ctx._autocast_dtype = get_autocast_dtype(device_type)
        enabled = is_autocast_enabled(device_type)
        if target is None or not enabled:
            ctx._fwd_used_autocast = enabled
            return fwd(ctx, *args, **kwargs)
        ctx._fwd_used_autocast = False
        with autocast(device_type, enabled=False):
            return fwd(ctx, *_cast(args, device_type, target), **_cast(kwargs, device_type, target))

    return decorate_fwd


def custom_bwd(bwd: F | None = None, *, device_type: str) -> Any:
    """Decorate a custom Function's ``backward``: it runs under the autocast state its forward ran under."""
    _check_device_type(device_type, "custom_bwd")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        used = getattr(ctx, "_fwd_used_autocast", None)
        if used is None:
            raise RuntimeError(
                "custom_bwd: the forward of this Function was not decorated with "
                "custom_fwd(device_type=...); decorate both"
            )
        with autocast(device_type, enabled=used, dtype=ctx._autocast_dtype):
            return bwd(ctx, *args, **kwargs)

    return decorate_bwd
