"""Deliberate defects for :class:`~ampcore.testing.FakeBackend`: the bugs the conformance suite must catch.

``FakeBackend(defects=("truncating_casts",))`` is a backend that registers and
trains but is wrong in one specific way; the conformance suite's own tests run
the suite on each and require it to FAIL, in the check that names the defect.
The wrong kernels of :mod:`ampcore.testing.planted` (a 16-bit accumulator, a
flush of small results, ...) are here too, under their names; that module
plants them on real backends as well.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as dt
from . import numpy_kernels

__all__ = ["DEFECTS", "apply_defects", "check_defects", "Disguised", "disguise"]

_F32 = np.dtype(np.float32)
_LOW = (dt.float16.numpy, dt.bfloat16.numpy)
Kernels = dict[str, Callable[..., Any]]


def _truncate_to(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """float32 -> float16/bfloat16 rounding toward zero (drop the low mantissa bits): the classic bad cast."""
    f = np.asarray(x, np.float32)
    if target == dt.bfloat16.numpy:
        return (f.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(target)
    rounded = f.astype(target)
    too_far = np.abs(rounded.astype(np.float32)) > np.abs(f)  # rounded away from zero: step back one ulp
    return np.where(too_far, np.nextafter(rounded, np.zeros((), target)), rounded).astype(target)


def truncating_casts(table: Kernels) -> None:
    cast = table["cast"]

    def bad_cast(x: Any, dtype: Any) -> Any:
        target = dt.as_dtype(dtype).numpy
        return _truncate_to(x, target) if target in _LOW and x.dtype not in _LOW else cast(x, dtype)

    table["cast"] = bad_cast


def _sequential_sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """Sum over ``axes`` one term at a time, every partial sum rounded to x's dtype."""
    rest = [a for a in range(x.ndim) if a not in axes]
    flat = np.transpose(x, rest + list(axes)).reshape([x.shape[a] for a in rest] + [-1])
    total = np.cumsum(flat, axis=-1, dtype=x.dtype)[..., -1] if flat.shape[-1] else np.zeros(flat.shape[:-1], x.dtype)
    return total.reshape([1 if a in axes else n for a, n in enumerate(x.shape)]) if keepdims else total


def low_precision_accumulation(table: Kernels) -> None:
    """sum / cumsum / matmul on float16/bfloat16 accumulate in that dtype instead of float32."""
    good = {name: table[name] for name in ("sum", "cumsum", "matmul")}

    def sum_(x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
        return _sequential_sum(x, tuple(axes), keepdims) if x.dtype in _LOW else good["sum"](x, axes, keepdims)

    def cumsum(x: Any, axis: int) -> Any:
        return np.cumsum(x, axis=axis, dtype=x.dtype) if x.dtype in _LOW else good["cumsum"](x, axis)

    def matmul(a: Any, b: Any) -> Any:
        if a.dtype not in _LOW:
            return good["matmul"](a, b)
        products = a[..., :, :, None] * b[..., None, :, :]  # (..., m, k, n), each product rounded
        return _sequential_sum(products, (products.ndim - 2,), False)

    table.update(sum=sum_, cumsum=cumsum, matmul=matmul)


def unscale_ignores_nan(table: Kernels) -> None:
    """unscale_and_check looks for inf only, so a NaN gradient slips into the optimizer."""

    def kernel(grads: list, inv_scale: np.ndarray, found_inf: np.ndarray) -> tuple[list, np.ndarray]:
        out = [(g.astype(np.float32) * inv_scale.reshape(())).astype(g.dtype) for g in grads]
        bad = any(np.isinf(g.astype(np.float32)).any() for g in out)
        flag = 1.0 if bad else float(found_inf.reshape(-1)[0])
        return out, np.full(found_inf.shape, flag, np.float32)

    table["unscale_and_check"] = kernel


class Disguised(np.ndarray):
    """A float32 array labelled float16/bfloat16: the ``float32_inside`` defect's storage."""

    claimed: Any = None


def disguise(x: Any, claimed: dt.DType) -> Disguised:
    out = np.array(x, np.float32).view(Disguised)
    out.claimed = claimed
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(e) for e in v)
    return v.view(np.ndarray) if isinstance(v, Disguised) else v


