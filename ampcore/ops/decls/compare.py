"""The comparisons: two values (broadcasting; a Python number takes the tensor's dtype) to a bool tensor,
compared exactly in their dtype's compute type."""

from __future__ import annotations

from ... import expr as E
from ..declare import comparison

for _name, _build, _dunder in (
    ("eq", E.eq, "__eq__"),
    ("ne", E.ne, "__ne__"),
    ("lt", E.lt, "__lt__"),
    ("le", E.le, "__le__"),
    ("gt", E.gt, "__gt__"),
    ("ge", E.ge, "__ge__"),
):
    comparison(_name, _build, operators=(_dunder,))
