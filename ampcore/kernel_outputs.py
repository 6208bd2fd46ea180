"""What each kernel must return, checked on every call: its output's shape and dtype, from its inputs.

A kernel that returns the wrong shape (a ``max`` that ignores ``keepdims``) would otherwise surface far
away, as a broadcast error inside softmax or a training step that never names it.  The kernel table
(:class:`ampcore.kernels.KernelTable`) wraps every kernel listed in :data:`OUTPUT_RULES`; the wrapper
computes the expected ``(shape, dtype)`` (a list of them for a kernel with several outputs) from the
arguments with the backend's ``shape_of`` / ``dtype_of``
and raises :class:`ampcore.kernels.KernelError` naming the kernel when the result disagrees.  A rule returns
None for a part it leaves open (operands of mixed dtypes, a shape with -1).  The cost is a few
microseconds per kernel call, so the check runs only while debug checks are on
(``AMPCORE_DEBUG_KERNELS=1`` or :func:`ampcore.kernels.set_debug_kernels`; the test and conformance suites
turn it on).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import expr
from .dtypes import DType, as_dtype, bool_, float32, int64

__all__ = ["OUTPUT_RULES", "expected_output", "rule_for", "program_rule"]

_SCALARS = (int, float, bool, np.number)
Shape = tuple[int, ...]
Expected = tuple["Shape | None", "DType | None"]
ShapeOf = Callable[[Any], Shape]
DTypeOf = Callable[[Any], DType]
Args = tuple[Any, ...]
Rule = Callable[[ShapeOf, DTypeOf, Args], "Expected | list[Expected]"]


def _broadcast(shapes: Sequence[Shape]) -> Shape | None:
    first = shapes[0]
    if all(s == first for s in shapes[1:]):
        return first
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None  # the core checked broadcasting before the call; a direct caller gets the kernel's own error


def _same(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    return shape_of(args[0]), dtype_of(args[0])


def _one_dtype(a: DType, b: DType) -> DType | None:
    """``a`` if the two are the same dtype (identity first: DType equality compares fields), else None."""
    return a if a is b or a == b else None


def _binary(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    """Broadcasting binary kernels: either operand may be a Python scalar; output dtype = the operands'."""
    a, b = args
    if isinstance(a, _SCALARS):
        return shape_of(b), dtype_of(b)
    if isinstance(b, _SCALARS):
        return shape_of(a), dtype_of(a)
    sa, sb = shape_of(a), shape_of(b)
    return (sa if sa == sb else _broadcast((sa, sb))), _one_dtype(dtype_of(a), dtype_of(b))


