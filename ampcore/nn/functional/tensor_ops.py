"""Multi-input tensor ops from torch's autocast lists: addcmul, addcdiv, dot, tensordot, bilinear.

addcmul/addcdiv promote their operands as torch does (and compute
float16/bfloat16 in float32, rounding once).  dot, tensordot and bilinear
are matrix products: like torch they refuse operands of different dtypes
(autocast promotes them first) and accumulate in float32 or better.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import dtypes as dt
from ...dispatch import composite
from ...ops import elementwise as ew
from ...ops import matmul
from ...ops.declare import Example, Input
from ...ops.declare import composite as declared
from ...tensor import Tensor
from ._utils import check_float, check_tensor, opmath

__all__ = ["addcmul", "addcdiv", "dot", "tensordot", "bilinear"]


@composite("addcmul")
def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:  # noqa: A002
    """input + value * tensor1 * tensor2, broadcast, in the three tensors' promoted dtype.

    Raises TypeError for a float ``value`` with integer tensors (torch
    documents value must then be an int, and would silently truncate it).
    """
    out = _promoted("addcmul", input, tensor1, tensor2, value)
    a, b, c = (ew.cast(t, _compute(out)) for t in (input, tensor1, tensor2))
    return ew.cast(a + (b if value == 1 else b * value) * c, out)


@composite("addcdiv")
def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:  # noqa: A002
    """input + value * tensor1 / tensor2, broadcast, in the three tensors' promoted dtype.

    Raises TypeError when tensor1 and tensor2 are both integers: torch removed
    addcdiv's integer division (cast one to a float dtype for true division).
    """
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        check_tensor(t, name, "addcdiv")
    if not tensor1.dtype.is_floating_point and not tensor2.dtype.is_floating_point:
        raise TypeError(
            f"addcdiv(): integer division of tensor1 ({tensor1.dtype.name}) by tensor2 "
            f"({tensor2.dtype.name}) is not supported; convert one to a floating dtype with .float()"
        )
    out = _promoted("addcdiv", input, tensor1, tensor2, value)
    a, b, c = (ew.cast(t, _compute(out)) for t in (input, tensor1, tensor2))
    return ew.cast(a + (b if value == 1 else b * value) / c, out)


@declared(
    "dot",
    signature="dot(input, other) -> Tensor",
    example=Example((Input((16,)), Input((16,))), rule="sum", n=16),
    reference=np.dot,
)
def dot(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """Inner product of two 1-D tensors of one length and one dtype, as a 0-d tensor.

    Floating vectors accumulate in float32 or better; integer vectors are
    summed exactly in their dtype.  Raises ValueError for other shapes,
    TypeError for differing dtypes (torch does not promote here).
    """
    check_tensor(input, "input", "dot")
    check_tensor(other, "other", "dot")
    if input.ndim != 1 or other.ndim != 1:
        raise ValueError(
            f"dot() needs 1-D tensors, got shapes {input.shape} and {other.shape}; use matmul or "
            "tensordot for more dimensions"
        )
    if input.shape != other.shape:
        raise ValueError(
            f"dot(): the vectors have {input.shape[0]} and {other.shape[0]} elements; they need the same length"
        )
    _same_dtype("dot", input, other)
    if input.dtype.is_floating_point:
        return matmul(input, other)
    return ew.cast((input * other).sum(), input.dtype)


@declared(
    "tensordot",
    variants=("function",),
    signature="tensordot(a, b, dims=2) -> Tensor",
    example=Example((Input((2, 3, 4)), Input((3, 4, 5))), {"dims": 2}, rule="sum", n=12, n_grad=(5, 2)),
    reference=lambda a, b, dims: np.tensordot(a, b, dims),
)
def tensordot(a: Tensor, b: Tensor, dims: int | Sequence[Sequence[int]] = 2) -> Tensor:
    """Sum of products over paired dimensions: the last ``dims`` of ``a`` with the first ``dims`` of ``b``,
    or ``dims=(dims_a, dims_b)`` for two lists of dimensions to pair up.

    The result has a's free dimensions, then b's.  As in torch, a paired
    dimension of size 1 broadcasts against the other (it is summed first).
    Raises ValueError for bad ``dims`` or mismatched sizes, IndexError for a
    dimension out of range, TypeError for differing dtypes or a ``dims`` of another type.
    """
    check_tensor(a, "a", "tensordot")
    check_tensor(b, "b", "tensordot")
    _same_dtype("tensordot", a, b)
    dims_a, dims_b = _tensordot_dims(a, b, dims)
    for i, j in zip(dims_a, dims_b):
        n, m = a.shape[i], b.shape[j]
        if m == 1 and n != 1:
            a = a.sum(i, keepdim=True)
        elif n == 1 and m != 1:
            b = b.sum(j, keepdim=True)
        elif n != m:
            raise ValueError(
                f"tensordot(): contracted dimensions need matching sizes, but a has size {n} in dim "
                f"{i} and b has size {m} in dim {j}"
            )
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    k = _prod(a.shape[d] for d in dims_a)
    left = a.permute(free_a + dims_a).reshape(_prod(a.shape[d] for d in free_a), k)
    right = b.permute(dims_b + free_b).reshape(k, _prod(b.shape[d] for d in free_b))
    if a.dtype.is_floating_point:
        out = matmul(left, right)
    else:
        out = ew.cast((left.unsqueeze(2) * right.unsqueeze(0)).sum(1), a.dtype)
    return out.reshape(tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b))


@composite("bilinear")
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o].

    input1 (*, in1) and input2 (*, in2) have the same batch dimensions (no
    broadcasting), weight is (out, in1, in2) and bias (out,); all share a
    dtype, as torch requires.  float16/bfloat16 are computed in float32 and
    rounded once.  Raises ValueError for mis-shaped operands, TypeError for
    non-float or differing dtypes.
    """
    check_float(input1, "input1", "bilinear")
    tensors = [("input2", input2), ("weight", weight)] + ([("bias", bias)] if bias is not None else [])
    for name, t in tensors:
        check_tensor(t, name, "bilinear")
    if any(t.dtype != input1.dtype for _, t in tensors):
        got = ", ".join(f"{name}: {t.dtype.name}" for name, t in [("input1", input1)] + tensors)
        raise TypeError(f"bilinear() needs all tensors in one dtype, got {got}")
    if weight.ndim != 3:
        raise ValueError(
            f"bilinear(): weight must be 3-D (out_features, in1_features, in2_features), got shape {weight.shape}"
        )
    if input1.ndim == 0 or input1.ndim != input2.ndim:
        raise ValueError(
            f"bilinear(): inputs need the same number (>= 1) of dimensions, got shapes "
            f"{input1.shape} and {input2.shape}"
        )
    if input1.shape[:-1] != input2.shape[:-1]:
        raise ValueError(
            f"bilinear(): input batch dimensions do not match: shapes {input1.shape} and "
            f"{input2.shape} (they do not broadcast)"
        )
    n_out, n1, n2 = weight.shape
    for name, x, n in (("input1", input1, n1), ("input2", input2, n2)):
        if x.shape[-1] != n:
            raise ValueError(
                f"bilinear(): {name} of shape {x.shape} does not fit weight of shape {weight.shape}; "
                f"its last dimension must be {n}"
            )
    if bias is not None and bias.shape != (n_out,):
        raise ValueError(
            f"bilinear(): bias of shape {bias.shape} does not fit weight of shape {weight.shape}; expected ({n_out},)"
        )
    batch = input1.shape[:-1]
    rows = _prod(batch)
    x1, x2, w = opmath(input1).reshape(rows, n1), opmath(input2).reshape(rows, n2, 1), opmath(weight)
    # (rows, n1) @ (n1, out * n2) -> x1 A_o for every o, then a batched product with x2.
    partial = matmul(x1, w.permute(1, 0, 2).reshape(n1, n_out * n2)).reshape(rows, n_out, n2)
    out = matmul(partial, x2).reshape(batch + (n_out,))
    if bias is not None:
        out = out + opmath(bias)
    return ew.cast(out, input1.dtype)


