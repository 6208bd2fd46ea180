"""Deliberate defects for :class:`~ampcore.testing.FakeBackend`: the bugs the conformance suite must catch.

``FakeBackend(defects=("truncating_casts",))`` is a backend that registers and
trains but is wrong in one specific way; the conformance suite's own tests run
the suite on each and require it to FAIL, in the check that names the defect.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import dtypes as dt

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
    total = (np.cumsum(flat, axis=-1, dtype=x.dtype)[..., -1] if flat.shape[-1]
             else np.zeros(flat.shape[:-1], x.dtype))
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


DEFECTS: dict[str, Callable[[Kernels], None]] = {
    "truncating_casts": truncating_casts,
    "low_precision_accumulation": low_precision_accumulation,
    "unscale_ignores_nan": unscale_ignores_nan,
    "float32_inside": float32_inside,
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
