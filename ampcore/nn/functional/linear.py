"""Matrix products: matmul, mm, bmm, mv, outer, linear, addmm, baddbmm, addbmm.

mm, bmm, mv, outer and the add-products are declared ops (:mod:`ampcore.ops.declare`): ``ampcore.mm``,
``Tensor.mm`` and the rest come from their declarations, and each Example is checked by the conformance suite.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dispatch import composite
from ...ops import broadcast_shapes, matmul
from ...ops.declare import Example, Input
from ...ops.declare import composite as declared
from ...ops.linalg import matmul_nt
from ...tensor import Tensor
from ._utils import check_tensor

__all__ = [
    "matmul",
    "mm",
    "bmm",
    "mv",
    "outer",
    "linear",
    "addmm",
    "baddbmm",
    "addbmm",
]  # F exports the torch.nn.functional ones


@declared(
    "mm",
    signature="mm(input, mat2) -> Tensor",
    example=Example((Input((3, 16)), Input((16, 5))), rule="sum", n=16, n_grad=(5, 3)),
    reference=np.matmul,
)
def mm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
    """(n, k) @ (k, m) -> (n, m). Raises ValueError unless both are 2-D with matching inner sizes."""
    _check_ndim("mm", (input, mat2), 2)
    return matmul(input, mat2)


@declared(
    "bmm",
    signature="bmm(input, mat2) -> Tensor",
    example=Example((Input((2, 3, 8)), Input((2, 8, 4))), rule="sum", n=8, n_grad=(4, 3)),
    reference=np.matmul,
)
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


@declared(
    "addmm",
    signature="addmm(input, mat1, mat2, *, beta=1, alpha=1) -> Tensor",
    example=Example((Input((5,)), Input((3, 8)), Input((8, 5))), rule="sum", n=9, n_grad=(3, 5, 3), roundings=1),
    reference=lambda c, a, b: c + a @ b,
)
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:  # noqa: A002
    """beta * input + alpha * (mat1 @ mat2); ``input`` broadcasts. With beta=0, ``input`` is ignored (NaN too)."""
    _check_ndim("addmm", (mat1, mat2), 2)
    return _scaled_sum("addmm", input, matmul(mat1, mat2), beta, alpha)


@declared(
    "baddbmm",
    signature="baddbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor",
    example=Example(
        (Input((2, 3, 5)), Input((2, 3, 4)), Input((2, 4, 5))), rule="sum", n=5, n_grad=(1, 5, 3), roundings=1
    ),
    reference=lambda c, a, b: c + a @ b,
)
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


@declared(
    "addbmm",
    signature="addbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor",
    example=Example(
        (Input((3, 5)), Input((2, 3, 4)), Input((2, 4, 5))), rule="sum", n=9, n_grad=(1, 5, 3), roundings=1
    ),
    reference=lambda c, a, b: c + np.einsum("bij,bjk->ik", a, b),
)
def addbmm(
    input: Tensor,  # noqa: A002 - torch's argument name
    batch1: Tensor,
    batch2: Tensor,
    *,
    beta: float = 1,
    alpha: float = 1,
) -> Tensor:
    """beta * input + alpha * sum over the batch of batch1[i] @ batch2[i] (torch.addbmm): one GEMM that contracts
    the batch with the inner dimension, (n, b*k) @ (b*k, m), so the whole sum accumulates in float32 or better
    and is rounded once."""
    _check_ndim("addbmm", (batch1, batch2), 3)
    b, n, k = batch1.shape
    if batch2.shape[:2] != (b, k):
        raise ValueError(f"addbmm(): batch shapes {batch1.shape} and {batch2.shape} do not chain")
    left = batch1.permute(1, 0, 2).reshape(n, b * k)
    product = matmul(left, batch2.reshape(b * k, batch2.shape[2]))
    return _scaled_sum("addbmm", input, product, beta, alpha)


@declared(
    "mv",
    signature="mv(input, vec) -> Tensor",
    example=Example((Input((4, 9)), Input((9,))), rule="sum", n=9, n_grad=(1, 4)),
    reference=np.matmul,
)
def mv(input: Tensor, vec: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
    """(n, m) @ (m,) -> (n,) (torch.mv). Raises ValueError for other shapes."""
    check_tensor(input, "input", "mv")
    check_tensor(vec, "vec", "mv")
    if input.ndim != 2 or vec.ndim != 1 or input.shape[1] != vec.shape[0]:
        raise ValueError(f"mv() needs a matrix (n, m) and a vector (m,), got shapes {input.shape} and {vec.shape}")
    return matmul(input, vec)


@declared(
    "outer",
    signature="outer(input, vec2) -> Tensor",
    example=Example((Input((4,)), Input((5,))), n_grad=(5, 4), roundings=1),
    reference=np.outer,
)
def outer(input: Tensor, vec2: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
    """The outer product of two vectors, (n,) x (m,) -> (n, m) (torch.outer)."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise ValueError(f"outer() needs two 1-D tensors, got shapes {input.shape} and {vec2.shape}")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


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
