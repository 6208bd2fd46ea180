"""The float classifications: isnan, isinf, isfinite, isposinf and isneginf, one value to a bool (torch's;
an integer or bool tensor holds no NaN or infinity, so those give False, or True for isfinite)."""

from __future__ import annotations

from ... import expr as E
from ..declare import Domain, elementwise

_INF = float("inf")
# Whole multiples of 1/4 between -4 and 4 with a few infinities and NaNs mixed in would test the specials; the
# domain stays finite (the suite's float64 reference draws from it) and tests/test_classify.py tests the rest.
_ANY = Domain(-4, 4)

for _name, _fn in (
    ("isnan", lambda x: E.ne(x, x)),  # NaN is the one value unequal to itself
    ("isinf", lambda x: E.eq(abs(x), _INF)),
    ("isfinite", lambda x: E.lt(abs(x), _INF)),  # false for NaN: every comparison with it is
    ("isposinf", lambda x: E.eq(x, _INF)),
    ("isneginf", lambda x: E.eq(x, -_INF)),
):
    elementwise(
        _name,
        _fn,
        inputs="T",
        domains=(_ANY,),
        signature=f"{_name}(input) -> Tensor",
        doc=f"torch.{_name}: a bool tensor, True where ``input`` is {_name.removeprefix('is')}.",
    )
