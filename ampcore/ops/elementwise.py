"""Elementwise ops: casts, and the op and entry points of every declared elementwise op (the declarations
are in :mod:`ampcore.ops.decls`: math, arithmetic, comparisons, where, relu).

Binary ops follow torch's type rules: two tensors promote to their common
dtype; a Python scalar is "weak" and takes the tensor's dtype (a float scalar
with an integer tensor gives float32).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes as dt
from ..dispatch import call, primitive, route
from ..dtypes import DType
from ..hooks import STATE
from ..plugins.capabilities import check_storable
from ..tensor_base import TensorBase
from .base import Op, unbroadcast

if TYPE_CHECKING:
    from ..autograd import Context
    from ..kernels import KernelTable

Scalar = (int, float, bool, np.number)


# --------------------------------------------------------------------------- cast
class Cast(Op):
    name = "cast"

    def forward(self, ctx: Context, k: KernelTable, x: Any, *, dtype: DType, src: DType | None = None) -> Any:
        ctx.src = src if src is not None else k.dtype_of(x)  # the caller knows the input's dtype: no lookup
        return k.cast(x, dtype)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        return (k.cast(g, ctx.src) if ctx.src.is_floating_point else None,)


CAST = Cast()


def cast(x: Any, dtype: DType) -> Any:
    """``x`` converted to ``dtype``; gradients flow back in ``x``'s dtype. No-op if already there."""
    if type(dtype) is not DType:
        dtype = dt.as_dtype(dtype)
    if x.dtype is dtype:  # DTypes are interned: identity is equality
        return x
    check_storable(x._backend, x.device.index, dtype)
    return call(CAST, x, dtype=dtype, src=x.dtype)


# --------------------------------------------------------------------------- declared elementwise ops
def _shape(k: Any, v: Any) -> tuple[int, ...]:
    return () if isinstance(v, Scalar) else k.shape_of(v)


class Elementwise(Op):
    """The op of an elementwise declaration (:mod:`ampcore.ops.declare`): its kernel is the backend's kernel of
    the same name (the program of that name, rendered by the backend, or the backend's own override).

    Only what the needed gradients read is kept for backward (add and sub keep
    nothing; ``x * mask`` keeps just the mask when only x needs a gradient), so
    a bias add does not hold its input and output alive.
    """

    def __init__(
        self,
        name: str,
        grads: tuple[Callable[..., Any] | None, ...],
        reads: tuple[str, ...],
        same_dtype: bool,
        float_only: bool,
    ):
        self.name = name
        self._grads = grads
        self._reads = reads
        self._letters = "x" if len(grads) == 1 else "abcdefgh"[: len(grads)]
        self.differentiable = any(g is not None for g in grads)
        self.same_dtype = same_dtype
        self.float_only = float_only

    def forward(self, ctx: Context, k: KernelTable, *arrays: Any) -> Any:
        y = getattr(k, self.name)(*arrays)
        needs = ctx.needs_input_grad
        if True not in needs or not self.differentiable:
            return y  # nothing will run backward: nothing to save
        reads = "".join(r for r, needed in zip(self._reads, needs) if needed)
        ctx.saved = tuple(a if letter in reads else None for a, letter in zip(arrays, self._letters))
        ctx.y = y if "y" in reads else None
        ctx.shapes = tuple(_shape(k, a) for a in arrays)
        return y

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        out: list[Any] = []
        for grad, needed, shape in zip(self._grads, ctx.needs_input_grad, ctx.shapes):
            out.append(unbroadcast(k, grad(k, *ctx.saved, ctx.y, g), shape) if needed and grad is not None else None)
        return tuple(out)


class UnaryElementwise(Elementwise):
    """An elementwise op of one operand: its gradient has the operand's shape already (no broadcast to undo),
    and only the operand or the output it reads is kept."""

    def forward(self, ctx: Context, k: KernelTable, x: Any) -> Any:
        y = getattr(k, self.name)(x)
        if ctx.needs_input_grad[0] and self.differentiable:
            reads = self._reads[0]
            ctx.saved = (x if "x" in reads else None,)
            ctx.y = y if "y" in reads else None
        return y

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        grad = self._grads[0]
        assert grad is not None  # a differentiable op has its rule: only those record a node
        return (grad(k, ctx.saved[0], ctx.y, g),)


# The ops of every elementwise declaration, by name (ampcore.ops.declare fills it).
OPS: dict[str, Elementwise] = {}
# Reflected operators torch's cast policy lists under their own names (``1 / x`` runs in float32 on CUDA).
REFLECTED_OP_NAMES: dict[str, str] = {}


def add_op(
    name: str,
    grads: tuple[Callable[..., Any] | None, ...],
    reads: tuple[str, ...],
    *,
    same_dtype: bool,
    float_only: bool,
) -> Elementwise:
    """The op of a newly declared elementwise op (called by :mod:`ampcore.ops.declare`)."""
    kind = UnaryElementwise if len(grads) == 1 else Elementwise
    op = OPS[name] = kind(name, grads, reads, same_dtype, float_only)
    return op


def unary(name: str, x: Any) -> Any:
    """Apply the one-operand op ``name``; integer inputs of float-only ops become float32."""
    if STATE.plain and isinstance(x, TensorBase) and x.dtype.is_floating_point:
        return call(OPS[name], x)  # the exact common case: no hook can fire, no cast needed
    return route(name, _unary, (name, x), {})


