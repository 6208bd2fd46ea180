"""Scalar expressions: the one form an elementwise op is written in, rendered by every backend.

An elementwise op's forward is a small expression over its operands, in the
spirit of JAX's lax primitives and tinygrad's UOps::

    from ampcore import expr as E

    E.program("sigmoid", lambda x: (e := E.exp(-abs(x)), E.select(x >= 0, 1 / (1 + e), e / (1 + e)))[-1])

The nodes are inputs (the operands, in order), Python number constants, and
calls of the functions in :data:`FUNCTIONS` (arithmetic, comparisons,
``select``, logic and the math functions of the kernel contract).  A node used
twice is one node (a DAG), so renderers compute it once.

A :class:`Program` is a named expression with the kinds of its operands (``"T"``:
a value of the op's dtype, ``"b"``: a bool) and its result.  Backends turn a
program into a kernel once (the ``elementwise`` primitive of
:mod:`ampcore.kernels`): NumPy-like backends evaluate it with their array
functions (:mod:`ampcore.expr.python`), C backends render it to OpenCL C or
CUDA C (:mod:`ampcore.expr.c`), the cpu backend also to a numba loop.

Rounding is the kernel contract's: a program computes in float32 for float16,
bfloat16 and float32 operands (float64 for float64, wrapping integer
arithmetic for integers) and its result is rounded once to the dtype.  Every
operation inside is rounded to the compute type on its own (no fused
multiply-add), so a float32 or float64 program gives the bits of the same ops
run one kernel at a time.

Programs are registered by name (:func:`register`, which op declarations in
:mod:`ampcore.ops.decls` call); a backend's kernel table resolves a kernel
name it has no entry for by rendering the program of that name.  Nothing here
imports the rest of ampcore: this module is the bottom of the house.
"""

from . import ir
from .c import FUSED_TAGS, Fused, Override, Rendered, constant, fused, render
from .ir import *  # noqa: F403 - the language itself (nodes, functions, programs, the registry): ir.__all__
from .python import NUMPY, direct_call, evaluator

__all__ = [
    *ir.__all__,
    # the renderers: NumPy-like array functions (expr.python) and C (expr.c)
    "NUMPY",
    "evaluator",
    "direct_call",
    "render",
    "Rendered",
    "Override",
    "constant",
    # a captured step's fused chain as the body of a C kernel (expr.c)
    "fused",
    "Fused",
    "FUSED_TAGS",
]
