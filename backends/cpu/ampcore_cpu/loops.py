"""float16/bfloat16 elementwise programs as one compiled pass each (numba), generated from the program.

The NumPy path of a 2-byte program widens every operand to float32 (a pass
and an array each), runs the program's ufuncs (a pass and an array per node)
and rounds once (a last pass).  Here a program becomes a numba loop that, per
element, widens its operands, computes every node in float32 and rounds once:
a (1024, 1024) bfloat16 add in 0.54 ms against 2.48 (2-core Xeon, one thread).

Only programs whose every function gives NumPy's float32 bits when numba
compiles it are rendered (:data:`SAFE`: arithmetic, square root, comparisons,
selections, maximum/minimum with NumPy's NaN and tie rules); the
transcendental functions are NumPy's own SIMD code, whose bits numba's libm
calls would not reproduce, so their programs keep the NumPy path.  Which NaN
an operation on NaN inputs gives (sign, payload) is not specified by IEEE 754
and may differ; every other result has the NumPy path's bits
(``tests/test_cpu_compiled.py`` checks every 2-byte value).

Operands: arrays of the program's 2-byte dtype that are the output's shape, a
trailing block of it (a bias), a channel column of it (a conv bias
``(C, 1, 1)`` against ``(N, C, H, W)``) or one element, and Python floats
(float32 in the loop, as NumPy takes a Python scalar beside float32).  Each
layout of operands is its own loop (a row or column operand's load hoisted out
of the inner loop); anything else, and everything without numba, returns None
and the caller takes the NumPy path.

The generated modules are written, once, under the compiled path's cache
directory (:func:`.compiled.cache_dir`), named by the hash of their source, so
numba's on-disk cache keeps them across processes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ampcore import expr as E

from . import compiled

__all__ = ["SAFE", "MIN_ELEMENTS", "applies", "loop", "plan", "source", "warm"]

SAFE = frozenset(
    {"add", "sub", "mul", "div", "neg", "abs", "sign", "maximum", "minimum", "sqrt", "select", "and", "or", "not"}
    | E.COMPARISONS
    | set(E.ROUNDINGS)
)
MIN_ELEMENTS = 1 << 12  # below this the NumPy path's fixed cost is as low as the call into the loop
_LOW = (np.dtype(np.float16), np.dtype("bfloat16"))
_F16 = np.dtype(np.float16)


def applies(prog: E.Program) -> bool:
    """Whether ``prog`` renders as a compiled loop: every function in :data:`SAFE`, every operand a value."""
    return set(prog.inputs) == {"T"} and all(n.op in SAFE for n in prog.nodes)


# --------------------------------------------------------------------------- layouts
def plan(operands: Sequence[Any]) -> tuple[tuple[int, int], tuple[str, ...], list[Any]] | None:
    """``((rows, cols), modes, views)`` for a loop over ``operands`` (2-byte arrays and Python floats), or None.

    Each mode is ``full`` (the output's shape), ``row`` (its trailing block), ``col`` (a channel column),
    ``one`` (one element) or ``scalar`` (a Python float); views are the arrays as 2-D uint16 bits."""
    arrays = [v for v in operands if isinstance(v, np.ndarray)]
    if not arrays or any(type(v) is not float for v in operands if not isinstance(v, np.ndarray)):
        return None
    dtype = arrays[0].dtype
    if dtype not in _LOW or any(a.dtype != dtype or not a.flags.c_contiguous for a in arrays):
        return None
    shape = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    if math.prod(shape) < MIN_ELEMENTS:
        return None
    laid = layout(operands, shape)
    if laid is None:
        return None
    rows, cols, modes = laid
    views = [_view(v, m, rows, cols) for v, m in zip(operands, modes)]
    return (rows, cols), modes, views


def layout(operands: Sequence[Any], shape: tuple[int, ...]) -> tuple[int, int, tuple[str, ...]] | None:
    """``(rows, cols, modes)``: the output of ``shape`` as a rows x cols loop and each operand's mode in it
    (:func:`_mode`), or None where an operand fits no mode or two operands need different column counts."""
    modes, cols_needed = [], set()
    for v in operands:
        mode, cols = _mode(v, shape)
        if mode is None:
            return None
        modes.append(mode)
        if cols is not None:
            cols_needed.add(cols)
    if len(cols_needed) > 1:
        return None
    cols = cols_needed.pop() if cols_needed else (shape[-1] if shape else 1)
    return (math.prod(shape) // cols if cols else 0), cols, tuple(modes)


def _mode(v: Any, shape: tuple[int, ...]) -> tuple[str | None, int | None]:
    if not isinstance(v, np.ndarray):
        return "scalar", None
    if v.shape == shape:
        return "full", None
    if v.size == 1 and v.ndim <= len(shape):
        return "one", None
    trailing = v.shape
    while trailing and trailing[0] == 1:
        trailing = trailing[1:]
    if v.ndim > len(shape) or not trailing:
        return None, None
    if len(trailing) < len(shape) and shape[-len(trailing) :] == trailing:
        return "row", math.prod(trailing)
    if len(trailing) > 1 and trailing[0] == shape[-len(trailing)] and all(k == 1 for k in trailing[1:]):
        return "col", math.prod(shape[len(shape) - len(trailing) + 1 :])
    return None, None


def view_shape(mode: str, rows: int, cols: int, v: Any) -> tuple[int, int] | None:
    """The 2-D shape a :func:`layout` mode views operand ``v`` as in a (rows, cols) loop; None for a scalar."""
    if mode == "scalar":
        return None
    if mode == "full":
        return rows, cols
    if mode == "row":
        return 1, cols
    return (v.size, 1) if mode == "col" else (1, 1)


def _view(v: Any, mode: str, rows: int, cols: int) -> Any:
    shape = view_shape(mode, rows, cols, v)
    return np.float32(v) if shape is None else v.view(np.uint16).reshape(shape)


# --------------------------------------------------------------------------- source
def _spell(op: str, a: Sequence[str]) -> str:
    if op in ("add", "sub", "mul", "div"):
        return f"({a[0]} {dict(add='+', sub='-', mul='*', div='/')[op]} {a[1]})"
    compare = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
    if op in compare:
        return f"({a[0]} {compare[op]} {a[1]})"
    simple = {
        "neg": "(-{0})",
        "abs": "abs({0})",
        "sqrt": "np.sqrt({0})",
        "maximum": "({0} if ({0} > {1} or {0} != {0}) else {1})",  # NaN from either side, a tie gives the second
        "minimum": "({0} if ({0} < {1} or {0} != {0}) else {1})",
        "sign": "(ONE if {0} > ZERO else (-ONE if {0} < ZERO else (ZERO if {0} == ZERO else {0})))",
        "select": "({1} if {0} else {2})",
        "and": "({0} and {1})",
        "or": "({0} or {1})",
        "not": "(not {0})",
        "round_float16": "round_f16({0})",
        "round_bfloat16": "widen_bf16(narrow_bf16({0}))",
    }
    return simple[op].format(*a)


def body(prog: E.Program) -> tuple[list[str], str, list[str]]:
    """``prog`` as numba statements over ``v0``, ``v1``, ... (the loaded operands): the statements, the name
    holding the result, and the module-level lines defining its float32 constants (``ZERO``/``ONE`` too)."""
    consts: dict[Any, str] = {}

    def leaf(node: E.Expr) -> str:
        if node.is_input:
            return f"v{node.value}"
        value = node.value
        if isinstance(value, bool):
            return repr(value)
        if value not in consts:
            consts[value] = f"C{len(consts)}"
        return consts[value]

    names: dict[E.Expr, str] = {}
    lines: list[str] = []
    for i, node in enumerate(prog.nodes):
        args = [names.get(a) or leaf(a) for a in node.args]
        lines.append(f"t{i} = {_spell(node.op, args)}")
        names[node] = f"t{i}"
    result = names.get(prog.root) or leaf(prog.root)
    constants = [
        "ZERO, ONE = np.float32(0.0), np.float32(1.0)",
        *(f"{name} = np.float32(float('{float(value)!r}'))" for value, name in consts.items()),
    ]
    return lines, result, constants


def source(prog: E.Program, modes: Sequence[str]) -> str:
    """The Python source of a module with one numba function ``kernel(*operands, out, f16)`` computing
    ``prog`` for operands laid out as ``modes``."""
    body_lines, result, constants = body(prog)
    store = "out[r, c] = {}" if prog.result == "b" else "out[r, c] = narrow({})"
    params = ", ".join(f"x{i}" for i in range(prog.arity))
    lines = [
        "import numba",
        "import numpy as np",
        "from ampcore_cpu._lowp_numba import narrow_bf16, narrow_f16, round_f16, widen_bf16, widen_f16",
        "",
        *constants,
        "",
    ]
    for kind in ("f16", "bf16"):
        per_kind: list[str] = [
            "",
            "@numba.njit(nogil=True, cache=True, error_model='numpy')",
            f"def _{kind}({params}, out):  # pragma: no cover - compiled",
            "    rows, cols = out.shape",
        ]
        per_kind += [f"    v{i} = {_load(m, i)}" for i, m in enumerate(modes) if m in ("one", "scalar")]
        per_kind += ["    for r in range(rows):"]
        per_kind += [f"        v{i} = widen(x{i}[r % x{i}.shape[0], 0])" for i, m in enumerate(modes) if m == "col"]
        per_kind += ["        for c in range(cols):"]
        per_kind += [f"            v{i} = {_load(m, i)}" for i, m in enumerate(modes) if m in ("full", "row")]
        per_kind += [f"            {line}" for line in body_lines]
        per_kind += [f"            {store.format(result)}"]
        lines += [line.replace("widen(", f"widen_{kind}(").replace("narrow(", f"narrow_{kind}(") for line in per_kind]
    lines += [
        "",
        "",
        f"def kernel({params}, out, f16):",
        f"    (_f16 if f16 else _bf16)({params}, out)",
        "",
    ]
    return "\n".join(lines)


def _load(mode: str, i: int) -> str:
    if mode == "scalar":
        return f"x{i}"
    if mode == "one":
        return f"widen(x{i}[0, 0])"
    if mode == "row":
        return f"widen(x{i}[0, c])"
    return f"widen(x{i}[r, c])"


# --------------------------------------------------------------------------- modules
def _import(text: str) -> ModuleType:
    """The module of generated ``text``, written once under the cache directory (named by its hash)."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:20]
    name = f"ampcore_cpu_program_{digest}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    folder = Path(compiled.cache_dir()) / "programs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    if not path.exists() or path.read_text() != text:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)  # another process may write the same text: either copy is whole
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def _kernel(key: str, prog: E.Program, modes: tuple[str, ...]) -> Callable[..., None]:
    return _import(source(prog, modes)).kernel  # type: ignore[no-any-return]