def _claimed(args: Any) -> dt.DType | None:
    for v in args:
        found = _claimed(v) if isinstance(v, (list, tuple)) else getattr(v, "claimed", None)
        if found is not None:
            return found
    return None


def _keep_disguise(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` on the float32 values; float32 results of disguised inputs stay disguised."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        claimed = _claimed(args)
        out = fn(*_plain(args), **kwargs)
        if claimed is None:
            return out
        relabel = lambda v: disguise(v, claimed) if getattr(v, "dtype", None) == _F32 else v  # noqa: E731
        return type(out)(relabel(v) for v in out) if isinstance(out, (list, tuple)) else relabel(out)

    return kernel


def float32_inside(table: Kernels) -> None:
    """Claims float16/bfloat16 but keeps float32 values in 4-byte elements (FakeBackend's from_numpy and
    to_numpy play along, rounding only on the way to the host, so only a chain of ops can tell)."""
    cast = table["cast"]
    for name, fn in list(table.items()):
        table[name] = _keep_disguise(fn)

    def cast_(x: Any, dtype: Any) -> Any:
        d = dt.as_dtype(dtype)
        return disguise(_plain(x), d) if d in dt.LOW_PRECISION_DTYPES else cast(_plain(x), d)

    table["cast"] = cast_


def max_ignores_keepdims(table: Kernels) -> None:
    """``max(x, axes, keepdims)`` always drops the reduced axes: the shape bug that used to cascade into
    broadcast errors in softmax, cross-entropy and training that never named ``max``."""
    good = table["max"]
    table["max"] = lambda x, axes, keepdims: good(x, axes, False)


def integer_add_off_by_one(table: Kernels) -> None:
    """``add`` on integer arrays gives ``a + b + 1``; float ``add`` is right."""
    good = table["add"]

    def add(a: Any, b: Any) -> Any:
        out = good(a, b)
        return out + out.dtype.type(1) if out.dtype.kind in "iu" else out

    table["add"] = add


def unchecked_adamw_step(table: Kernels) -> None:
    """A fused ``adamw_step`` with the right arithmetic but none of the argument checks the guide requires:
    ``step=0`` divides by zero, bad arguments are found only after earlier tensors were written."""
    from ..kernels import KernelTable
    from ..optim.adam import adamw_step_reference

    k = KernelTable(
        "unchecked_adamw_step", {n: table[n] for n in ("cast", "add", "sub", "mul", "div", "sqrt", "maximum")}, "defect"
    )
    k.bind_array_info(lambda a: a.shape, lambda a: dt.as_dtype(a.dtype))

    def adamw_step(params: list, grads: list, exp_avgs: list, exp_avg_sqs: list, **hyper: Any) -> tuple:
        new = adamw_step_reference(k, params, grads, exp_avgs, exp_avg_sqs, **hyper)
        for olds, news in zip((params, exp_avgs, exp_avg_sqs), new):
            for old, value in zip(olds, news):
                old[...] = value  # in place, tensor by tensor
        return list(params), list(exp_avgs), list(exp_avg_sqs)

    table["adamw_step"] = adamw_step


def adamw_step_amp_ignores_skip(table: Kernels) -> None:
    """A fused ``adamw_step_amp`` (the core's composition) that never reads its skip flag: a step whose
    gradients overflowed updates the parameters and counts itself anyway."""
    from ..kernels import KernelTable
    from ..optim.adam import adamw_step_amp_reference

    names = ("cast", "add", "sub", "mul", "div", "sqrt", "pow", "eq", "where")
    k = KernelTable("adamw_step_amp_ignores_skip", {n: table[n] for n in names}, "defect")
    k.bind_array_info(lambda a: a.shape, lambda a: dt.as_dtype(a.dtype))

    def adamw_step_amp(params: list, grads: list, m: list, v: list, steps: Any, skip: Any, **hyper: Any) -> tuple:
        return adamw_step_amp_reference(k, params, grads, m, v, steps, np.zeros_like(skip), **hyper)

    table["adamw_step_amp"] = adamw_step_amp


def floating_point_warnings(table: Kernels) -> None:
    """Elementwise kernels leave NumPy's floating-point warnings on: log(0), 1/0 and inf - inf print a
    RuntimeWarning instead of quietly giving the IEEE value (the values themselves are right)."""

    def loud(fn: Callable[..., Any]) -> Callable[..., Any]:
        def kernel(*args: Any) -> Any:
            dtype = next(a.dtype for a in args if isinstance(a, np.ndarray))
            with np.errstate(all="warn", under="ignore"):  # NumPy's default, as a kernel without errstate has
                return np.asarray(fn(*[numpy_kernels.up(a) for a in args])).astype(dtype, copy=False)

        return kernel

    for name, fn in {**numpy_kernels.UNARY, **numpy_kernels.BINARY}.items():
        table[name] = loud(fn)


def float8_truncating_quantize(table: Kernels) -> None:
    """A ``quantize_float8`` kernel that rounds toward zero (drops the low mantissa bits) instead of to nearest."""

    def quantize_float8(x: Any, scale: Any, dtype: Any, saturate: bool) -> tuple[Any, Any]:
        x32 = np.asarray(x, np.float32)
        with np.errstate(all="ignore"):
            y = np.multiply(x32, scale, dtype=np.float32)
            if saturate:
                top = np.float32(dt.finfo(dtype).max)
                y = np.clip(y, -top, top)
            rounded = y.astype(dtype.numpy)
        too_far = np.abs(rounded.astype(np.float32)) > np.abs(y)  # rounded away from zero: one code back
        codes = rounded.view(np.uint8) - too_far.astype(np.uint8)
        amax = np.abs(x32).max() if x32.size else np.float32(0)
        return codes.view(dtype.numpy), np.asarray(amax, np.float32)

    table["quantize_float8"] = quantize_float8


def _planted(name: str) -> Callable[[Kernels], None]:
    """A defect of :mod:`.planted` (planted on any backend) as a FakeBackend defect: its arrays are NumPy's."""
    from .planted import plant

    def apply(table: Kernels) -> None:
        table.update(plant(name, table.__getitem__, np.asarray, lambda host: host, lambda v: isinstance(v, np.ndarray)))

    return apply


DEFECTS: dict[str, Callable[[Kernels], None]] = {
    "truncating_casts": truncating_casts,
    "low_precision_accumulation": low_precision_accumulation,
    "unscale_ignores_nan": unscale_ignores_nan,
    "float32_inside": float32_inside,
    "max_ignores_keepdims": max_ignores_keepdims,
    "integer_add_off_by_one": integer_add_off_by_one,
    "unchecked_adamw_step": unchecked_adamw_step,
    "adamw_step_amp_ignores_skip": adamw_step_amp_ignores_skip,
    "floating_point_warnings": floating_point_warnings,
    "float8_truncating_quantize": float8_truncating_quantize,
    **{
        name: _planted(name)
        for name in (
            "gemm_16bit_accumulator",
            "gemm_zeros_for_long_k",
            "flushes_small_results",
            "flushes_subnormal_results",
            "exp_2ulps_off",
            "sum_16bit_naive",
        )
    },
    # not a kernel: FakeBackend.fused_kernel compiles fused chains without their rounding nodes
    "fusion_drops_rounding": lambda table: None,
}


def check_defects(defects: Any) -> tuple[str, ...]:
    """The defect names as a tuple; ValueError names an unknown one."""
    names = (defects,) if isinstance(defects, str) else tuple(defects)
    for name in names:
        if name not in DEFECTS:
            raise ValueError(f"unknown defect {name!r}; known defects are {sorted(DEFECTS)}")
    return names


def apply_defects(table: Kernels, defects: tuple[str, ...]) -> Kernels:
    """``table`` with each named defect patched in."""
    for name in check_defects(defects):
        DEFECTS[name](table)
    return table
