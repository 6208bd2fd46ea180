"""32-bit integer operations for the compiled loops' bit manipulation (importing this module imports numba).

Numba types integer arithmetic at the machine's width: ``u32(x) + u32(y)`` is a uint64, as are ``&``, ``>>``
and ``max``.  So a loop that rounds float32 bits to bfloat16, float16 or float8 ran in 64-bit vector lanes
(``vpaddq``, ``vpsrlvq``), half the elements per instruction.  These operations are uint32 in, uint32 out,
and wrap as uint32 does; the loops that use them run in 32-bit lanes: 2x on a (64, 128) float8 cast and on a
16K-element bfloat16 rounding (2-core AMD EPYC Zen 5).  Either operand may be any integer (a literal too); it
is converted to uint32 first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic


def _binary(build: Callable[[Any, Any, Any], Any], name: str) -> Any:
    """A uint32 binary operation whose LLVM instruction ``build(builder, a, b)`` makes."""

    def typer(typingctx: Any, a: Any, b: Any) -> Any:
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            x, y = (context.cast(builder, v, t, types.uint32) for v, t in zip(args, signature.args, strict=True))
            return build(builder, x, y)

        return types.uint32(a, b), codegen

    typer.__name__ = name
    return intrinsic(typer)


add32 = _binary(lambda b, x, y: b.add(x, y), "add32")
sub32 = _binary(lambda b, x, y: b.sub(x, y), "sub32")
and32 = _binary(lambda b, x, y: b.and_(x, y), "and32")
or32 = _binary(lambda b, x, y: b.or_(x, y), "or32")
shl32 = _binary(lambda b, x, y: b.shl(x, y), "shl32")  # a shift of 32 or more is undefined, as in C
shr32 = _binary(lambda b, x, y: b.lshr(x, y), "shr32")
max32 = _binary(lambda b, x, y: b.select(b.icmp_unsigned(">", x, y), x, y), "max32")
min32 = _binary(lambda b, x, y: b.select(b.icmp_unsigned("<", x, y), x, y), "min32")


@intrinsic
def f32_from_bits(typingctx: Any, bits: Any) -> Any:  # pragma: no cover - compiled
    """The float32 whose bits are the uint32 ``bits``."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@intrinsic
def bits_from_f32(typingctx: Any, value: Any) -> Any:  # pragma: no cover - compiled
    """A float32's bits as a uint32."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen
