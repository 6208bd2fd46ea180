"""Inputs and expected results for the float8 checks: every float16 and bfloat16 value, a structured float32
sample, ml_dtypes' rounding of them, and a bit-for-bit comparison that names what differs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from .. import dtypes as dt

__all__ = [
    "FLOAT8_TARGETS",
    "all_float16",
    "all_bfloat16",
    "float32_sample",
    "expected_quantize",
    "same_bits",
    "SOURCES",
]

FLOAT8_TARGETS: tuple[dt.DType, ...] = (dt.float8_e4m3fn, dt.float8_e5m2)
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def all_float16() -> np.ndarray:
    """All 65,536 float16 bit patterns (NaNs with every payload, both zeros, both infinities)."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def all_bfloat16() -> np.ndarray:
    """All 65,536 bfloat16 bit patterns."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)


def _codes(dtype: dt.DType) -> np.ndarray:
    """Every finite value of a float8 format, as sorted unique float32."""
    values = np.arange(256, dtype=np.uint16).astype(np.uint8).view(dtype.numpy).astype(np.float32)
    return np.unique(values[np.isfinite(values)])


def float32_sample(seed: int = 29) -> np.ndarray:
    """float32 inputs that probe float8 rounding: every float8 value of both formats, the midpoints (ties)
    between neighbours and the float32 values either side of each, the overflow thresholds, float32
    subnormals, +-0, +-inf, NaNs of both signs, magnitudes up to float32's max, and 20,000 random bit
    patterns."""
    parts = []
    for d in FLOAT8_TARGETS:
        v = _codes(d)
        mid = ((v[:-1].astype(np.float64) + v[1:]) / 2).astype(np.float32)  # exact: float8 has few bits
        top = np.float32(dt.finfo(d).max)
        ulp = top - v[-2]
        beyond = np.array([top + ulp / 2, top + ulp, top * 2], np.float32)  # the first overflow tie and past it
        parts += [v, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf)), beyond]
        parts.append(np.nextafter(beyond, np.float32(-np.inf)))
    tiny = np.float32(2.0) ** np.arange(-149, -125, dtype=np.float32)  # float32 subnormals and the smallest normals
    special = np.array([0.0, np.inf, np.nan, 3.4028235e38, 1e38, 1e-38, 1.0, 2**-20, 2**-17], np.float32)
    rng = np.random.default_rng(seed)
    random_bits = rng.integers(0, 1 << 32, 20_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    one_sign = np.concatenate(parts + [tiny, special])
    return np.concatenate([one_sign, -one_sign, random_bits]).astype(np.float32)


SOURCES: dict[str, Callable[[], np.ndarray]] = {
    "float16": all_float16,
    "bfloat16": all_bfloat16,
    "float32": float32_sample,
}


def expected_quantize(values: np.ndarray, scale: Any, dtype: dt.DType, saturate: bool) -> np.ndarray:
    """``quantize_float8``'s q by ml_dtypes: ``values * scale`` in float32, clamped when ``saturate``, then
    ml_dtypes' round-to-nearest-even cast."""
    with np.errstate(all="ignore"):
        y = np.multiply(np.asarray(values).astype(np.float32), np.asarray(scale, np.float32), dtype=np.float32)
        if saturate:
            top = np.float32(dt.finfo(dtype).max)
            y = np.clip(y, -top, top)
        return y.astype(dtype.numpy)


def same_bits(got: np.ndarray, want: np.ndarray, what: str, inputs: np.ndarray | None = None) -> None:
    """AssertionError naming ``what`` and the first differing elements unless ``got`` and ``want`` have the
    same dtype, shape and bits (NaN payloads and signs included)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    uint = _UINT[got.dtype.itemsize]
    g, w = got.reshape(-1).view(uint), want.reshape(-1).view(uint)
    bad = np.flatnonzero(g != w)
    if bad.size:
        shown = []
        for i in bad[:5]:
            source = "" if inputs is None else f"input {np.asarray(inputs).reshape(-1)[i]!r} "
            shown.append(
                f"[{i}] {source}got {got.reshape(-1)[i]} (0x{int(g[i]):x}) want {want.reshape(-1)[i]} (0x{int(w[i]):x})"
            )
        raise AssertionError(f"{what}: {bad.size} of {g.size} elements differ; " + "; ".join(shown))
