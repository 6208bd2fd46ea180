"""Primitive ops with backward rules, and their Tensor-level functions."""

from . import float8
from .elementwise import binary, broadcast_shapes, cast, compare, relu, unary, where
from .linalg import matmul
from .reduction import amax, argmax, cumsum, max, mean, sum
from .shape import (
    cat,
    expand,
    flatten,
    getitem,
    index_add,
    pad,
    permute,
    reshape,
    squeeze,
    stack,
    take,
    transpose,
    unsqueeze,
)

__all__ = [
    "float8",
    "binary",
    "broadcast_shapes",
    "cast",
    "compare",
    "relu",
    "unary",
    "where",
    "matmul",
    "amax",
    "argmax",
    "cumsum",
    "max",
    "mean",
    "sum",
    "cat",
    "expand",
    "flatten",
    "getitem",
    "index_add",
    "pad",
    "permute",
    "reshape",
    "squeeze",
    "stack",
    "take",
    "transpose",
    "unsqueeze",
]
