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
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .autograd import Context, Node, is_grad_enabled
from .kernels import KernelError

if TYPE_CHECKING:
    from .ops.base import Op
    from .tensor import Tensor

__all__ = ["call", "common_device", "composite", "primitive", "op_boundary", "route", "register_op", "registered_ops", "is_registered",
           "KernelError", "GuardedKernels", "guarded_kernels"]

# Every op name users can call -> its kind: "primitive", "composite", "in-place" or "custom".
# The cast policy must have a decision for each (see ampcore.policy).
_OPS: dict[str, str] = {}

# Set by ampcore.amp: called as hook(name, fn, args, kwargs, ineligible) at op boundaries.
autocast_hook: Callable[..., Any] | None = None

# Autocast regions open on any thread; while 0 a boundary costs one global read.
_open_regions = 0
_regions_lock = threading.Lock()

# Set by ampcore.amp: called as hook(op, phase, inputs, outputs) after every primitive (and backward step)
# while a detect_overflow() region is open on any thread (_watching > 0).
overflow_hook: Callable[..., Any] | None = None
_watching = 0
_boundaries = threading.local()


def watching_changed(delta: int) -> None:
    """Count detect_overflow() regions entered (+1) and left (-1), across threads."""
    global _watching
    with _regions_lock:
        _watching += delta


def boundary_stack() -> tuple[str, ...]:
    """The op boundaries this thread is inside, outermost first (tracked while overflow detection is on)."""
    return tuple(getattr(_boundaries, "names", ()))


def region_opened(delta: int) -> None:
    """Count autocast regions entered (+1) and left (-1), across threads."""
    global _open_regions
    with _regions_lock:
        _open_regions += delta


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


def route(name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
          ineligible: str | None = None) -> Any:
    """Run the op ``name`` (body ``fn``) through autocast and ``out=`` handling.

    ``ineligible`` names why this call must not be autocast (in-place, explicit
    dtype); ``out=`` is handled here for every op: the result is computed
    without autocast and written into ``out``.
    """
    out = kwargs.pop("out", None) if "out" in kwargs else None
    if out is not None:
        ineligible = "out="
    # Pop exactly what was pushed: another thread may open or close a watch while this op runs.
    names = _boundaries.__dict__.setdefault("names", []) if _watching else None
    if names is not None:
        names.append(name)
    try:
        hook = autocast_hook
        if hook is None or not _open_regions:
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

        @functools.wraps(fn)
        def op(*args: Any, **kwargs: Any) -> Any:
            if not _open_regions and not kwargs and not _watching:
                return fn(*args)
            return route(name, fn, args, kwargs, eligibility.reason(args, kwargs))

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
    from .tensor import Tensor

    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): out= must be a Tensor, got {type(out).__name__}")
    if not isinstance(result, Tensor):
        raise TypeError(f"{name}() does not support out=: it returns {type(result).__name__}")
    if is_grad_enabled() and (result.requires_grad or out.requires_grad):
        raise RuntimeError(f"{name}(): out= does not support automatic differentiation, but an argument requires "
                           "grad; call it without out= or under ampcore.no_grad()")
    if out.device != result.device:
        raise ValueError(f"{name}(): out= is on {str(out.device)!r} but the result is on {str(result.device)!r}")
    if out.shape != result.shape:
        raise ValueError(f"{name}(): out= has shape {out.shape} but the result has shape {result.shape}; "
                         "pass an out tensor of the result's shape")
    lossy_kind = (result.dtype.is_floating_point and not out.dtype.is_floating_point) or \
        (result.dtype.name != "bool" and out.dtype.name == "bool")
    if lossy_kind:
        raise TypeError(f"{name}(): result type {result.dtype.name} can't be cast to the out= dtype "
                        f"{out.dtype.name}; pass an out tensor of a wider kind")
    out._data = out._backend.kernels.cast(result._data, out.dtype)
    return out


# Errors a kernel may raise about its inputs; anything else is the backend failing, wrapped in KernelError.
_INPUT_ERRORS = (ValueError, TypeError, IndexError, KernelError)


class GuardedKernels:
    """A backend's kernel table whose kernels raise :class:`KernelError` naming the op, phase and kernel.

    For code that calls kernels directly rather than through :func:`call`:
    backward rules, optimizer steps, the loss scaler.
    """

    __slots__ = ("_kernels", "_backend", "_op", "_phase")

    def __init__(self, kernels: Any, backend: str, op: str, phase: str | None = None):
        self._kernels, self._backend, self._op, self._phase = kernels, backend, op, phase

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._kernels, name)
        if name in ("has", "provider", "names", "shape_of", "dtype_of", "missing_primitives"):
            return fn

        def kernel(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except KernelError as exc:
                raise exc.named(self._op, self._phase) from exc.error
            except _INPUT_ERRORS:
                raise
            except Exception as exc:
                raise KernelError(self._op, self._backend, exc, kernel=name, phase=self._phase) from exc

        return kernel


def guarded_kernels(backend: Any, op: str, phase: str | None = None) -> GuardedKernels:
    """``backend``'s kernels, raising KernelError that names ``op`` (and ``phase``) when one fails."""
    return GuardedKernels(backend.kernels, backend.name, op, phase)


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
    except KernelError as exc:
        raise exc.named(op.name) from exc.error
    except _INPUT_ERRORS:
        raise
    except Exception as exc:
        raise KernelError(op.name, backend.name, exc) from exc
    needs_grad = op.differentiable and is_grad_enabled() and any(ctx.needs_input_grad)
    node = Node(op, ctx, [t if isinstance(t, Tensor) else None for t in inputs], keep_all=bool(_watching)) \
        if needs_grad else None
    result = Tensor._wrap(out, anchor.device, backend, grad_fn=node)
    if _watching and overflow_hook is not None:
        if node is not None:
            node.within = boundary_stack()  # for naming the composite its backward belongs to
        overflow_hook(op.name, "forward", tensors, [result])
    return result
