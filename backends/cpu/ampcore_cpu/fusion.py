"""A captured program's fused elementwise chains (:mod:`ampcore.capture.fusion`) as one compiled pass each.

The core hands over a chain as one program of :mod:`ampcore.expr` (the chain's
ops composed, with a rounding node where eager stores an intermediate in 16
bits), each operand's dtype and the result's.  Operands may differ in dtype
(a float32 residual beside a bfloat16 activation): each element is loaded
widened to the compute type (float16/bfloat16 to float32 exactly), every node
is computed in float32 as NumPy computes it one kernel at a time (the chain
holds only correctly rounded functions: numba gives them NumPy's bits, and
contracts no multiply-add), the rounding nodes round and widen back, and the
result is rounded once to its dtype.  So the fused pass gives the chain's
eager bits (``tests/test_capture_fusion.py`` checks chains against eager).

Layouts are those of :mod:`.loops` (an operand the output's shape, a trailing
block of it, a channel column, one element, or a Python number); any other
layout, and everything without numba, evaluates the same program with NumPy
ufuncs in float32, a node at a time: the same bits, without the speed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import dtypes as dt
from ampcore import expr as E
from ampcore.kernels import EPILOGUE_GEMMS

from . import compiled, float8, kernels, loops
from .elementwise import FUNCTIONS
from .kernels import BF16, F16, F32, F64, _down, _quiet, _up

__all__ = ["fused_kernel", "fused_gemm_kernel", "source"]

_FLOAT32_FAMILY = frozenset({F32, F16, BF16})
_TAG = {F32: "f32", F16: "f16", BF16: "bf16", np.dtype(np.bool_): "b", F64: "f64"}


def fused_kernel(prog: E.Program, operand_dtypes: Sequence[Any], result_dtype: Any) -> Callable[..., Any] | None:
    """The kernel of a fused chain: a function of the operands (NumPy arrays of ``operand_dtypes``, in order)
    returning a new array of ``result_dtype``; None for a chain it cannot compute (integer operands)."""
    in_np = [d.numpy for d in operand_dtypes]
    out_np = result_dtype.numpy
    if any(d not in _TAG for d in [*in_np, out_np]):
        return None
    family = F64 if F64 in in_np or out_np == F64 else F32
    slow = _quiet(_numpy_kernel(prog, family, out_np))
    if family is F64 or not compiled.status().enabled:
        return slow
    tags = tuple(_TAG[d] for d in in_np)
    out_tag = _TAG[out_np]

    # A captured step calls each fused kernel with the same layouts every time: plan each layout once, down to
    # the 2-D shape each operand is viewed as (the loop's own call is then most of a small chain's cost).
    plans: dict[tuple[Any, ...], tuple[tuple[int, ...], tuple[int, int], list[tuple[int, int] | None], Any] | None]
    plans = {}
    bits = out_tag in ("f16", "bf16")
    as_bits = [t in ("f16", "bf16") for t in tags]

    def kernel(*operands: Any) -> Any:
        key = tuple([(v.shape, v.flags.c_contiguous) if isinstance(v, np.ndarray) else type(v) for v in operands])
        plan = plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = plans[key] = _planned(operands, prog, tags, out_tag)
        if plan is None:
            return slow(*operands)
        shape, out_shape, views, loop = plan
        out = np.empty(shape, out_np)
        loop(
            *[_view(v, view, b) for v, view, b in zip(operands, views, as_bits)],
            (out.view(np.uint16) if bits else out).reshape(out_shape),
        )
        return out

    return kernel


_UNPLANNED: Any = object()


def _planned(
    operands: Sequence[Any], prog: E.Program, tags: tuple[str, ...], out_tag: str
) -> tuple[tuple[int, ...], tuple[int, int], list[tuple[int, int] | None], Any] | None:
    """A layout's plan: the result's shape, its 2-D view, each operand's 2-D view (None: a scalar) and the loop."""
    planned = _plan(operands)
    if planned is None:
        return None
    shape, (rows, cols), modes = planned
    views = [loops.view_shape(m, rows, cols, v) for m, v in zip(modes, operands)]
    return shape, (rows, cols), views, _loop(prog.key, prog, modes, tags, out_tag)


def fused_gemm_kernel(
    gemm: str, prog: E.Program, product_dtype: Any, operand_dtypes: Sequence[Any], result_dtype: Any
) -> Callable[..., Any] | None:
    """A captured GEMM and its epilogue (:meth:`ampcore.Backend.fused_gemm_kernel`): the float32 result the GEMM
    kernel rounds last (:func:`.kernels.matmul_sums`, :func:`.float8.scaled_sums`) goes straight into the
    chain's loop, which rounds it as the GEMM would have, so the 16-bit product is never stored, nor widened
    again, nor its chain called on its own.

    A linear layer's backward and forward under float16 autocast each saved 3-5 us per GEMM this way on the
    digits MLP's (64, 128) products (2-core AMD EPYC Zen 5).
    """
    sums_of, rounded = {"matmul": (kernels.matmul_sums, kernels.matmul), "scaled_mm": (float8.scaled_sums, None)}.get(
        gemm, (None, None)
    )
    if sums_of is None or (product_dtype.numpy not in _FLOAT32_FAMILY and product_dtype.numpy != F64):
        return None
    chain = fused_kernel(prog, operand_dtypes, result_dtype)
    if chain is None:
        return None
    arity = EPILOGUE_GEMMS[gemm]

    def kernel(*args: Any) -> Any:
        sums = sums_of(*args[:arity])
        if sums is None:  # a product rounded block by block: the program's rounding of it changes nothing
            assert rounded is not None
            sums = _up(rounded(*args[:arity]))
        return chain(sums, *args[arity:])

    return _quiet(kernel)


