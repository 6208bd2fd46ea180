"""A captured matmul and the elementwise chain that alone reads its product (a linear layer's bias and
activation, a ReLU's backward mask, a weight gradient's cast) as one OpenCL kernel:
:meth:`OpenCLBackend.fused_gemm_kernel`.

The GEMM kernels of :mod:`.gemm` hold each element of C as the float32 sum they round last.  Here they hand
that sum to the chain instead of storing it: an inline function of the sum and the element's place, whose body
is the chain's program rendered by the core (:func:`ampcore.expr.c.render`), each other operand loaded with its
own dtype, the result stored once in its dtype.  The program starts with the rounding eager gives a 16-bit
product, so the result is eager's matmul followed by eager's chain, bit for bit; the function's arithmetic is
compiled without contraction (the pragma in its own body), the GEMM's loop as :mod:`.gemm` compiles it.  The
product is never stored, nor read back, and the chain costs no launch of its own.

A chain operand is read at the element's linear index (the product's shape), its column (a bias row), its row
(a column of the product's rows) or at 0 (one element).  Another layout, a float64 or integer product, or an
empty one runs the matmul and then the chain's own fused kernel (:mod:`.fusion`): the same bits, as two kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ampcore import cgen
from ampcore import dtypes as dt
from ampcore import expr as E
from ampcore.expr import render

from . import gemm
from .array import CLArray, empty
from .fusion import fused_kernel

__all__ = ["Epilogue", "fused_gemm_kernel"]

_FLOAT_PRODUCTS = ("f32", "f16", "bf16")  # accumulated in float32, what the epilogue's operand 0 is
_INDEX = {"full": "lin", "row": "j", "col": "i", "one": "0"}


@dataclass(frozen=True)
class Epilogue:
    """What :mod:`.gemm`'s sources need to end in a chain: the function (``helper``), the kernel's extra
    parameters (the chain's other operands, ``x1...``), the output's C element type and the cache key."""

    key: tuple[Any, ...]
    helper: str
    params: tuple[str, ...]
    out_storage: str

    def call(self, index: str, row: str, col: str, value: str) -> str:
        """The C statement that finishes C's element (``index`` in the output, at ``row``, ``col``)."""
        rest = "".join(f", x{k + 1}" for k in range(len(self.params)))
        return f"epilogue(out, {index}, {row}, {col}, {value}{rest});"


def _layout(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> str | None:
    """How an operand of ``shape`` broadcast to the product's ``out_shape`` is read, or None (not one of
    these)."""
    if len(shape) > len(out_shape):
        return None
    padded = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    m, n = out_shape[-2], out_shape[-1]
    if padded == out_shape:
        return "full"
    if all(d == 1 for d in padded):
        return "one"
    if all(d == 1 for d in padded[:-1]) and padded[-1] == n:
        return "row"
    if all(d == 1 for d in padded[:-2]) and padded[-2:] == (m, 1):
        return "col"
    return None


def _epilogue(prog: E.Program, tags: Sequence[str], out_tag: str, layouts: Sequence[str]) -> Epilogue:
    """The chain ``prog`` as the inline function ``epilogue(out, lin, i, j, acc, x1, ...)``: operand 0 is the
    float32 sum, operand ``k`` is read from ``x{k}`` as its layout says."""
    d = cgen.OPENCL
    storage = cgen.element_type(d, out_tag)
    # no restrict: an inlined function's restrict parameters become LLVM scope intrinsics Oclgrind cannot run
    params = [f"__global const {cgen.element_type(d, t)} *x{k + 1}" for k, t in enumerate(tags)]
    loads = ["const float v0 = acc;"]
    loads += [
        f"const {'int' if t == 'b8' else 'float'} v{k + 1} = {cgen.load(t, f'x{k + 1}', _INDEX[layout])};"
        for k, (t, layout) in enumerate(zip(tags, layouts))
    ]
    body = render(prog, d, "float", [f"v{k}" for k in range(prog.arity)])
    store = cgen.store(out_tag, storage, "out", "lin", body.result)
    lines = "\n    ".join(("#pragma OPENCL FP_CONTRACT OFF", *loads, *body.lines, store))
    signature = ", ".join([f"__global {storage} *out", "long lin", "long i", "long j", "float acc", *params])
    helper = f"{body.helpers}\ninline void epilogue({signature}) {{\n    {lines}\n}}\n"
    return Epilogue((prog.key, tuple(tags), out_tag, tuple(layouts)), helper, tuple(params), storage)


def fused_gemm_kernel(
    name: str, prog: E.Program, product_dtype: dt.DType, operand_dtypes: Sequence[dt.DType], result_dtype: dt.DType
) -> Callable[..., CLArray] | None:
    """A matmul and its epilogue as one kernel (see the module docstring); None for another GEMM (``scaled_mm``),
    a product that is not float32-accumulated, or dtypes a chain does not take."""
    product_tag = cgen.TAGS.get(product_dtype.name, "")
    if name != "matmul" or product_tag not in _FLOAT_PRODUCTS:
        return None
    tags = tuple(cgen.TAGS.get(d.name, "") for d in operand_dtypes[1:])
    out_tag = cgen.TAGS.get(result_dtype.name, "")
    if any(t not in E.FUSED_TAGS or t == "f64" for t in (*tags, out_tag)) or len(tags) + 1 != prog.arity:
        return None
    two_kernels = fused_kernel(prog, [product_dtype, *operand_dtypes[1:]], result_dtype)
    if two_kernels is None:
        return None
    epilogues: dict[tuple[str, ...], Epilogue] = {}

    def kernel(a: CLArray, b: CLArray, *rest: CLArray) -> CLArray:
        a2, b2, _, out_shape = gemm.operands(a, b)
        layouts = tuple(_layout(v.shape, out_shape) for v in rest)
        if a.ndim < 2 or b.ndim < 2 or None in layouts or any(v.state is not a.state for v in rest) or 0 in out_shape:
            return two_kernels(gemm.matmul(a, b), *rest)
        found = epilogues.get(layouts)  # type: ignore[arg-type]
        if found is None:
            found = epilogues[layouts] = _epilogue(prog, tags, out_tag, layouts)  # type: ignore[arg-type]
        out = empty(a.state, out_shape, result_dtype)
        gemm.launch(a2, b2, out, found, [v.buffer for v in rest])
        return out

    kernel.__name__ = f"matmul_{prog.name}"
    return kernel
