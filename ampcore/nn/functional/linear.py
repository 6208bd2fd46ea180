"""Matrix products: matmul, mm, bmm, linear, addmm, baddbmm."""

from __future__ import annotations

from typing import Any

from ...dispatch import composite
from ...ops import broadcast_shapes, matmul
from ...ops.linalg import matmul_nt
from ...tensor import Tensor
from ._utils import check_tensor

__all__ = ["matmul", "mm", "bmm", "linear", "addmm", "baddbmm"]


@composite("mm")
def mm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
    """(n, k) @ (k, m) -> (n, m). Raises ValueError unless both are 2-D with matching inner sizes."""
    _check_ndim("mm", (input, mat2), 2)
    return matmul(input, mat2)


@composite("bmm")
def bmm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    """(b, n, k) @ (b, k, m) -> (b, n, m), no broadcasting. Raises ValueError on other shapes."""
    _check_ndim("bmm", (input, mat2), 3)
    if input.shape[0] != mat2.shape[0]:
        raise ValueError(f"bmm() batch sizes differ: shapes {input.shape} and {mat2.shape}")
    return matmul(input, mat2)


@composite("linear")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    """x @ weight.T + bias, for ``weight`` of shape (out_features, in_features) (or (in_features,)).

    Raises ValueError if the last dimension of ``input`` is not ``in_features``.
    """
    check_tensor(input, "input", "linear")
    check_tensor(weight, "weight", "linear")
    if weight.ndim not in (1, 2) or input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        raise ValueError(
            f"linear(): input of shape {input.shape} does not fit weight of shape {weight.shape}; "
            "expected input (..., in_features) and weight (out_features, in_features)"
        )
    out = matmul_nt(input, weight) if weight.ndim == 2 else matmul(input, weight)
    return out if bias is None else out + bias


@composite("addmm")
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:  # noqa: A002
    """beta * input + alpha * (mat1 @ mat2); ``input`` broadcasts. With beta=0, ``input`` is ignored (NaN too)."""
    _check_ndim("addmm", (mat1, mat2), 2)
    return _scaled_sum("addmm", input, matmul(mat1, mat2), beta, alpha)


@composite("baddbmm")
def baddbmm(
    input: Tensor,  # noqa: A002 - torch's argument name
    batch1: Tensor,
    batch2: Tensor,
    *,
    beta: float = 1,
    alpha: float = 1,
) -> Tensor:
    """beta * input + alpha * bmm(batch1, batch2); ``input`` broadcasts."""
    _check_ndim("baddbmm", (batch1, batch2), 3)
    if batch1.shape[0] != batch2.shape[0]:
        raise ValueError(f"baddbmm() batch sizes differ: shapes {batch1.shape} and {batch2.shape}")
    return _scaled_sum("baddbmm", input, matmul(batch1, batch2), beta, alpha)


def _check_ndim(op: str, tensors: tuple[Any, ...], ndim: int) -> None:
    for name, t in zip(("first", "second"), tensors):
        check_tensor(t, f"{name} matrix", op)
    if any(t.ndim != ndim for t in tensors):
        shapes = " and ".join(str(t.shape) for t in tensors)
        raise ValueError(f"{op}() needs {ndim}-D tensors, got shapes {shapes}")


def _scaled_sum(op: str, input: Tensor, product: Tensor, beta: float, alpha: float) -> Tensor:  # noqa: A002
    check_tensor(input, "input", op)
    if broadcast_shapes(input.shape, product.shape) != product.shape:
        raise ValueError(
            f"{op}(): input of shape {input.shape} cannot be broadcast to the product's shape {product.shape}"
        )
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product  # torch ignores input entirely for beta == 0, so its NaN/inf do not leak through
    return product + (input if beta == 1 else input * beta)
