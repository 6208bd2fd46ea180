"""What the cpu backend's GEMMs guarantee for each output element, as a bound derived from the computation.

Every path (float32 sgemm, the widened 16-bit path whole or in blocks, oneMKL's 16-bit and float8 routines)
computes an output element as float32 products, summed in float32 over all of K, in an order the BLAS
chooses (OpenBLAS's Haswell kernels, which it runs on AMD Zen 5, sum the last columns of a block in another
order than the rest), then rounded once to the output dtype.  For K terms, each product exact or rounded once
(float32 operands without FMA), Higham's bound for a float32 sum in any order gives

    |s32 - exact| <= gamma_K * sum_k |a_ik| |b_kj|,        gamma_K = K u / (1 - K u),  u = 2**-24

and rounding s32 to a 16-bit output adds at most u_out |s32| (round to nearest; u_out = 2**-11 for float16,
2**-8 for bfloat16), or half the dtype's smallest subnormal where it underflows:

    |got - exact| <= u_out |exact| + (1 + u_out) gamma_K sum|a||b| + tiny_out / 2

``exact`` and ``sum|a||b|`` are float64 products of the stored operands (exact for 16-bit and float8 values,
within 2**-53 for float32 ones, far inside the bound).  Summation order is all this leaves free: a kernel that
rounds a partial sum to the output dtype, or widens less than float32, breaks it
(``tests/test_cpu_lowp_gemm.py`` shows one).  Where ``exact`` is inf or NaN, the result must be exactly that.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

U = 2.0**-24
# Unit roundoff and half the smallest subnormal of each output dtype; float32's rounding is the sum's own.
ROUNDING = {
    np.dtype(np.float32): (0.0, 0.0),
    np.dtype(np.float16): (2.0**-11, 2.0**-25),
    np.dtype(ml_dtypes.bfloat16): (2.0**-8, 2.0**-134),
}


def gemm_bound(a: np.ndarray, b: np.ndarray, out_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(exact, allowed)``: the float64 product of the stored operands and the bound above, per element."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    k = a64.shape[-1]
    gamma = k * U / (1 - k * U)
    u_out, half_tiny = ROUNDING[np.dtype(out_dtype)]
    with np.errstate(invalid="ignore", over="ignore"):  # inf and NaN products: checked apart from the bound
        exact = np.matmul(a64, b64)
        magnitude = np.matmul(np.abs(a64), np.abs(b64))
        return exact, u_out * np.abs(exact) + (1 + u_out) * gamma * magnitude + half_tiny


def assert_one_float32_dot_rounded_once(got: np.ndarray, a: np.ndarray, b: np.ndarray, what: str = "") -> None:
    """``got`` (in its own dtype) is some float32 summation of ``a @ b`` over all of K, rounded once."""
    exact, allowed = gemm_bound(a, b, got.dtype)
    g = np.asarray(got, np.float64)
    assert g.shape == exact.shape, f"{what}: shape {g.shape}, expected {exact.shape}"
    finite = np.isfinite(exact)
    ok = np.where(np.isnan(exact), np.isnan(g), np.where(finite, np.isfinite(g), g == exact))
    assert ok.all(), f"{what}: got {g[~ok][:3]} where the float64 product has {exact[~ok][:3]}"
    with np.errstate(invalid="ignore"):
        err = np.where(finite, np.abs(g - exact), 0.0)
    over = err > np.where(finite, allowed, 0.0)
    if over.any():
        i = np.unravel_index(np.argmax(np.where(over, err / allowed, 0.0)), g.shape)
        raise AssertionError(
            f"{what}: {int(over.sum())} of {g.size} elements beyond one rounding of a float32 dot product; "
            f"worst at {tuple(map(int, i))}: got {g[i]!r}, exact {exact[i]!r}, error {err[i]:.3g} > {allowed[i]:.3g}"
        )