# --------------------------------------------------------------------------- helpers
def _promoted(op: str, input: Tensor, tensor1: Tensor, tensor2: Tensor, value: Any) -> dt.DType:  # noqa: A002
    """The result dtype of addcmul/addcdiv; TypeError for bool results or a float value with integer tensors."""
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        check_tensor(t, name, op)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}(): value must be a number, got {value!r}")
    out = dt.result_type(input.dtype, tensor1.dtype, tensor2.dtype)
    if out == dt.bool_:
        raise TypeError(f"{op}() does not support bool tensors; convert them with .int() or .float()")
    if not out.is_floating_point and isinstance(value, float):
        raise TypeError(f"{op}(): value must be an int for {out.name} tensors, got {value!r}")
    return out


def _compute(out: dt.DType) -> dt.DType:
    return dt.float32 if out in dt.LOW_PRECISION_DTYPES else out


def _same_dtype(op: str, a: Tensor, b: Tensor) -> None:
    if a.dtype != b.dtype:
        raise TypeError(
            f"{op}() needs both tensors in one dtype, got {a.dtype.name} and {b.dtype.name}; "
            "convert one with .to(dtype)"
        )
    if a.dtype == dt.bool_:
        raise TypeError(f"{op}() does not support bool tensors; convert them with .int() or .float()")


def _tensordot_dims(a: Tensor, b: Tensor, dims: Any) -> tuple[list[int], list[int]]:
    """``dims`` as two equally long lists of non-negative, distinct dimensions of a and b."""
    if isinstance(dims, int) and not isinstance(dims, bool):
        if dims < 0:
            raise ValueError(f"tensordot(): dims must be >= 0, got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise ValueError(
                f"tensordot(): dims={dims} is more than the dimensions of a (shape {a.shape}) or b (shape {b.shape})"
            )
        return list(range(a.ndim - dims, a.ndim)), list(range(dims))
    if not (isinstance(dims, (tuple, list)) and len(dims) == 2 and all(isinstance(d, (tuple, list)) for d in dims)):
        raise TypeError(
            f"tensordot(): dims must be an int or a pair of sequences of ints (dims_a, dims_b), got {dims!r}"
        )
    if len(dims[0]) != len(dims[1]):
        raise ValueError(f"tensordot(): dims_a and dims_b must have the same length, got {dims!r}")
    return _dim_list(dims[0], a, "a"), _dim_list(dims[1], b, "b")


def _dim_list(dims: Sequence[Any], t: Tensor, name: str) -> list[int]:
    out: list[int] = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"tensordot(): dimensions must be ints, got {d!r} in dims for {name}")
        if not -t.ndim <= d < t.ndim:
            raise IndexError(f"tensordot(): dimension {d} is out of range for {name} of shape {t.shape}")
        if d % t.ndim in out:
            raise ValueError(f"tensordot(): dimension {d} of {name} appears more than once in {list(dims)}")
        out.append(d % t.ndim)
    return out


def _prod(values: Any) -> int:
    n = 1
    for v in values:
        n *= v
    return n
