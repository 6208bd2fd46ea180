"""A captured step's fused elementwise chains (:meth:`ampcore.Backend.fused_kernel`) as one OpenCL kernel each.

The kernel's body is the core's (:func:`ampcore.expr.fused`): each operand loaded with its own dtype (a float32
residual beside a float16 activation), the chain's program computed in float32 (double for float64) with its
rounding nodes, the result rounded once.  The addressing, the launch and the cache are the ``elementwise``
primitive's (:mod:`.elementwise_gen`): an operand of the output's size is read at the linear index, a
one-element one at 0, a broadcast one (a bias row) through its strides; compiled once per (program, dtypes,
layout).  A chain has no scalar operands: its Python numbers are constants of the program.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ampcore import cgen
from ampcore import dtypes as dt
from ampcore import expr as E

from .array import CLArray, empty
from .codegen import prelude
from .elementwise_gen import Operand, addressing, kernel_pair, plan, run

__all__ = ["fused_kernel"]


def fused_kernel(
    prog: E.Program, operand_dtypes: Sequence[dt.DType], result_dtype: dt.DType
) -> Callable[..., CLArray] | None:
    """The kernel of a fused chain: a function of the operands (CLArrays of ``operand_dtypes``, in order)
    returning a new CLArray of ``result_dtype``; None for dtypes a chain does not take (integers, float8)."""
    tags = tuple(cgen.TAGS.get(d.name, "") for d in operand_dtypes)
    out_tag = cgen.TAGS.get(result_dtype.name, "")
    if any(t not in E.FUSED_TAGS for t in (*tags, out_tag)) or len(tags) != prog.arity:
        return None
    kname = f"{prog.name}_{'_'.join(tags)}_{out_tag}"

    def kernel(*operands: CLArray) -> CLArray:
        state = operands[0].state
        shape = tuple(np.broadcast_shapes(*(v.shape for v in operands)))
        out = empty(state, shape, result_dtype)
        if out.size == 0:
            return out
        p = plan(shape, operands)
        ops = [Operand(v.ctype, mode, "") for v, mode in zip(operands, p.modes)]

        def make() -> str:  # called once per key: the rendering costs nothing at replay
            indices = [{"c": "i", "p": "0", "b": f"off{k}"}[mode] for k, mode in enumerate(p.modes)]
            body = E.fused(prog, cgen.OPENCL, tags, out_tag, indices)
            params, index, check, lines = addressing(p.modes, p.strided)
            code = "\n    ".join((*lines, *body.lines))
            return prelude(state.fp64) + body.helpers + kernel_pair(kname, [*body.params, *params], index, check, code)

        # the kernel's name is in the key, as the elementwise primitive's: two chains of one structure and other
        # dtypes build apart
        return run(state, (prog.key, kname, p.modes, "fused"), kname, make, out, ops, operands, p)

    kernel.__name__ = kname
    return kernel
