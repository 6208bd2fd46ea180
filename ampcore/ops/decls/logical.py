"""logical_and, logical_or, logical_xor and logical_not: any values (nonzero is true, as in torch) to bools."""

from __future__ import annotations

from ... import expr as E
from ..declare import elementwise


def _truth(x: E.Expr) -> E.Expr:
    return E.ne(x, 0)


for _name, _fn in (
    ("logical_and", lambda a, b: E.logical_and(_truth(a), _truth(b))),
    ("logical_or", lambda a, b: E.logical_or(_truth(a), _truth(b))),
    ("logical_xor", lambda a, b: (p := _truth(a), q := _truth(b), (p & ~q) | (~p & q))[-1]),
):
    elementwise(
        _name,
        _fn,
        inputs="TT",
        signature=f"{_name}(input, other) -> Tensor",
        doc=f"torch.{_name}: elementwise, nonzero counting as true; a bool tensor.",
    )
elementwise(
    "logical_not",
    lambda x: E.logical_not(_truth(x)),
    inputs="T",
    signature="logical_not(input) -> Tensor",
    doc="torch.logical_not: True where ``input`` is zero (False), as a bool tensor.",
)
