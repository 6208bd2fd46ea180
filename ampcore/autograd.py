"""Reverse-mode autograd: grad mode, graph nodes and the backward engine.

Every differentiable op call records a :class:`Node` holding the op, what the
op saved in its context, and the input tensors.  ``backward()`` walks the
nodes in reverse topological order, calling each op's backward rule (written
against the backend's kernels) and accumulating into leaf ``.grad``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .hooks import STATE
from .kernels import KernelError, KernelGate
from .names import missing_names_getattr as _missing_names_getattr
from .tensor_base import TensorBase, wrap


class OpRule(Protocol):
    """What the engine needs of an op: its name and its backward rule over backend arrays."""

    name: str

    def backward(self, ctx: Any, k: Any, grad: Any) -> tuple[Any, ...]: ...


__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "inference_mode",
    "Node",
    "Context",
    "run_backward",
    "zero_grads",
    "Function",
    "FunctionCtx",
    "saved_bytes",
    "queue_callback",
    "Variable",
]


class _GradMode(threading.local):
    """Per-thread grad mode and backward-callback stack.

    Every thread starts with its own defaults (``__init__`` runs once per thread), so reading ``enabled``
    is a plain attribute load: ``getattr(local, "enabled", True)`` on a thread that never set it raised and
    caught an AttributeError inside, about 5,000 instructions on every recorded op.
    """

    def __init__(self) -> None:
        self.enabled = True
        self.callbacks: list[list[Any]] = []


# Read by the op path (``grad_mode.enabled``) without a call; set only through the context managers below.
grad_mode = _GradMode()


def is_grad_enabled() -> bool:
    """Whether op calls on this thread record the graph."""
    return grad_mode.enabled


class set_grad_enabled:  # noqa: N801 - torch's name; used like a function (with ..., @...)
    """Context manager (and decorator) that sets grad mode for a block on this thread."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._prev: list[bool] = []

    def __enter__(self) -> None:
        self._prev.append(is_grad_enabled())
        grad_mode.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        grad_mode.enabled = self._prev.pop()

    def __call__(self, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(self.mode):
                return fn(*args, **kwargs)

        return wrapper


class no_grad(set_grad_enabled):  # noqa: N801 - torch's name; used like a function
    """Disable graph recording in a block (``with ampcore.no_grad(): ...``) or a decorated function."""

    def __init__(self) -> None:
        super().__init__(False)


class enable_grad(set_grad_enabled):  # noqa: N801 - torch's name; used like a function
    """Re-enable graph recording inside a ``no_grad`` block."""

    def __init__(self) -> None:
        super().__init__(True)


class inference_mode(set_grad_enabled):  # noqa: N801 - torch's name
    """torch.inference_mode(mode=True): no graph is recorded in the block (or decorated function), as under
    :class:`no_grad`; ``mode=False`` leaves grad mode as it is.  Also usable bare, ``@ampcore.inference_mode``.

    ampcore has no separate "inference tensors": what is made inside may later be used with autograd
    (torch raises then), so code written for torch runs unchanged.
    """

    def __new__(cls, mode: Any = True) -> Any:
        if callable(mode) and not isinstance(mode, bool):  # @inference_mode without parentheses
            return cls(True)(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        self.inference = bool(mode)
        super().__init__(False)

    def __enter__(self) -> None:
        self._prev.append(is_grad_enabled())
        if self.inference:
            grad_mode.enabled = False

    def __call__(self, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(self.inference):
                return fn(*args, **kwargs)

        return wrapper


class Context:
    """What an op's forward saves for its backward (attributes set freely)."""

    __slots__ = ("__dict__",)

    # Set by dispatch.call before the op's forward runs.
    needs_input_grad: tuple[bool, ...]
    device_index: int

    if TYPE_CHECKING:
        # Each op's forward saves its own attributes for its backward: to the type checker, any name is Any.
        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...


class Node:
    """One recorded op call: the op, its saved context, and its inputs.

    Each input's ``grad_fn`` is snapshotted when the node is recorded, so an
    in-place op that later rebases a tensor's history (``relu_``-style) does
    not reroute the gradients of ops that consumed the tensor before it.

    ``inputs`` keeps only the leaves that take a gradient: an intermediate
    tensor is reached through its ``grad_fn``, and holding it would keep every
    activation alive until backward whether the op saved it or not (torch's
    graph keeps only what ops save).  Under ``detect_overflow`` every input is
    kept (``keep_all``), so a backward step can report the forward values it
    consumed.
    """

    __slots__ = ("op", "ctx", "inputs", "input_fns", "freed", "within", "__weakref__")

    def __init__(self, op: OpRule, ctx: Context, inputs: Sequence[TensorBase | None], keep_all: bool = False):
        self.op = op
        self.ctx = ctx
        # One loop, not two comprehensions: each comprehension is a function call of its own (Python 3.11).
        fns: list[Any] = []
        kept: list[TensorBase | None] = []
        for t in inputs:
            if t is None:
                fns.append(None)
                kept.append(None)
                continue
            fn = t.grad_fn
            fns.append(fn)
            kept.append(t if keep_all or (fn is None and t.requires_grad) else None)
        self.input_fns = tuple(fns)
        self.inputs = tuple(kept)
        self.freed = False
        self.within: tuple[str, ...] = ()  # enclosing op boundaries, recorded while detecting overflow

    def name(self) -> str:
        return f"{self.op.name}Backward"

    def __repr__(self) -> str:
        return f"<{self.name()}>"


# What a node holds once backward freed its saved values (never written to).
_FREED = Context()


def _topological_order(root: Node) -> list[Node]:
    """Nodes reachable from ``root``, each after every node that feeds it a gradient."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for fn in node.input_fns:
            if fn is not None and id(fn) not in seen:
                stack.append((fn, False))
    order.reverse()
    return order


def run_backward(root: TensorBase, grad: Any, retain_graph: bool = False) -> None:
    """Propagate ``grad`` (a backend array shaped like ``root``) to every leaf that requires grad."""
    if root.grad_fn is None:
        _accumulate_leaf(root, grad)
        return
    callbacks: list[Any] = []
    stack = grad_mode.callbacks
    stack.append(callbacks)
    try:
        _run_nodes(root, grad, retain_graph, root._backend.kernels)
    finally:
        stack.pop()
    if callbacks:
        with no_grad():
            for fn in callbacks:
                fn()


def queue_callback(fn: Any) -> None:
    """Run ``fn()`` once the backward pass now running on this thread has finished (torch's
    ``queue_callback``): DistributedDataParallel reduces gradients there.  RuntimeError outside backward."""
    stack = grad_mode.callbacks
    if not stack:
        raise RuntimeError("queue_callback() can only be called during backward(), from a backward function")
    stack[-1].append(fn)


def _run_nodes(root: TensorBase, grad: Any, retain_graph: bool, k: Any) -> None:
    # The kernel table gates every kernel (a backend failure is a KernelError naming the kernel); the
    # engine names the op whose backward called it.
    pending: dict[int, Any] = {id(root.grad_fn): grad}
    with no_grad():
        for node in _topological_order(root.grad_fn):
            g = pending.pop(id(node), None)
            if g is None:
                continue
            if node.freed:
                raise RuntimeError(
                    f"trying to backward through {node.name()} a second time; its saved values were freed. "
                    "Pass retain_graph=True to the first backward() if you need to backward twice"
                )
            try:
                input_grads = node.op.backward(node.ctx, k, g)
            except KernelError as exc:
                raise exc.named(node.op.name, "backward") from exc.error
            if STATE.watching and STATE.overflow_hook is not None:
                _check_backward(root, node, g, input_grads)
            if not retain_graph:
                node.ctx = _FREED
                node.freed = True
            for t, fn, gi in zip(node.inputs, node.input_fns, input_grads):
                if gi is None:
                    continue
                if fn is not None:
                    key = id(fn)
                    pending[key] = gi if key not in pending else _add(k, pending[key], gi)
                elif t is not None and t.requires_grad:
                    _accumulate_leaf(t, gi)


def _check_backward(root: TensorBase, node: Node, g: Any, input_grads: Sequence[Any]) -> None:
    """Hand a backward step's incoming and outgoing gradients to overflow detection, as Tensors."""
    as_tensor = lambda a: wrap(a, root.device, root._backend)  # noqa: E731 - local adapter
    outs = [as_tensor(gi) for gi in input_grads if gi is not None]
    # The forward inputs count as inputs too: a backward fed NaN saved values did not start the overflow.
    # (Only inputs recorded under detect_overflow are kept, see Node.)
    ins = [as_tensor(g), *(t for t in node.inputs if t is not None)]
    hook = STATE.overflow_hook
    if hook is not None:  # checked by the caller; read once, another thread may uninstall it
        hook(node.op.name, "backward", ins, outs, node.within)


def _add(k: Any, a: Any, b: Any) -> Any:
    """Two gradients for one node summed (a failure names gradient accumulation)."""
    try:
        return k.add(a, b)
    except KernelError as exc:
        raise exc.named("backward", "gradient accumulation") from exc.error


def _accumulate_leaf(leaf: TensorBase, g: Any) -> None:
    k = leaf._backend.kernels
    try:
        if leaf.grad is None:
            # cast always copies: each leaf owns its .grad, since the scaler and
            # fused optimizers may update gradients in place.
            leaf.grad = wrap(k.cast(g, leaf.dtype), leaf.device, leaf._backend)
        else:
            if leaf._backend.dtype_of(g) != leaf.dtype:
                g = k.cast(g, leaf.dtype)
            leaf.grad = wrap(k.add(leaf.grad._data, g), leaf.device, leaf._backend)
    except KernelError as exc:
        raise exc.named("backward", "gradient accumulation") from exc.error


def zero_grads(params: Any, set_to_none: bool = True) -> None:
    """Reset each tensor's ``.grad``: to None, or to zeros in the same grad tensor object."""
    for p in params:
        g = p.grad
        if g is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            g.grad_fn = None
            g.requires_grad = False
            g._data = KernelGate.of(g._backend, "zero_grad").full(g.shape, 0.0, g.dtype, g.device.index)


class FunctionCtx:
    """The ``ctx`` a custom :class:`Function`'s forward and backward share."""

    def __init__(self, needs_input_grad: tuple[bool, ...]):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors: tuple[Any, ...] = ()

    if TYPE_CHECKING:
        # forward keeps whatever else backward needs on ctx (``ctx.scale = s``), as in torch.
        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep tensors for backward (read them back as ``ctx.saved_tensors``)."""
        self.saved_tensors = tensors


class _FunctionOp:
    """Adapts a Function subclass to the Node interface the backward engine walks."""

    differentiable = True

    def __init__(self, fn_cls: type[Function], positions: tuple[int, ...], n_args: int):
        self.fn_cls = fn_cls
        self.name = fn_cls.__name__
        self.positions = positions  # where the tensor inputs were among forward's arguments
        self.n_args = n_args

    def backward(self, ctx: Any, k: Any, g: Any) -> tuple[Any, ...]:
        grads = self.fn_cls.backward(ctx.fn_ctx, wrap(g, ctx.device, ctx.backend))
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) != self.n_args:
            raise RuntimeError(
                f"{self.name}.backward returned {len(grads)} gradients, but forward took "
                f"{self.n_args} arguments; return one per argument (None for non-tensors)"
            )
        out: list[Any] = []
        for pos, inp in zip(self.positions, ctx.inputs):
            gi = grads[pos]
            if gi is None:
                out.append(None)
                continue
            if not isinstance(gi, TensorBase) or gi.shape != inp.shape:
                got = gi.shape if isinstance(gi, TensorBase) else type(gi).__name__
                raise RuntimeError(
                    f"{self.name}.backward returned a gradient of {got} for argument {pos}, which has shape {inp.shape}"
                )
            # As torch: a gradient in another float dtype is cast to its input's dtype.
            out.append(gi._data if gi.dtype == inp.dtype else k.cast(gi._data, inp.dtype))
        return tuple(out)


class Function:
    """A user-defined differentiable op: subclass with static ``forward(ctx, *args)`` and
    ``backward(ctx, grad)``, call with ``MyFn.apply(*args)``.

    ``forward`` runs without graph recording and returns one Tensor;
    ``backward`` returns one gradient per forward argument (None where there
    is none).  Decorate them with ``ampcore.amp.custom_fwd`` /
    ``custom_bwd`` to control autocast inside.
    """

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("subclasses of Function implement forward(ctx, *args)")

    @staticmethod
    def backward(ctx: FunctionCtx, grad: Any) -> Any:
        raise NotImplementedError("subclasses of Function implement backward(ctx, grad)")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, TensorBase))
        fn_ctx = FunctionCtx(tuple(isinstance(a, TensorBase) and a.requires_grad for a in args))
        with no_grad():
            out = cls.forward(fn_ctx, *args, **kwargs)
        if not isinstance(out, TensorBase):
            raise TypeError(f"{cls.__name__}.forward must return one Tensor, got {type(out).__name__}")
        if not (is_grad_enabled() and any(fn_ctx.needs_input_grad)):
            return out
        ctx = Context()
        ctx.fn_ctx, ctx.device, ctx.backend = fn_ctx, out.device, out._backend
        inputs = [args[i] for i in positions]
        ctx.inputs = inputs
        node = Node(_FunctionOp(cls, positions, len(args)), ctx, inputs)
        return wrap(out._data, out.device, out._backend, grad_fn=node)


def saved_bytes(root: TensorBase, exclude: Iterable[TensorBase] = ()) -> int:
    """Bytes of the distinct device buffers the graph behind ``root`` keeps for its backward.

    What autocast's smaller activations save: every array an op stored in
    its context, each buffer counted once (a view counts as the array it
    views), leaving out the buffers of ``exclude`` (pass the parameters: they
    exist whether or not a graph does).  Leaf inputs a node keeps only to
    route gradients are not counted.  0 when ``root`` has no graph.
    """
    backend = root._backend
    array_type = type(root._data)
    excluded = {id(_owner(t._data)) for t in exclude}
    owners: dict[int, Any] = {}
    seen: set[int] = set()
    stack = [root.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for value in vars(node.ctx).values():
            if isinstance(value, FunctionCtx):  # a custom Function's save_for_backward
                value = [getattr(t, "_data", None) for t in value.saved_tensors]
            for item in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(item, array_type):
                    owner = _owner(item)
                    if id(owner) not in excluded:
                        owners[id(owner)] = owner
        stack.extend(node.input_fns)
    return sum(backend.nbytes(a) for a in owners.values())


def _owner(array: Any) -> Any:
    """The array whose memory ``array`` views (NumPy-style ``.base``), or ``array`` itself."""
    base = getattr(array, "base", None)
    while base is not None and type(base) is type(array):
        array, base = base, getattr(base, "base", None)
    return array


class _VariableMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, TensorBase)  # as in torch, every tensor is a Variable


class Variable(metaclass=_VariableMeta):
    """torch's legacy ``autograd.Variable(data, requires_grad=False)``: a tensor is its own Variable now.

    It returns ``data.detach()`` (the same values, no history) with ``requires_grad`` set, as torch's does;
    ``volatile`` is accepted and ignored (use ``no_grad()``); ``isinstance(t, Variable)`` holds for any tensor.
    """

    def __new__(cls, data: Any, requires_grad: bool = False, volatile: bool = False) -> Any:
        if not isinstance(data, TensorBase):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()  # type: ignore[attr-defined]
        return out.requires_grad_(requires_grad)


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
