"""Primitive ops with backward rules, and their Tensor-level functions."""

from . import declare, decls, float8
from .elementwise import binary, broadcast_shapes, cast, compare, relu, unary, where
from .indexing import masked_select, setitem, take_along_dim
from .linalg import matmul
from .reduction import amax, argmax, cumsum, max, mean, sum  # noqa: A004 - torch's op names (ops.max, ops.sum)
from .shape import (
    cat,
    chunk,
    expand,
    flatten,
    getitem,
    index_add,
    pad,
    permute,
    reshape,
    split,
    squeeze,
    stack,
    take,
    transpose,
    unsqueeze,
)
from .sorting import argsort, sort, topk

decls.load()  # every op declaration: the registry the function forms, methods and policy derive from

__all__ = [
    "declare",
    "decls",
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
    "split",
    "chunk",
    "masked_select",
    "setitem",
    "take_along_dim",
    "sort",
    "argsort",
    "topk",
]
