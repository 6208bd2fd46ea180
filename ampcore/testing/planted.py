"""Planted wrong kernels: bugs that the conformance suite's tolerance rules must catch, planted on any backend.

Each defect takes a backend's own correct kernel and makes its result wrong in one specific way, on the host:
the result comes back from the device (``to_numpy``), is spoiled, and goes back (``from_numpy``), so the
override takes and returns the backend's own arrays, as any kernel a plugin registers through
``ampcore_kernels`` does.  :class:`PlantedPlugin` registers one on a real backend (cpu, opencl, cuda on its
simulator); :data:`ampcore.testing.defects.DEFECTS` offers each on :class:`~ampcore.testing.FakeBackend` too.

Used as a pytest plugin, ``pytest -p ampcore.testing.planted --ampcore-plant NAME --ampcore-backend TARGET``
plants ``NAME`` on the backend of ``TARGET`` before the conformance suite runs; ``tests/test_planted_kernels.py``
runs each defect against the tolerance-based checks it could slip through and requires them to fail.

The defects (:data:`PLANTED`):

- ``gemm_16bit_accumulator``: a 16-bit matmul whose dot products add each (exact) product into an accumulator
  of the 16-bit dtype, rounding every partial sum;
- ``gemm_zeros_for_long_k``: a matmul that returns zeros when the inner dimension is 1024 or more;
- ``flushes_small_results``: exp and sigmoid return 0 where their result is below 2**-5 in magnitude (the
  old rule, judging errors against a magnitude of at least 1, let sigmoid(-3.8) = 0 pass in bfloat16);
- ``flushes_subnormal_results``: every float elementwise kernel flushes subnormal results to zero (what
  CuPy's ``-ftz=true`` kernels do);
- ``exp_2ulps_off``: exp's finite nonzero results moved 2 ulps of their dtype away from zero (in float32 that
  is within the 2 ulps CUDA documents for expf, so only the other dtypes fail: see ELEMENTWISE_ULPS);
- ``sum_16bit_naive``: a 16-bit sum that adds one term at a time in the 16-bit dtype;
- ``fusion_drops_rounding``: not a kernel but a captured step's fusion (:meth:`ampcore.Backend.fused_kernel`,
  and :meth:`ampcore.Backend.fused_gemm_kernel` where the backend fuses GEMM epilogues): the backend compiles
  each fused chain without its rounding nodes, so an intermediate eager stores in 16 bits (a 16-bit product
  too) stays in float32 (the captured mode of the suite, ``checks/test_capture.py``, must catch it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..plugins import hookimpl

__all__ = [
    "FUSION_DEFECTS",
    "PLANTED",
    "Planted",
    "plant",
    "plant_fusion",
    "PlantedPlugin",
    "pytest_addoption",
    "pytest_configure",
    "without_roundings",
]

_LOW = (dt.float16.numpy, dt.bfloat16.numpy)
# (host result, host inputs...) -> the wrong host result, or None to keep the right one
Spoiler = Callable[..., "np.ndarray | None"]


def _sequential_16bit(terms: np.ndarray, axis: int) -> np.ndarray:
    """Sum ``terms`` (float32, exact) along ``axis`` one at a time, every partial sum rounded to ``terms``'
    16-bit dtype: the 16-bit accumulator."""
    moved = np.moveaxis(terms, axis, -1)
    total = np.zeros(moved.shape[:-1], terms.dtype)
    for i in range(moved.shape[-1]):
        total = (total.astype(np.float32) + moved[..., i].astype(np.float32)).astype(terms.dtype)
    return total


def _gemm_16bit_accumulator(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    if out.dtype not in _LOW:
        return None
    products = (a[..., :, :, None].astype(np.float32) * b[..., None, :, :].astype(np.float32)).astype(out.dtype)
    return _sequential_16bit(products, products.ndim - 2)


def _gemm_zeros_for_long_k(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    return np.zeros_like(out) if a.shape[-1] >= 1024 else None


def _flush_below(threshold: Callable[[np.dtype], float]) -> Spoiler:
    def spoil(out: np.ndarray, *inputs: Any) -> np.ndarray | None:
        if out.dtype.kind != "f" and out.dtype not in _LOW:
            return None
        small = np.abs(out.astype(np.float64)) < threshold(out.dtype)
        return np.where(small, np.zeros((), out.dtype), out).astype(out.dtype) if small.any() else None

    return spoil


def _smallest_normal(dtype: np.dtype) -> float:
    return dt.finfo(dt.as_dtype(dtype)).tiny


def _exp_2ulps_off(out: np.ndarray, x: np.ndarray) -> np.ndarray | None:
    """Finite nonzero results two representable values further from zero (where that stays finite)."""
    unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}[out.dtype.itemsize]
    bits = np.ascontiguousarray(out).view(unsigned)
    moved = (bits + unsigned(2)).view(out.dtype)  # sign-magnitude: +2 grows the magnitude either side of zero
    wide = out.astype(np.float64)
    ok = np.isfinite(wide) & (wide != 0) & np.isfinite(moved.astype(np.float64))
    return np.where(ok, moved, out).astype(out.dtype)


def _sum_16bit_naive(out: np.ndarray, x: np.ndarray, axes: Any, keepdims: bool) -> np.ndarray | None:
    axes = tuple(axes)
    if x.dtype not in _LOW or not axes:
        return None
    rest = [a for a in range(x.ndim) if a not in axes]
    flat = np.transpose(x, rest + list(axes)).reshape([x.shape[a] for a in rest] + [-1])
    total = _sequential_16bit(flat, flat.ndim - 1)
    return total.reshape(out.shape)


@dataclass(frozen=True)
class Planted:
    """A planted defect: the kernels it spoils and how."""

    name: str
    kernels: tuple[str, ...]
    spoil: Spoiler
    summary: str


_ELEMENTWISE_FLOAT = (
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos", "neg", "abs",
    "add", "sub", "mul", "div", "pow", "maximum", "minimum",
)  # fmt: skip

PLANTED: dict[str, Planted] = {
    p.name: p
    for p in (
        Planted("gemm_16bit_accumulator", ("matmul",), _gemm_16bit_accumulator, "16-bit matmul, 16-bit accumulator"),
        Planted("gemm_zeros_for_long_k", ("matmul",), _gemm_zeros_for_long_k, "matmul gives zeros for k >= 1024"),
        Planted(
            "flushes_small_results",
            ("exp", "sigmoid"),
            _flush_below(lambda dtype: 2.0**-5),
            "exp and sigmoid flush results below 2**-5 to zero",
        ),
        Planted(
            "flushes_subnormal_results",
            _ELEMENTWISE_FLOAT,
            _flush_below(_smallest_normal),
            "elementwise kernels flush subnormal results to zero",
        ),
        Planted("exp_2ulps_off", ("exp",), _exp_2ulps_off, "exp 2 ulps of its dtype away from zero"),
        Planted("sum_16bit_naive", ("sum",), _sum_16bit_naive, "16-bit sum, one term at a time in 16 bits"),
        Planted("fusion_drops_rounding", (), lambda *a: None, "fused chains skip eager's 16-bit roundings"),
    )
}
FUSION_DEFECTS = frozenset({"fusion_drops_rounding"})
"""Defects planted on a backend's fusion (:meth:`ampcore.Backend.fused_kernel`) rather than on a kernel."""


