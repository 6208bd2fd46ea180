"""The spine of every op call: op boundaries, device check, kernel, graph record.

Every user-facing op (``F.linear``, ``x.exp()``, ``x @ w``) is an *op
boundary* with a name.  While an autocast region is open the boundary hands
the call to the autocast router (:mod:`ampcore.amp.routing`), which casts the
inputs per the cast policy and runs the body with routing suspended, so the
ops a composite is built from run on whatever its boundary decided (as
torch's autocast excludes itself below an op).  ``call(op, *tensors)`` then
runs one primitive's kernel and records it for autograd.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from . import hooks
from .autograd import Context, Node, grad_mode, is_grad_enabled
from .hooks import STATE, boundary_names, boundary_stack, region_opened, watching_changed
from .kernels import INPUT_ERRORS, KernelError, KernelGate, KernelOutputError
from .tensor_base import TENSOR_CLASS, TensorBase

__all__ = [
    "call",
    "common_device",
    "composite",
    "primitive",
    "op_boundary",
    "route",
    "register_op",
    "registered_ops",
    "is_registered",
    "KernelError",
    "GuardedKernels",
    "guarded_kernels",
    "set_autocast_hook",
    "set_overflow_hook",
    "region_opened",
    "watching_changed",
    "boundary_stack",
]

# Every op name users can call -> its kind: "primitive", "composite", "in-place" or "custom".
# The cast policy must have a decision for each (see ampcore.policy).
_OPS: dict[str, str] = {}
_new_object = object.__new__

set_autocast_hook = hooks.set_autocast_hook
set_overflow_hook = hooks.set_overflow_hook


def registered_ops() -> dict[str, str]:
    """Op name -> kind, for every op the dispatcher knows."""
    return dict(_OPS)


def is_registered(name: str) -> bool:
    """Whether the dispatcher knows the op ``name`` (cheap: no copy)."""
    return name in _OPS


def register_op(name: str, kind: str = "custom") -> None:
    """Make ``name`` known to the dispatcher (and so to the cast policy)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"op name must be an identifier like 'my_op', got {name!r}")
    _OPS.setdefault(name, kind)


class _Eligibility:
    """Where an op's signature takes ``dtype=`` or ``inplace=``: calls that set them are not autocast."""

    __slots__ = ("dtype_pos", "inplace_pos")

    def __init__(self, fn: Callable[..., Any]):
        try:
            names = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            names = []
        self.dtype_pos = names.index("dtype") if "dtype" in names else None
        self.inplace_pos = names.index("inplace") if "inplace" in names else None

    def reason(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        if self.dtype_pos is not None and _given(args, kwargs, self.dtype_pos, "dtype") is not None:
            return "explicit dtype="
        if self.inplace_pos is not None and _given(args, kwargs, self.inplace_pos, "inplace"):
            return "in-place"
        return None


def _given(args: tuple[Any, ...], kwargs: dict[str, Any], pos: int, name: str) -> Any:
    return args[pos] if len(args) > pos else kwargs.get(name)


def route(
    name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], ineligible: str | None = None
) -> Any:
    """Run the op ``name`` (body ``fn``) through autocast and ``out=`` handling.

    ``ineligible`` names why this call must not be autocast (in-place, explicit
    dtype); ``out=`` is handled here for every op: the result is computed
    without autocast and written into ``out``.
    """
    out = kwargs.pop("out", None) if "out" in kwargs else None
    if out is not None:
        ineligible = "out="
    # Pop exactly what was pushed: another thread may open or close a watch while this op runs.
    names = boundary_names() if STATE.watching else None
    if names is not None:
        names.append(name)
    try:
        hook = STATE.autocast_hook
        if hook is None or not STATE.open_regions:
            result = fn(*args, **kwargs)
        else:
            result = hook(name, fn, args, kwargs, ineligible)
    finally:
        if names is not None:
            names.pop()
    return result if out is None else _write_out(name, out, result)


