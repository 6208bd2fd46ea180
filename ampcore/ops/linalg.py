"""Matrix products: batched matmul with broadcasting and float32 accumulation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import dtypes as dt
from ..dispatch import call, primitive
from .base import Op, unbroadcast
from .elementwise import broadcast_shapes
from .shape import TRANSPOSE

if TYPE_CHECKING:
    from ..autograd import Context
    from ..kernels import KernelTable


class DtypeMismatchError(RuntimeError, TypeError):
    """Matrix-product operands of different dtypes (torch raises RuntimeError; a TypeError too, for callers
    that catch dtype errors as TypeError)."""


def _check_same_dtype(op: str, a: Any, b: Any) -> None:
    if a.dtype is b.dtype or a.dtype == b.dtype:
        return
    hint = (
        " (autocast leaves float64 inputs alone, as torch does: cast them to float32 to autocast them)"
        if dt.float64 in (a.dtype, b.dtype)
        else ""
    )
    raise DtypeMismatchError(
        f"{op}(): expected both operands to have the same dtype, got {a.dtype.name} and {b.dtype.name}; "
        f"cast one with .to(){hint}"
    )


class MatMul(Op):
    name = "matmul"

    def forward(self, ctx: Context, k: KernelTable, a: Any, b: Any, *, b_transposed: bool = False) -> Any:
        # Keep only what the needed gradients read: a's gradient reads b, b's reads a. A first layer
        # fed by data needs no gradient to its input, so autocast's low-precision weight copy is dropped.
        a_needs, b_needs = ctx.needs_input_grad
        ctx.a, ctx.b, ctx.b_transposed = (a if b_needs else None), (b if a_needs else None), b_transposed
        if a_needs or b_needs:  # the shapes the gradients are unbroadcast to (nothing to keep for a plain call)
            ctx.a_shape, ctx.b_shape = k.shape_of(a), k.shape_of(b)
        return k.matmul(a, b)

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        a, b = ctx.a, ctx.b
        ga = unbroadcast(k, k.matmul(g, _swap_last(k, b)), ctx.a_shape) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:
            if ctx.b_transposed:
                # b is w.T (x @ w.T, as in linear): compute (g.T @ a).T, so the transpose back to w gives
                # w's gradient in w's own layout; a.T @ g would hand the optimizer a transposed view.
                gb = _swap_last(k, k.matmul(_swap_last(k, g), a))
            else:
                gb = unbroadcast(k, k.matmul(_swap_last(k, a), g), ctx.b_shape)
        return ga, gb


class MatMulNT(Op):
    """``a @ w.T`` for a 2-D ``w``, linear's product, keeping ``w`` itself for backward.

    On a backend whose transpose copies (OpenCL), recording ``matmul(a, w.mT)``
    kept a transposed copy of every weight alive until backward and
    transposed it back there; here the copy lives only for the forward
    product, and backward multiplies by ``w`` directly.
    """

    name = "matmul"

    def forward(self, ctx: Context, k: KernelTable, a: Any, w: Any) -> Any:
        a_needs, w_needs = ctx.needs_input_grad
        ctx.a, ctx.w = (a if w_needs else None), (w if a_needs else None)
        return k.matmul(a, k.transpose(w, (1, 0)))

    def backward(self, ctx: Context, k: KernelTable, g: Any) -> tuple[Any, ...]:
        ga = k.matmul(g, ctx.w) if ctx.needs_input_grad[0] else None
        gw = None
        if ctx.needs_input_grad[1]:
            # Every leading dimension of a is a batch dimension summed into w's gradient, computed in w's layout.
            n, f = k.shape_of(g)[-1], k.shape_of(ctx.a)[-1]
            gw = k.matmul(k.transpose(k.reshape(g, (-1, n)), (1, 0)), k.reshape(ctx.a, (-1, f)))
        return ga, gw


def _swap_last(k: Any, m: Any) -> Any:
    nd = len(k.shape_of(m))
    return k.transpose(m, tuple(range(nd - 2)) + (nd - 1, nd - 2))


MATMUL = MatMul()
MATMUL_NT = MatMulNT()


@primitive("matmul")
def matmul(a: Any, b: Any) -> Any:
    """torch.matmul semantics: 1-D operands are promoted to matrices and the extra dimension removed."""
    a_shape, b_shape = a.shape, b.shape
    if (
        len(a_shape) == 2
        and len(b_shape) == 2
        and a_shape[1] == b_shape[0]
        and a.dtype is b.dtype
        and a.dtype.is_floating_point
    ):
        # The common case, exactly as below: two matrices of one floating dtype (no promotion, no
        # batch, no reshape of the result).
        grad_fn = b.grad_fn
        return call(MATMUL, a, b, b_transposed=grad_fn is not None and grad_fn.op is TRANSPOSE)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul needs operands with at least 1 dimension, got shapes {a.shape} and {b.shape}")
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a
    b2 = b.reshape(b.shape[0], 1) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(
            f"matmul shapes {a.shape} and {b.shape} do not match: "
            f"{a2.shape[-1]} (last of the first) != {b2.shape[-2]} (second-to-last of the second)"
        )
    try:
        batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul batch dimensions of shapes {a.shape} and {b.shape} cannot be broadcast") from None
    if not a.dtype.is_floating_point or not b.dtype.is_floating_point:
        raise TypeError(f"matmul needs floating tensors, got {a.dtype.name} and {b.dtype.name}")
    _check_same_dtype("matmul", a, b)
    b_transposed = a2.ndim == 2 and b2.ndim == 2 and b2.grad_fn is not None and b2.grad_fn.op is TRANSPOSE
    out = call(MATMUL, a2, b2, b_transposed=b_transposed)
    shape = batch + ((a2.shape[-2],) if a.ndim > 1 else ()) + ((b2.shape[-1],) if b.ndim > 1 else ())
    return out.reshape(shape)


@primitive("matmul")
def matmul_nt(a: Any, w: Any) -> Any:
    """``a @ w.T`` for ``a`` of shape (..., in) and a 2-D ``w`` of shape (out, in): linear's product.

    The same values as ``matmul(a, w.mT)``, recorded without keeping ``w.mT``
    (see :class:`MatMulNT`).
    """
    if a.ndim == 0 or w.ndim != 2 or a.shape[-1] != w.shape[1]:
        raise ValueError(f"matmul_nt needs a (..., k) and a 2-D (n, k) operand, got shapes {a.shape} and {w.shape}")
    if not a.dtype.is_floating_point or not w.dtype.is_floating_point:
        raise TypeError(f"matmul needs floating tensors, got {a.dtype.name} and {w.dtype.name}")
    _check_same_dtype("matmul", a, w)
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a
    out = call(MATMUL_NT, a2, w)
    return out.reshape(a.shape[:-1] + (w.shape[0],))