def without_roundings(program: Any) -> Any:
    """``program`` with its rounding nodes (``round_float16``, ``round_bfloat16``) removed: the fusion defect."""
    from .. import expr as E

    done: dict[Any, Any] = {}

    def strip(node: Any) -> Any:
        if not node.args:
            return node
        if node.op in E.ROUNDINGS:
            return strip(node.args[0])
        if node not in done:
            done[node] = E.Expr(node.op, tuple(strip(a) for a in node.args))
        return done[node]

    return E.Program(program.name, program.inputs, strip(program.root))


def plant_fusion(name: str, backend: Any) -> None:
    """Plant the fusion defect ``name`` on ``backend`` (its ``fused_kernel`` and ``fused_gemm_kernel``,
    replaced on the instance)."""
    own, own_gemm = backend.fused_kernel, backend.fused_gemm_kernel

    def fused_kernel(program: Any, operand_dtypes: Any, result_dtype: Any) -> Any:
        return own(without_roundings(program), operand_dtypes, result_dtype)

    def fused_gemm_kernel(gemm: str, program: Any, product_dtype: Any, operand_dtypes: Any, result_dtype: Any) -> Any:
        return own_gemm(gemm, without_roundings(program), product_dtype, operand_dtypes, result_dtype)

    backend.fused_kernel = fused_kernel
    backend.fused_gemm_kernel = fused_gemm_kernel