def loop(prog: E.Program) -> Callable[..., Any] | None:
    """``prog`` on 2-byte operands as one compiled pass: a function of the operands returning the result, or
    None where the loop does not apply (the caller takes the NumPy path).  None itself where numba is off or
    the program has a function outside :data:`SAFE`."""
    if not compiled.status().enabled or not applies(prog):
        return None
    result_bool = prog.result == "b"

    def run(*operands: Any) -> Any:
        planned = plan(operands)
        if planned is None:
            return None
        (rows, cols), modes, views = planned
        dtype = next(v.dtype for v in operands if isinstance(v, np.ndarray))
        shape = tuple(np.broadcast_shapes(*(v.shape for v in operands if isinstance(v, np.ndarray))))
        out = np.empty(shape, np.bool_ if result_bool else dtype)
        flat = out.reshape(rows, cols) if result_bool else out.view(np.uint16).reshape(rows, cols)
        _kernel(prog.key, prog, modes)(*views, flat, dtype == _F16)
        return out

    return run


# The programs and layouts a training step runs in 2 bytes (AMP's bias adds, scalings, residuals): compiled (or
# read from numba's cache) by :func:`warm` before memory is measured.
_WARM = ("add", "sub", "mul", "div")
_WARM_LAYOUTS = (("full", "full"), ("full", "row"), ("full", "col"), ("full", "scalar"), ("full", "one"))


def warm() -> None:
    """Compile the common programs' loops for :func:`.compiled.warm` (each once, on one-element arrays)."""
    bits = np.zeros((1, 1), np.uint16)
    for name in _WARM:
        prog = E.get(name)
        if prog is None or not applies(prog):
            continue
        for modes in _WARM_LAYOUTS:
            views = [np.float32(0) if m == "scalar" else bits for m in modes]
            for f16 in (True, False):
                _kernel(prog.key, prog, modes)(*views, np.zeros((1, 1), np.uint16), f16)
