"""The cuda backend's 16-bit conversions, checked bit for bit without a GPU.

Every float16/bfloat16 kernel loads and stores through the functions in
``ampcore_cuda.codegen.PRELUDE``.  Here that exact source is compiled for the
host (the four CUDA intrinsics it uses get host stand-ins with the same
rounding) and compared with NumPy/ml_dtypes: every 16-bit pattern widened, and
float32/float64 values narrowed with one round-to-nearest-even.  Skips, with
the reason, where no C++ compiler is on PATH.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

from ampcore import dtypes as dt
from ampcore_cuda.codegen import PRELUDE

CXX = shutil.which("c++") or shutil.which("g++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler on PATH to build the conversions for the host")

_HOST_SHIMS = r"""
#include <cfenv>
#include <cstring>
#define __device__
#define __forceinline__ inline
static inline float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }
static inline float __fadd_rn(float a, float b) { volatile float s = a + b; return s; }
static inline float __double2float_rz(double d) {
    const int old = std::fegetround();
    std::fesetround(FE_TOWARDZERO);
    volatile float f = (float)d;
    std::fesetround(old);
    return f;
}
"""

_WRAPPERS = r"""
extern "C" {
void widen_f16(const unsigned short *x, float *y, long n) { for (long i = 0; i < n; ++i) y[i] = half_to_float(x[i]); }
void widen_bf16(const unsigned short *x, float *y, long n) { for (long i = 0; i < n; ++i) y[i] = bf16_to_float(x[i]); }
void narrow_f16(const float *x, unsigned short *y, long n) { for (long i = 0; i < n; ++i) y[i] = float_to_half(x[i]); }
void narrow_bf16(const float *x, unsigned short *y, long n) { for (long i = 0; i < n; ++i) y[i] = float_to_bf16(x[i]); }
void narrow64_f16(const double *x, unsigned short *y, long n) {
    for (long i = 0; i < n; ++i) y[i] = float_to_half(double_to_float_odd(x[i]));
}
void narrow64_bf16(const double *x, unsigned short *y, long n) {
    for (long i = 0; i < n; ++i) y[i] = float_to_bf16(double_to_float_odd(x[i]));
}
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("codegen")
    src, so = d / "conversions.cpp", d / "conversions.so"
    src.write_text(_HOST_SHIMS + PRELUDE + _WRAPPERS)
    proc = subprocess.run(
        [CXX, "-O1", "-ffp-contract=off", "-frounding-math", "-shared", "-fPIC", "-o", str(so), str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return ctypes.CDLL(str(so))


def _call(lib, name, x: np.ndarray, out_dtype) -> np.ndarray:
    x = np.ascontiguousarray(x)
    y = np.empty(x.shape, out_dtype)
    getattr(lib, name)(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(x.size))
    return y


_LOW = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}


def _same_bits_or_both_nan(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per element: identical bits, or both NaN with the same sign (NaN payloads may differ)."""
    got_f, want_f = got.view(np.dtype(f"u{got.itemsize}")), want.view(np.dtype(f"u{want.itemsize}"))
    sign = np.uint64(1) << np.uint64(8 * got.itemsize - 1)
    with np.errstate(invalid="ignore"):  # NaN patterns widen with a warning
        nan = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
    nan_ok = nan & ((got_f.astype(np.uint64) & sign) == (want_f.astype(np.uint64) & sign))
    return (got_f == want_f) | nan_ok


@pytest.mark.parametrize("tag", ["f16", "bf16"])
def test_every_16_bit_pattern_widens_exactly(lib, tag):
    bits = np.arange(1 << 16, dtype=np.uint16)
    got = _call(lib, f"widen_{tag}", bits, np.float32)
    want = bits.view(_LOW[tag]).astype(np.float32)
    bad = ~_same_bits_or_both_nan(got, want)
    assert not bad.any(), f"first mismatches at bits {bits[bad][:5]}"


def _float32_samples() -> np.ndarray:
    rng = np.random.default_rng(7)
    random_bits = rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
    # Every float32 near the 16-bit formats' ties, overflow thresholds and subnormal range, both signs.
    edges = np.concatenate(
        [
            np.arange(c - 4096, c + 4096, dtype=np.uint32)
            for c in (
                0x477FE000,
                0x477FF000,
                0x7F7F8000,
                0x38800000,
                0x33000000,
                0x3F800000,
                0x00000000 + 4096,
                0x7F800000 - 4096,
            )
        ]
    )
    bits = np.concatenate([random_bits, edges, edges | np.uint32(0x80000000)])
    return bits.view(np.float32)


@pytest.mark.parametrize("tag", ["f16", "bf16"])
def test_float32_narrows_with_one_round_to_nearest_even(lib, tag):
    x = _float32_samples()
    got = _call(lib, f"narrow_{tag}", x, np.uint16).view(_LOW[tag])
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(_LOW[tag])
    bad = ~_same_bits_or_both_nan(got, want)
    assert not bad.any(), f"first mismatches at {x[bad][:5]!r}"


@pytest.mark.parametrize("tag, dtype", [("f16", dt.float16), ("bf16", dt.bfloat16)])
def test_float64_narrows_once_not_through_float32(lib, tag, dtype):
    rng = np.random.default_rng(11)
    with np.errstate(invalid="ignore"):
        exact = _float32_samples()[: 1 << 18].astype(np.float64)
    # Halfway points of the 16-bit format nudged by less than a float32 ulp: rounding to float32 first
    # would land on the tie and round to even; one rounding goes the way of the nudge.
    low = rng.integers(0, 0x7BFF, size=1 << 16, dtype=np.uint16).view(_LOW[tag]).astype(np.float64)
    step = np.abs(np.nextafter(low.astype(_LOW[tag]), np.array(np.inf, _LOW[tag])).astype(np.float64) - low)
    nudged = low + step / 2 + np.where(rng.random(low.size) < 0.5, -1, 1) * step * 2.0**-30
    x = np.concatenate([exact, nudged, -nudged])
    got = _call(lib, f"narrow64_{tag}", x, np.uint16).view(_LOW[tag])
    with np.errstate(over="ignore", invalid="ignore"):
        want = dt.convert(x, dtype)
    bad = ~_same_bits_or_both_nan(got, want)
    assert not bad.any(), f"first mismatches at {x[bad][:5]!r}"