def _planted(name: str) -> Planted:
    if name not in PLANTED:
        raise ValueError(f"unknown planted defect {name!r}; known ones are {sorted(PLANTED)}")
    return PLANTED[name]


def plant(
    name: str,
    kernels: Callable[[str], Callable[..., Any]],
    to_host: Callable[[Any], np.ndarray],
    to_device: Callable[[np.ndarray], Any],
    is_array: Callable[[Any], bool],
) -> dict[str, Callable[..., Any]]:
    """The overrides planting defect ``name``: each spoiled kernel runs the right one (``kernels(op)``), takes
    its result and inputs to the host, spoils the result and puts it back."""
    defect = _planted(name)

    def spoiled(op: str) -> Callable[..., Any]:
        good = kernels(op)

        def kernel(*args: Any) -> Any:
            out = good(*args)
            host = [to_host(a) if is_array(a) else a for a in args]
            wrong = defect.spoil(to_host(out), *host)
            return out if wrong is None else to_device(np.ascontiguousarray(wrong))

        kernel.__name__ = f"{op}_{name}"
        return kernel

    return {op: spoiled(op) for op in defect.kernels}


class PlantedPlugin:
    """An ampcore plugin whose ``ampcore_kernels`` hook plants one defect on one backend (device ``index``)."""

    def __init__(self, name: str, backend: str, index: int = 0):
        _planted(name)
        self.name, self.backend, self.index = name, backend, index

    @hookimpl
    def ampcore_kernels(self, backend: Any) -> dict[str, Callable[..., Any]] | None:
        if backend.name != self.backend:
            return None
        if self.name in FUSION_DEFECTS:
            plant_fusion(self.name, backend)
            return None
        table = backend.kernels

        def is_array(value: Any) -> bool:
            if isinstance(value, (bool, int, float, tuple, list, str)) or value is None:
                return False
            try:
                backend.dtype_of(value)
            except Exception:  # noqa: BLE001 - not one of the backend's arrays: passed through as it is
                return False
            return True

        def to_device(host: np.ndarray) -> Any:
            return backend.from_numpy(host, dt.as_dtype(host.dtype), self.index)

        return plant(self.name, lambda op: getattr(table, op), backend.to_numpy, to_device, is_array)


# --------------------------------------------------------------------------- as a pytest plugin
def pytest_addoption(parser: Any) -> None:
    parser.getgroup("ampcore").addoption(
        "--ampcore-plant",
        metavar="DEFECT",
        help=f"plant a wrong kernel on the backend under test before the suite runs: one of {sorted(PLANTED)}",
    )


def pytest_configure(config: Any) -> None:
    name = config.getoption("ampcore_plant")
    if not name:
        return
    targets = config.getoption("ampcore_backend")
    if len(targets) != 1:
        raise ValueError("--ampcore-plant needs exactly one --ampcore-backend NAME[:N] to plant the defect on")
    backend, _, index = targets[0].partition(":")
    from ..plugins import register_plugin

    register_plugin(PlantedPlugin(name, backend, int(index or 0)), name=f"planted-{name}")
