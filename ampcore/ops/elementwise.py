"""Elementwise ops: casts, unary math, binary math with broadcasting, comparisons, where.

Binary ops follow torch's type rules: two tensors promote to their common
dtype; a Python scalar is "weak" and takes the tensor's dtype (a float scalar
with an integer tensor gives float32).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes as dt
from ..dispatch import call, primitive, register_op, route
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


# --------------------------------------------------------------------------- unary
class Unary(Op):
    """A unary op whose derivative is a function of (k, x, y, g); ``saves`` names which of x and y
    backward reads, so only those are kept alive (an activation's memory is AMP's business)."""

    same_dtype = True

    def __init__(self, name: str, grad: Callable[..., Any] | None, saves: str = ""):
        self.name = name
        self._grad = grad
        self.differentiable = grad is not None
        self._save_x, self._save_y = "x" in saves, "y" in saves

    def forward(self, ctx: Context, k: KernelTable, x: Any) -> Any:
        y = getattr(k, self.name)(x)
        ctx.x = x if self._save_x else None
        ctx.y = y if self._save_y else None
        return y

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        if self._grad is None:  # not differentiable, so never recorded; Op's own message, should it be called
            raise NotImplementedError(f"op {self.name!r} has no backward rule")
        return (self._grad(k, ctx.x, ctx.y, g),)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

UNARY_OPS: dict[str, Unary] = {
    op.name: op
    for op in [
        Unary("neg", lambda k, x, y, g: k.neg(g)),
        Unary("abs", lambda k, x, y, g: k.mul(g, k.sign(x)), "x"),
        Unary("exp", lambda k, x, y, g: k.mul(g, y), "y"),
        Unary("log", lambda k, x, y, g: k.div(g, x), "x"),
        Unary("sqrt", lambda k, x, y, g: k.div(g, k.mul(y, 2.0)), "y"),
        Unary("rsqrt", lambda k, x, y, g: k.mul(g, k.mul(k.mul(y, k.mul(y, y)), -0.5)), "y"),
        Unary("tanh", lambda k, x, y, g: k.mul(g, k.sub(1.0, k.mul(y, y))), "y"),
        Unary("sigmoid", lambda k, x, y, g: k.mul(g, k.mul(y, k.sub(1.0, y))), "y"),
        Unary("erf", lambda k, x, y, g: k.mul(g, k.mul(k.exp(k.neg(k.mul(x, x))), _TWO_OVER_SQRT_PI)), "x"),
        Unary("sin", lambda k, x, y, g: k.mul(g, k.cos(x)), "x"),
        Unary("cos", lambda k, x, y, g: k.neg(k.mul(g, k.sin(x))), "x"),
        Unary("sign", None),
    ]
}


class Relu(Op):
    """max(x, 0) with torch's gradient rule (zero at 0): two passes backward instead of max's tie split."""

    name = "relu"
    same_dtype = True

    def forward(self, ctx: Context, k: KernelTable, x: Any) -> Any:
        y = k.maximum(x, 0.0 if k.dtype_of(x).is_floating_point else 0)
        ctx.y = y
        return y

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        return (k.where(k.gt(ctx.y, 0.0), g, 0.0),)


RELU = Relu()


@primitive("relu")
def relu(x: Any) -> Any:
    """Rectified linear unit."""
    return call(RELU, x)


def unary(name: str, x: Any) -> Any:
    """Apply the unary op ``name``; integer inputs of float-only ops become float32."""
    if STATE.plain and x.dtype.is_floating_point:  # the exact common case: no hook can fire, no cast needed
        return call(UNARY_OPS[name], x)
    return route(name, _unary, (name, x), {})


def _unary(name: str, x: Any) -> Any:
    if name == "neg" and x.dtype == dt.bool_:
        raise TypeError("negation (-) of a bool tensor is not supported; invert a mask with ~ instead")
    if not x.dtype.is_floating_point and name not in ("neg", "abs", "sign"):
        x = cast(x, dt.float32)
    return call(UNARY_OPS[name], x)


# --------------------------------------------------------------------------- binary
def _grad_pow_base(k: KernelTable, a: Any, b: Any, y: Any, g: Any) -> Any:
    return k.mul(g, k.mul(b, k.pow(a, k.sub(b, 1.0) if not isinstance(b, Scalar) else b - 1.0)))


def _grad_pow_exp(k: KernelTable, a: Any, b: Any, y: Any, g: Any) -> Any:
    # d(a**b)/db = a**b * log(a); define it as 0 where a == 0 (torch does the same for b > 0).
    if isinstance(a, Scalar):
        return k.mul(g, k.mul(y, math.log(a))) if a != 0 else k.mul(g, 0.0)
    return k.mul(g, k.where(k.eq(a, 0.0), 0.0, k.mul(y, k.log(a))))


def _tie_split(k: KernelTable, a: Any, b: Any, g: Any, win: Callable[[Any, Any], Any]) -> Any:
    """Gradient to ``a`` of max/min: all of it where ``a`` wins, half on ties (as torch)."""
    return k.where(win(a, b), g, k.where(k.eq(a, b), k.mul(g, 0.5), 0.0))


# name -> (gradient to a, gradient to b, what each of them reads among a, b and y)
_BINARY_GRADS: dict[str, tuple[Callable[..., Any], Callable[..., Any], str, str]] = {
    "add": (lambda k, a, b, y, g: g, lambda k, a, b, y, g: g, "", ""),
    "sub": (lambda k, a, b, y, g: g, lambda k, a, b, y, g: k.neg(g), "", ""),
    "mul": (lambda k, a, b, y, g: k.mul(g, b), lambda k, a, b, y, g: k.mul(g, a), "b", "a"),
    "div": (lambda k, a, b, y, g: k.div(g, b), lambda k, a, b, y, g: k.neg(k.div(k.mul(g, y), b)), "b", "by"),
    "pow": (_grad_pow_base, _grad_pow_exp, "ab", "aby"),
    "maximum": (
        lambda k, a, b, y, g: _tie_split(k, a, b, g, k.gt),
        lambda k, a, b, y, g: _tie_split(k, b, a, g, k.gt),
        "ab",
        "ab",
    ),
    "minimum": (
        lambda k, a, b, y, g: _tie_split(k, a, b, g, k.lt),
        lambda k, a, b, y, g: _tie_split(k, b, a, g, k.lt),
        "ab",
        "ab",
    ),
}


def _shape(k: Any, v: Any) -> tuple[int, ...]:
    return () if isinstance(v, Scalar) else k.shape_of(v)


class Binary(Op):
    """A broadcasting binary op; either operand may be a Python scalar constant.

    Only what the needed gradients read is kept for backward (add and sub
    keep nothing; ``x * mask`` keeps just the mask when only x needs a
    gradient), so a bias add does not hold its input and output alive.
    """

    same_dtype = True

    def __init__(self, name: str):
        self.name = name
        self._ga, self._gb, reads_a, reads_b = _BINARY_GRADS[name]
        self._reads = (reads_a, reads_b)

    def forward(self, ctx: Context, k: KernelTable, a: Any, b: Any) -> Any:
        y = getattr(k, self.name)(a, b)
        needs = ctx.needs_input_grad
        if not (needs[0] or needs[1]):
            return y  # nothing will run backward: nothing to save
        reads = "".join(r for r, needed in zip(self._reads, needs) if needed)
        ctx.a, ctx.b, ctx.y = (
            (a if "a" in reads else None),
            (b if "b" in reads else None),
            (y if "y" in reads else None),
        )
        ctx.shapes = (_shape(k, a), _shape(k, b))
        return y

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        a, b, y = ctx.a, ctx.b, ctx.y
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = unbroadcast(k, self._ga(k, a, b, y, g), ctx.shapes[0])
        if ctx.needs_input_grad[1]:
            gb = unbroadcast(k, self._gb(k, a, b, y, g), ctx.shapes[1])
        return ga, gb


BINARY_OPS: dict[str, Binary] = {name: Binary(name) for name in _BINARY_GRADS}


class Compare(Op):
    differentiable = False

    def __init__(self, name: str):
        self.name = name

    def forward(self, ctx: Context, k: KernelTable, a: Any, b: Any) -> Any:
        return getattr(k, self.name)(a, b)


COMPARE_OPS: dict[str, Compare] = {n: Compare(n) for n in ("eq", "ne", "lt", "le", "gt", "ge")}


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape, or ValueError showing every shape."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"shapes {' and '.join(map(str, shapes))} cannot be broadcast together") from None


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


# Reflected operators torch's cast policy lists under their own names (``1 / x`` runs in float32 on CUDA).
REFLECTED_OP_NAMES = {"div": "__rtruediv__", "pow": "__rpow__"}


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
            if b.dtype is dtype and b.shape == a.shape and (dtype.is_floating_point or name != "div"):
                return call(BINARY_OPS[name], a, b)
        elif type(b) is float and dtype.is_floating_point:
            return call(BINARY_OPS[name], a, b)
    op_name = REFLECTED_OP_NAMES.get(name, name) if reflected else name
    return route(op_name, _binary, (name, a, b), {})


def _binary(name: str, a: Any, b: Any) -> Any:
    a, b = _operands(a, b, float_result=(name == "div"))
    return call(BINARY_OPS[name], a, b)


def compare(name: str, a: Any, b: Any) -> Any:
    """Elementwise comparison -> bool Tensor."""
    return route(name, _compare, (name, a, b), {})


def _compare(name: str, a: Any, b: Any) -> Any:
    a, b = _operands(a, b)
    return call(COMPARE_OPS[name], a, b)


# --------------------------------------------------------------------------- where
class Where(Op):
    name = "where"

    def forward(self, ctx: Context, k: KernelTable, cond: Any, a: Any, b: Any) -> Any:
        ctx.cond, ctx.sa, ctx.sb = (
            cond,
            k.shape_of(a) if not isinstance(a, Scalar) else (),
            k.shape_of(b) if not isinstance(b, Scalar) else (),
        )
        return k.where(cond, a, b)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        ga = unbroadcast(k, k.where(ctx.cond, g, 0.0), ctx.sa) if ctx.needs_input_grad[1] else None
        gb = unbroadcast(k, k.where(ctx.cond, 0.0, g), ctx.sb) if ctx.needs_input_grad[2] else None
        return None, ga, gb


WHERE = Where()


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
    return call(WHERE, cond, a, b)


for _name in [*UNARY_OPS, *BINARY_OPS, *REFLECTED_OP_NAMES.values(), *COMPARE_OPS]:
    register_op(_name, "primitive")