def _numpy_kernel(prog: E.Program, family: np.dtype, out_np: np.dtype) -> Callable[..., Any]:
    """The program with NumPy ufuncs, each node in the compute type (float32 for the float32 family)."""
    fn = E.evaluator(prog, FUNCTIONS, name="fused")

    def kernel(*operands: Any) -> Any:
        widened = [
            _up(a) if isinstance(a, np.ndarray) and a.dtype != family and a.dtype != np.bool_ else a for a in operands
        ]
        result = np.asarray(fn(*widened))
        if result.dtype == out_np:
            return result
        return _down(result, out_np) if result.dtype == F32 else result.astype(out_np)

    return kernel


# --------------------------------------------------------------------------- layouts
def _plan(operands: Sequence[Any]) -> tuple[tuple[int, ...], tuple[int, int], tuple[str, ...]] | None:
    """``(shape, (rows, cols), modes)`` of a fused loop over ``operands`` (:func:`.loops.layout`), or None."""
    arrays = [v for v in operands if isinstance(v, np.ndarray)]
    if not arrays or any(not a.flags.c_contiguous for a in arrays):
        return None
    if any(not isinstance(v, np.ndarray) and type(v) not in (float, int, bool) for v in operands):
        return None
    shape = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    laid = loops.layout(operands, shape) if math.prod(shape) else None
    if laid is None:
        return None
    rows, cols, modes = laid
    return shape, (rows, cols), modes


def _view(v: Any, shape: tuple[int, int] | None, bits: bool) -> Any:
    """An operand as its loop takes it: a 16-bit float array as its uint16 bits, in its 2-D ``shape``."""
    if shape is None:
        return np.float32(v) if not isinstance(v, bool) else v
    return (v.view(np.uint16) if bits else v).reshape(shape)


# --------------------------------------------------------------------------- source
def _load(tag: str, mode: str, i: int) -> str:
    index = {"one": "[0, 0]", "row": "[0, c]", "full": "[r, c]", "col": "[r % x{i}.shape[0], 0]"}[mode]
    element = f"x{i}{index.format(i=i)}"
    if tag == "f16":
        return f"widen_f16({element})"
    if tag == "bf16":
        return f"widen_bf16({element})"
    return element


def source(prog: E.Program, modes: Sequence[str], tags: Sequence[str], out_tag: str) -> str:
    """The Python source of a module with one numba function ``kernel(*operands, out)`` computing ``prog``
    over operands laid out as ``modes`` with dtype tags ``tags``, storing ``out_tag`` into ``out``."""
    body, result, constants = loops.body(prog)
    store = {"f16": "narrow_f16({})", "bf16": "narrow_bf16({})", "f32": "{}", "b": "{}"}[out_tag].format(result)
    params = ", ".join(f"x{i}" for i in range(prog.arity))
    scalars = [i for i, m in enumerate(modes) if m == "scalar"]
    lines = [
        "import numba",
        "import numpy as np",
        "from ampcore_cpu._lowp_numba import narrow_bf16, narrow_f16, round_f16, widen_bf16, widen_f16",
        "",
        *constants,
        "",
        "",
        "@numba.njit(nogil=True, cache=True, error_model='numpy')",
        f"def kernel({params}, out):  # pragma: no cover - compiled",
        "    rows, cols = out.shape",
        *(f"    v{i} = x{i}" for i in scalars),
        *(f"    v{i} = {_load(t, m, i)}" for i, (m, t) in enumerate(zip(modes, tags)) if m == "one"),
        "    for r in range(rows):",
        *(f"        v{i} = {_load(t, m, i)}" for i, (m, t) in enumerate(zip(modes, tags)) if m == "col"),
        "        for c in range(cols):",
        *(f"            v{i} = {_load(t, m, i)}" for i, (m, t) in enumerate(zip(modes, tags)) if m in ("full", "row")),
        *(f"            {line}" for line in body),
        f"            out[r, c] = {store}",
        "",
    ]
    return "\n".join(lines)


@functools.cache
def _loop(key: str, prog: E.Program, modes: tuple[str, ...], tags: tuple[str, ...], out_tag: str) -> Callable[..., Any]:
    return loops._import(source(prog, modes, tags, out_tag)).kernel  # type: ignore[no-any-return]


_ = dt  # the dtype names the module docstring speaks of