def op_boundary(name: str, kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: ``fn`` becomes the op ``name`` of ``kind``, routed through autocast and ``out=``."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        _OPS[name] = kind
        eligibility = _Eligibility(fn)
        # Most ops take neither dtype= nor inplace=: they skip the check (a call) on every routed call.
        checked = eligibility.dtype_pos is not None or eligibility.inplace_pos is not None
        reason = eligibility.reason if checked else None

        @functools.wraps(fn)
        def op(*args: Any, **kwargs: Any) -> Any:
            if STATE.plain and not kwargs:
                return fn(*args)
            return route(name, fn, args, kwargs, reason(args, kwargs) if reason is not None else None)

        op.op_name = name  # type: ignore[attr-defined]
        return op

    return decorate


def composite(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a Tensor-level function built from primitives as the op ``name``.

    The boundary is where autocast decides the op's dtype; the primitives
    inside run on whatever the boundary handed them.
    """
    return op_boundary(name, "composite")


def primitive(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark the Tensor-level function of a primitive op as the op ``name``."""
    return op_boundary(name, "primitive")


def _write_out(name: str, out: Any, result: Any) -> Any:
    """torch's ``out=``: the result written into ``out`` (same shape; a safe dtype cast)."""
    if not isinstance(out, TensorBase):
        raise TypeError(f"{name}(): out= must be a Tensor, got {type(out).__name__}")
    if not isinstance(result, TensorBase):
        raise TypeError(f"{name}() does not support out=: it returns {type(result).__name__}")
    if is_grad_enabled() and (result.requires_grad or out.requires_grad):
        raise RuntimeError(
            f"{name}(): out= does not support automatic differentiation, but an argument requires "
            "grad; call it without out= or under ampcore.no_grad()"
        )
    if out.device != result.device:
        raise ValueError(f"{name}(): out= is on {str(out.device)!r} but the result is on {str(result.device)!r}")
    if out.shape != result.shape:
        raise ValueError(
            f"{name}(): out= has shape {out.shape} but the result has shape {result.shape}; "
            "pass an out tensor of the result's shape"
        )
    lossy_kind = (result.dtype.is_floating_point and not out.dtype.is_floating_point) or (
        result.dtype.name != "bool" and out.dtype.name == "bool"
    )
    if lossy_kind:
        raise TypeError(
            f"{name}(): result type {result.dtype.name} can't be cast to the out= dtype "
            f"{out.dtype.name}; pass an out tensor of a wider kind"
        )
    out._data = guarded_kernels(out._backend, name).cast(result._data, out.dtype)
    return out


_INPUT_ERRORS = INPUT_ERRORS
GuardedKernels = KernelGate  # the name it had before the gate moved to ampcore.kernels


def guarded_kernels(backend: Any, op: str, phase: str | None = None) -> KernelGate:
    """``backend``'s kernels, raising KernelError that names ``op`` (and ``phase``) when one fails."""
    return KernelGate(backend.kernels, backend.name, op, phase, backend)


def common_device(tensors: Sequence[Any]) -> Any:
    """The one device all ``tensors`` are on; ValueError naming both if they differ."""
    first = tensors[0]
    for t in tensors[1:]:
        if t.device is not first.device and t.device != first.device:
            raise _device_mismatch(first, t)
    return first


def _device_mismatch(a: Any, b: Any) -> ValueError:
    return ValueError(
        f"tensors on different devices ({str(a.device)!r} and {str(b.device)!r}) cannot be combined; "
        "move one with .to(device)"
    )


def call(op: Any, *inputs: Any, **params: Any) -> Any:
    """Run ``op`` on ``inputs`` (Tensors on one device, or Python scalar constants) and record it for
    autograd when an input requires grad.

    The flat hot path: one pass over the inputs (device check, arrays, grad
    flags), the kernel through the gate, a cheap check of the result (an
    array of a dtype the backend knows; for elementwise ops, their inputs'
    dtype), the wrap, and a graph node only when a gradient is needed.
    """
    anchor = None
    wants_grad = False
    arrays = []
    for t in inputs:
        if isinstance(t, TensorBase):
            if anchor is None:
                anchor = t
            elif t.device is not anchor.device and t.device != anchor.device:
                raise _device_mismatch(anchor, t)
            if t.requires_grad:
                wants_grad = True
            arrays.append(t._data)
        else:
            arrays.append(t)
    if anchor is None:
        raise TypeError(f"op {op.name!r} needs at least one Tensor input")
    backend = anchor._backend
    ctx = Context()
    if wants_grad:  # one loop, no comprehensions: each is a function call of its own (Python 3.11)
        needs = []
        tensors: list[Any] = []
        for t in inputs:
            if isinstance(t, TensorBase):
                needs.append(t.requires_grad)
                tensors.append(t)
            else:
                needs.append(False)
                tensors.append(None)
        ctx.needs_input_grad = tuple(needs)
        record = op.differentiable and grad_mode.enabled
    else:
        ctx.needs_input_grad = (False,) * len(inputs)
        record = False
    ctx.device_index = anchor.device.index
    try:
        out = op.forward(ctx, backend.kernels, *arrays, **params)
    except KernelError as exc:
        raise exc.named(op.name) from exc.error
    except INPUT_ERRORS:
        raise
    except Exception as exc:
        raise KernelError(op.name, backend.name, exc) from exc
    # The cheap check (well under a microsecond); the full rules run under AMPCORE_DEBUG_KERNELS=1.
    try:
        dtype = backend.dtype_of(out)
    except Exception as exc:
        raise _not_an_array(op, backend, out) from exc
    if op.same_dtype and dtype is not anchor.dtype and dtype != anchor.dtype:
        raise _wrong_dtype(op, backend, dtype, anchor)
    watching = STATE.watching
    node = Node(op, ctx, tensors, bool(watching)) if record else None
    # TensorBase._wrap with the dtype already read, inlined: it is on every op call.
    result = _new_object(TENSOR_CLASS[0])
    result._data = out
    result._backend = backend
    result.device = anchor.device
    result.dtype = dtype
    result.shape = backend.shape_of(out)
    result.requires_grad = node is not None
    result.grad = None
    result.grad_fn = node
    if watching and STATE.overflow_hook is not None:
        if node is not None:
            node.within = boundary_stack()  # for naming the composite its backward belongs to
        STATE.overflow_hook(op.name, "forward", [t for t in inputs if isinstance(t, TensorBase)], [result])
    return result


def _not_an_array(op: Any, backend: Any, out: Any) -> KernelError:
    """The kernel of ``op`` returned something that is not an array of ``backend``."""
    error = KernelOutputError(f"returned {type(out).__name__}, not an array of backend {backend.name!r}")
    return KernelError(op.name, backend.name, error)


def _wrong_dtype(op: Any, backend: Any, dtype: Any, anchor: Any) -> KernelError:
    """The kernel of ``op``, whose output keeps its input's dtype (``same_dtype``), returned another."""
    error = KernelOutputError(
        f"returned {dtype.name} for {anchor.dtype.name} input; see the kernel contract in ampcore.kernels"
    )
    return KernelError(op.name, backend.name, error)
