"""A float64 NumPy emulation of each float8 recipe's casts and GEMMs: what a Float8Linear must compute.

``cast(x, recipe, fmt)`` is a recipe's float8 view of a 2-D array whose
reduction runs along its last axis, dequantized to float64: the scales of
:mod:`ampcore.float8.scaling`, ``x * scale`` rounded to float32, clamped to
the format's max and rounded to nearest-even by ml_dtypes.  A float8 GEMM
``A @ B.T`` of two such views accumulated in float32 may differ from the
float64 product by ``gemm_tolerance``.  Shared by the conformance check
``checks/test_float8_recipes.py`` and the core's tests.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .. import dtypes as dt
from ..float8.recipes import Recipe
from ..float8.scaling import FP8_MAX, current_scale, mx_scale
from .tolerance import accumulation_bound

__all__ = ["FORMATS", "quantize", "cast", "gemm_tolerance", "expected_linear"]

FORMATS: dict[str, Any] = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}
BLOCK = 32


def quantize(x: np.ndarray, scale: np.ndarray, name: str) -> np.ndarray:
    """The dequantized float8 values of ``x`` under ``scale`` (saturating), as float64."""
    y = np.clip(x.astype(np.float32) * np.asarray(scale, np.float32), -FP8_MAX[name], FP8_MAX[name])
    return y.astype(FORMATS[name]).astype(np.float64) / np.asarray(scale, np.float64)


def cast(x: np.ndarray, recipe: Recipe, name: str) -> np.ndarray:
    """A current-scaling recipe's float8 view of ``x`` (2-D, reducing along the last axis), as float64."""
    x = np.asarray(x, np.float32)
    if recipe.granularity == "block":
        rows, k = x.shape
        padded = np.zeros((rows, -(-k // BLOCK) * BLOCK), dtype=np.float32)  # zero-padded blocks along each row
        padded[:, :k] = x
        blocks = padded.reshape(-1, BLOCK)
        scale = mx_scale(np.abs(blocks).max(axis=1, keepdims=True), name)
        return quantize(blocks, scale, name).reshape(rows, -1)[:, :k]
    amax = np.abs(x).max(axis=1, keepdims=True) if recipe.granularity == "rowwise" else np.abs(x).max()
    return quantize(x, current_scale(amax, name, recipe.round_scales_to_power_of_2), name)


def gemm_tolerance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 accumulation of exact float8 products (operands scaled in float32 first), the accumulation rule
    of :mod:`.tolerance`: per element, ``gamma_{k+2}(2**-24) (|a| @ |b|.T)`` (plus float64's own, 1e-30 for an
    all-zero row)."""
    k = a.shape[1]
    return accumulation_bound(np.abs(a) @ np.abs(b).T, k + 2, dt.float32) + 1e-30


def expected_linear(
    x: np.ndarray, w: np.ndarray, g: np.ndarray, recipe: Recipe
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per GEMM (``output``, ``grad_input``, ``grad_weight``): the float64 product of the recipe's float8
    operands and its tolerance, for a Float8Linear with weight ``w`` (N, K) on input ``x`` (M, K) and
    grad_output ``g`` (M, N)."""
    forward = "float8_e4m3fn"
    backward = recipe.fp8_format.dtype_name("grad_output")
    pairs = {
        "output": (cast(x, recipe, forward), cast(w, recipe, forward)),
        "grad_input": (cast(g, recipe, backward), cast(np.ascontiguousarray(w.T), recipe, forward)),
        "grad_weight": (
            cast(np.ascontiguousarray(g.T), recipe, backward),
            cast(np.ascontiguousarray(x.T), recipe, forward),
        ),
    }
    return {name: (a @ b.T, gemm_tolerance(a, b)) for name, (a, b) in pairs.items()}