def _comparison(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    a, b = args
    if isinstance(a, _SCALARS):
        return shape_of(b), bool_
    if isinstance(b, _SCALARS):
        return shape_of(a), bool_
    sa, sb = shape_of(a), shape_of(b)
    return (sa if sa == sb else _broadcast((sa, sb))), bool_


def _where(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    cond, branches = args[0], [a for a in args[1:3] if not isinstance(a, _SCALARS)]
    shape = _broadcast([shape_of(cond)] + [shape_of(a) for a in branches])
    if not branches:
        return shape, None
    first = dtype_of(branches[0])
    return shape, (first if len(branches) == 1 else _one_dtype(first, dtype_of(branches[1])))


def _integer_to_int64(d: DType) -> DType:
    return int64 if not d.is_floating_point else d


def _reduce(int64_for_integers: bool) -> Rule:
    def rule(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
        x, axes, keepdims = args[0], tuple(args[1]), bool(args[2])
        shape = shape_of(x)
        out = (
            tuple(1 if i in axes else n for i, n in enumerate(shape))
            if keepdims
            else tuple(n for i, n in enumerate(shape) if i not in axes)
        )
        d = dtype_of(x)
        return out, (_integer_to_int64(d) if int64_for_integers else d)

    return rule


def _argmax(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    x, axis = args[0], args[1]
    return tuple(n for i, n in enumerate(shape_of(x)) if i != axis), int64


def _cumsum(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    return shape_of(args[0]), _integer_to_int64(dtype_of(args[0]))


def _matmul(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    a, b = shape_of(args[0]), shape_of(args[1])
    d = _one_dtype(dtype_of(args[0]), dtype_of(args[1]))
    if len(a) < 2 or len(b) < 2:
        return None, d
    batch = a[:-2] if a[:-2] == b[:-2] else _broadcast([a[:-2], b[:-2]])
    return (None if batch is None else batch + (a[-2], b[-1])), d


def _reshape(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    shape = tuple(args[1])
    return (None if -1 in shape else shape), dtype_of(args[0])


def _transpose(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    shape = shape_of(args[0])
    return tuple(shape[i] for i in args[1]), dtype_of(args[0])


def _broadcast_to(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    return tuple(args[1]), dtype_of(args[0])


def _concat(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    xs, axis = list(args[0]), args[1]
    if not xs:
        return None, None
    first = shape_of(xs[0])
    total = sum(shape_of(x)[axis] for x in xs)
    return first[:axis] + (total,) + first[axis + 1 :], dtype_of(xs[0])


def _take(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    x, indices, axis = args[0], args[1], args[2]
    shape = shape_of(x)
    return shape[:axis] + tuple(shape_of(indices)) + shape[axis + 1 :], dtype_of(x)


def _scatter_add(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    src, axis, size = args[0], args[2], args[3]
    shape = shape_of(src)
    return shape[:axis] + (size,) + shape[axis + 1 :], dtype_of(src)


def _pad(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    x, widths = args[0], args[1]
    return tuple(n + lo + hi for n, (lo, hi) in zip(shape_of(x), widths)), dtype_of(x)


def _cast(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    return shape_of(args[0]), as_dtype(args[1])


def _created(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    shape = args[0]
    return ((shape,) if isinstance(shape, int) else tuple(shape)), as_dtype(args[1])


def _full(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    shape = args[0]
    return ((shape,) if isinstance(shape, int) else tuple(shape)), as_dtype(args[2])


def _arange(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    start, stop, step = args[0], args[1], args[2]
    return (max(0, math.ceil((stop - start) / step)),), as_dtype(args[3])


def _tiled_pool(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
    x, (kh, kw) = args[0], args[1]
    n, c, h, w = shape_of(x)
    return (n, c, h // kh, w // kw), dtype_of(x)


def _quantize_float8(
    shape_of: Callable[[Any], Shape], dtype_of: Callable[[Any], DType], args: tuple[Any, ...]
) -> list[Expected]:
    """(q of x's shape in the float8 dtype, a 0-d float32 amax)."""
    return [(shape_of(args[0]), as_dtype(args[2])), ((), float32)]


def _quantize_float8_current(
    shape_of: Callable[[Any], Shape], dtype_of: Callable[[Any], DType], args: tuple[Any, ...]
) -> list[Expected]:
    """(q of x's shape in the float8 dtype; scale, inverse scale and amax in float32: 0-d, or (rows, 1) per row)."""
    shape = shape_of(args[0])
    scales: Shape = (shape[0], 1) if args[3] else ()
    return [(shape, as_dtype(args[1])), (scales, float32), (scales, float32), (scales, float32)]


def _scaled_mm(shape_of: Callable[[Any], Shape], dtype_of: Callable[[Any], DType], args: tuple[Any, ...]) -> Expected:
    a, b = shape_of(args[0]), shape_of(args[1])
    return (a[0], b[1]), as_dtype(args[4])


# kernel -> how to get the expected (shape, dtype) of its output from its positional arguments.
OUTPUT_RULES: dict[str, Rule] = {
    **dict.fromkeys(
        ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sign", "sin", "cos"), _same
    ),
    **dict.fromkeys(("add", "sub", "mul", "div", "pow", "maximum", "minimum"), _binary),
    **dict.fromkeys(("eq", "ne", "lt", "le", "gt", "ge"), _comparison),
    "where": _where,
    "sum": _reduce(True),
    "max": _reduce(False),
    "argmax": _argmax,
    "cumsum": _cumsum,
    "matmul": _matmul,
    "reshape": _reshape,
    "transpose": _transpose,
    "broadcast_to": _broadcast_to,
    "concat": _concat,
    "take": _take,
    "scatter_add": _scatter_add,
    "pad": _pad,
    "cast": _cast,
    "slice_assign": _same,
    "full": _full,
    "arange": _arange,
    "uniform": _created,
    "normal": _created,
    "softmax": _same,
    "log_softmax": _same,
    "softmax_backward": _same,
    "log_softmax_backward": _same,
    "gelu": _same,
    "gelu_backward": _same,
    "max_pool2d_tiled": _tiled_pool,
    "max_pool2d_tiled_backward": _same,
    "quantize_float8": _quantize_float8,
    "quantize_float8_current": _quantize_float8_current,
    "scaled_mm": _scaled_mm,
    "scaled_mm_mx": _scaled_mm,
}


def program_rule(prog: expr.Program) -> Rule:
    """The rule of an elementwise program's kernel: its array operands broadcast; the result in their dtype
    (the value operands' one, for ``where``), or bool for a comparison."""
    values = [i for i, kind in enumerate(prog.inputs) if kind == "T"]

    def rule(shape_of: ShapeOf, dtype_of: DTypeOf, args: Args) -> Expected:
        arrays = [a for a in args if not isinstance(a, _SCALARS)]
        if not arrays:
            return None, None
        shape = _broadcast([shape_of(a) for a in arrays])
        if prog.result == "b":
            return shape, bool_
        dtypes = [dtype_of(args[i]) for i in values if i < len(args) and not isinstance(args[i], _SCALARS)]
        dtype = dtypes[0] if dtypes else None
        for d in dtypes[1:]:
            dtype = _one_dtype(dtype, d) if dtype is not None else None
        return shape, dtype

    return rule


def rule_for(name: str) -> Rule | None:
    """The output rule of kernel ``name``: its entry in :data:`OUTPUT_RULES`, else that of the registered
    program of the name, else None."""
    rule = OUTPUT_RULES.get(name)
    if rule is None:
        prog = expr.get(name)
        if prog is not None:
            rule = program_rule(prog)
    return rule


def expected_output(
    name: str, args: tuple[Any, ...], shape_of: Callable[[Any], Shape], dtype_of: Callable[[Any], DType]
) -> Expected | list[Expected]:
    """The (shape, dtype) kernel ``name`` must return for ``args`` (a list, one per output, for a kernel with
    several); None for what the contract leaves open."""
    rule = rule_for(name)
    return (None, None) if rule is None else rule(shape_of, dtype_of, args)


def describe_args(args: tuple[Any, ...], shape_of: Callable[[Any], Shape], dtype_of: Callable[[Any], DType]) -> str:
    """``x: float32 (4, 5), (1,), True``: arrays by dtype and shape, everything else by repr."""

    def one(a: Any) -> str:
        if isinstance(a, (list, tuple)) and a and not isinstance(a[0], (int, slice, tuple, type(None))):
            return "[" + ", ".join(one(v) for v in a) + "]"
        if isinstance(a, _SCALARS) or isinstance(a, (tuple, list, str, type(None), DType)):
            return repr(a)
        try:
            return f"{dtype_of(a).name} array of shape {shape_of(a)}"
        except Exception:  # noqa: BLE001 - only for the message: anything unreadable is shown by its type
            return type(a).__name__

    return ", ".join(one(a) for a in args)
