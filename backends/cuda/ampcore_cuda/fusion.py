"""A captured step's fused elementwise chains (:meth:`ampcore.Backend.fused_kernel`) as one CUDA kernel each.

The kernel's body is the core's (:func:`ampcore.expr.fused`): each operand loaded with its own dtype (a float32
residual beside a bfloat16 activation), the chain's program computed in float32 (double for float64) with its
rounding nodes, the result rounded once.  The rest is the ``elementwise`` primitive's (:mod:`.elementwise`):
operands broadcast and made contiguous (a bias row is copied to the output's shape, no arithmetic), one
grid-stride loop, compiled once per (program, dtypes) with ``--fmad=false --ftz=false`` through
:mod:`.compiler` (not ``cupy.RawKernel``, which flushes subnormals).  A chain has no scalar operands: its
Python numbers are constants of the program.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt
from ampcore import expr as E

from .array import CuArray
from .codegen import ctype
from .elementwise import _flat, _kernel
from .launch import BLOCK, blocks_for, raw_kernel
from .runtime import import_cupy

__all__ = ["fused_kernel", "source", "sources", "EXAMPLES"]

EXAMPLES: tuple[tuple[E.Program, tuple[str, ...], str], ...] = (
    # a float16 bias add and scaling rounded where eager stores them, widened against a float32 residual
    (
        E.program("fused_4", lambda x, r, b: E.round_float16(E.round_float16(E.round_float16(x + b) * 1.5) * r), "TTT"),
        ("f16", "f32", "f16"),
        "f16",
    ),
    # bfloat16 with a bool mask, a compare and a select
    (
        E.program("fused_3", lambda x, m: E.select(m, E.round_bfloat16(E.sqrt(abs(x))), -x) > 0.5, "Tb"),
        ("bf16", "b8"),
        "b8",
    ),
    # float64: the result rounded once from double
    (E.program("fused_2", lambda x, y: E.maximum(x * y, 0.0) - y, "TT"), ("f64", "f64"), "f64"),
)
"""Chains whose kernels the compile check without a GPU compiles (:func:`sources`): every dtype tag and both
rounding nodes."""


def source(prog: E.Program, tags: Sequence[str], out_tag: str) -> tuple[str, str]:
    """(kernel name, CUDA C source) of ``prog`` over contiguous operands of dtype tags ``tags`` into ``out_tag``."""
    name = f"{prog.name}_{'_'.join(tags)}_{out_tag}"
    body = E.fused(prog, cgen.CUDA, tags, out_tag, ["i"] * prog.arity)
    return name, body.helpers + _kernel(name, list(body.params), " ".join(body.lines))


def fused_kernel(
    prog: E.Program, operand_dtypes: Sequence[dt.DType], result_dtype: dt.DType
) -> Callable[..., CuArray] | None:
    """The kernel of a fused chain: a function of the operands (CuArrays of ``operand_dtypes``, in order)
    returning a new CuArray of ``result_dtype``; None for dtypes a chain does not take (integers, float8)."""
    tags = tuple(cgen.TAGS.get(d.name, "") for d in operand_dtypes)
    out_tag = cgen.TAGS.get(result_dtype.name, "")
    if any(t not in E.FUSED_TAGS for t in (*tags, out_tag)) or len(tags) != prog.arity:
        return None
    name, text = source(prog, tags, out_tag)
    key = ("fused", prog.key, tags, out_tag)
    out_dtype = ctype(result_dtype).cupy_dtype

    def kernel(*operands: CuArray) -> CuArray:
        cp = import_cupy()
        shape = tuple(np.broadcast_shapes(*(v.data.shape for v in operands)))
        with cp.cuda.Device(operands[0].device_index):
            args = [_flat(v.data, shape) for v in operands]
            out = cp.empty(shape, dtype=out_dtype)
            if out.size:
                launch = raw_kernel(key, lambda: text, name)
                launch((min(blocks_for(out.size, BLOCK), 65535 * 8),), (BLOCK,), (out, *args, np.int64(out.size)))
            return CuArray(out, result_dtype)

    kernel.__name__ = name
    return kernel


def sources() -> dict[str, str]:
    """The kernel sources of :data:`EXAMPLES`, by kernel name (a fused chain's kernel is built per program)."""
    return dict(source(prog, tags, out_tag) for prog, tags, out_tag in EXAMPLES)