def _unary(name: str, x: Any) -> Any:
    if not isinstance(x, TensorBase):
        raise TypeError(f"{name}(): input must be a Tensor, got {type(x).__name__}")
    op = OPS[name]
    if name == "neg" and x.dtype == dt.bool_:
        raise TypeError("negation (-) of a bool tensor is not supported; invert a mask with ~ instead")
    if op.float_only and not x.dtype.is_floating_point:
        x = cast(x, dt.float32)
    return call(op, x)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape, or ValueError showing every shape."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"shapes {' and '.join(map(str, shapes))} cannot be broadcast together") from None


def _promote(args: tuple[Any, ...], float_result: bool) -> list[Any]:
    """Promote operands (Tensors or Python numbers, at least one Tensor) to one dtype, torch-style: tensors
    to their common dtype, numbers weakly (a float with integer tensors gives float32)."""
    Tensor = TensorBase  # noqa: N806 - reads as the type it checks for
    tensors = [v for v in args if isinstance(v, Tensor)]
    if not tensors:
        raise TypeError(f"at least one operand must be a Tensor, got {', '.join(type(v).__name__ for v in args)}")
    for v in args:
        if not isinstance(v, (Tensor,) + Scalar):
            raise TypeError(f"unsupported operand {v!r}: expected a Tensor or a Python number")
    broadcast_shapes(*(t.shape for t in tensors))
    target = dt.result_type(*(t.dtype for t in tensors))
    scalars = [v for v in args if not isinstance(v, Tensor)]
    if not target.is_floating_point and any(isinstance(s, (float, np.floating)) for s in scalars):
        target = dt.float32
    if float_result and not target.is_floating_point:
        target = dt.float32
    return [cast(v, target) if isinstance(v, Tensor) else (float(v) if target.is_floating_point else v) for v in args]


def _operands(a: Any, b: Any, float_result: bool = False) -> tuple[Any, Any]:
    """Promote two operands (Tensors or scalars) to a common dtype, torch-style."""
    Tensor = TensorBase  # noqa: N806 - reads as the type it checks for
    a_t, b_t = isinstance(a, Tensor), isinstance(b, Tensor)
    if not a_t and not b_t:
        raise TypeError(f"at least one operand must be a Tensor, got {type(a).__name__} and {type(b).__name__}")
    for v in (a, b):
        if not isinstance(v, (Tensor,) + Scalar):
            raise TypeError(f"unsupported operand {v!r}: expected a Tensor or a Python number")
    if a_t and b_t:
        broadcast_shapes(a.shape, b.shape)
        target = dt.promote_types(a.dtype, b.dtype)
    else:
        t, s = (a, b) if a_t else (b, a)
        target = t.dtype
        if isinstance(s, (float, np.floating)) and not target.is_floating_point:
            target = dt.float32
        elif isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) and target == dt.bool_:
            target = dt.int64
    if float_result and not target.is_floating_point:
        target = dt.float32
    conv = lambda v: cast(v, target) if isinstance(v, Tensor) else (float(v) if target.is_floating_point else v)  # noqa: E731
    return conv(a), conv(b)


def binary(name: str, a: Any, b: Any, *, reflected: bool = False) -> Any:
    """Apply the binary op ``name`` to Tensors and/or Python scalars.

    ``reflected`` marks ``other <op> tensor`` calls (``__rtruediv__``), which
    the cast policy may treat differently from the forward operator.
    """
    if STATE.plain and isinstance(a, TensorBase):
        # The exact common case, straight to the kernel: no autocast region or overflow watch open, and
        # operands that need no promotion (one dtype and shape; or a float scalar with a float tensor).
        dtype = a.dtype
        if isinstance(b, TensorBase):
            if b.dtype is dtype and b.shape == a.shape and (dtype.is_floating_point or not OPS[name].float_only):
                return call(OPS[name], a, b)
        elif type(b) is float and dtype.is_floating_point:
            return call(OPS[name], a, b)
    op_name = REFLECTED_OP_NAMES.get(name, name) if reflected else name
    return route(op_name, _binary, (name, a, b), {})


def _binary(name: str, a: Any, b: Any) -> Any:
    op = OPS[name]
    a, b = _operands(a, b, float_result=op.float_only)
    return call(op, a, b)


def compare(name: str, a: Any, b: Any) -> Any:
    """Elementwise comparison -> bool Tensor."""
    return route(name, _compare, (name, a, b), {})


def _compare(name: str, a: Any, b: Any) -> Any:
    a, b = _operands(a, b)
    return call(OPS[name], a, b)


def nary(name: str, *args: Any) -> Any:
    """Apply the op ``name`` of three or more operands (Tensors or Python numbers), promoted to one dtype."""
    return route(name, _nary, (name, *args), {})


def _nary(name: str, *args: Any) -> Any:
    op = OPS[name]
    return call(op, *_promote(args, op.float_only))


# --------------------------------------------------------------------------- where, relu
@primitive("where")
def where(cond: Any, a: Any, b: Any) -> Any:
    """``a`` where ``cond`` is true, else ``b`` (broadcasting; scalars allowed for ``a``/``b``)."""
    Tensor = TensorBase  # noqa: N806 - reads as the type it checks for
    if not isinstance(cond, Tensor) or cond.dtype != dt.bool_:
        raise TypeError(f"where() needs a bool Tensor condition, got {cond!r}")
    if not isinstance(a, Tensor) and not isinstance(b, Tensor) and isinstance(a, Scalar):
        a = cond._new_tensor(a)  # two scalars: torch's default dtypes (float32 / int64)
    a, b = _operands(a, b)
    shapes = [cond.shape] + [v.shape for v in (a, b) if isinstance(v, Tensor)]
    broadcast_shapes(*shapes)
    return call(OPS["where"], cond, a, b)


def relu(x: Any) -> Any:
    """max(x, 0): the gradient at 0 is 0 and NaN propagates, as in torch (the declared op ``relu``)."""
    return unary("relu", x)
