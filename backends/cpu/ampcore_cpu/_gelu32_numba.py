"""GELU (exact erf form) and its backward for float32 results, vectorized, with the bits of :mod:`._gelu_numba`.

Importing this imports numba (ImportError without it).  :mod:`._gelu_numba`
calls libm's ``erf``/``erfc``/``exp`` once per element, a scalar call each:
~7-20 ns an element, 22 of the transformer step's 66 ms.  Here each element
first takes a branch-free float64 path that LLVM vectorizes (AVX2/AVX-512): a
Chebyshev erfc (Numerical Recipes, 3rd ed., ``Erf::erfccheb``, 22 terms) and
a Cody-Waite ``exp``, each a polynomial by Estrin's scheme, a few 1e-14 from
libm's values.  Then Ziv's rounding test: with ``r`` the fast float64 value and ``eps`` a bound on its distance
to the libm value ``R``, the float32 result is ``float32(r)`` only where
``float32(r - eps) == float32(r + eps)`` and ``|r| > eps``: rounding is
monotone, so ``float32(R)`` (what :mod:`._gelu_numba` plus the cast gives)
is that same float32, sign of zero included.  Every other element (0.1-0.5%
of N(0, 4) values, most of them the forward's x < -4.4, where ``_K_ABS``
widens the test; every |x| > 12, inf, NaN, 0 and non-finite ``gy``) is
computed by :mod:`._gelu_numba`'s libm expression.  So the results are the same bits,
by construction; ``tests/test_cpu_gelu32.py`` checks it on millions of values.

The bounds hold with a margin, measured against this host's glibc over every
float32 ``x`` with |x| <= 12 (2.2e9 values; the forward against libm's value,
the backward's x-part at gy = 1): the largest error was 2^-11 of the bound
(``_K_FORWARD``, ``_K_BACKWARD``: relative to the value, and for the backward to
|Phi(x)| + |x phi(x)|, since the sum cancels near x = -0.75), and 2^-5 of it in
the forward's far left tail, where the libm expression was then 1 + erf(z),
which carries the rounding of erf(z) near -1 (half an ulp of 1 measured;
``_K_ABS`` allows 16 ulps).  The forward's libm expression is now
erfc(-z), relatively accurate there, so ``_K_ABS`` is a margin it no longer
needs.  A libm within an ulp or two of the true functions stays inside them.
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir
import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic

_F32 = np.float32
_INV_SQRT2 = _F32(1.0 / math.sqrt(2.0))  # the same float32 constant as _gelu_numba's
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_X_MAX = 12.0  # the fast path's range of |x|: exp's scale stays in _POW2, erfc away from underflow
_Z_MAX = 8.5  # |x / sqrt 2| for |x| <= 12 (8.4853 in float32), the bound the fast path checks
_FLT_MAX = float(np.finfo(np.float32).max)
_K_FORWARD = 2.0**-36  # see the module docstring
_K_BACKWARD = 2.0**-36
_K_ABS = 2.0**-49  # 1 + erf(z) to within 16 ulp of 1, for libm's erf near -1

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of ln 2: n * _LN2_HI is exact for |n| < 2^11
_LN2_LO = 1.90821492927058770002e-10


@intrinsic
def _as_float64(typingctx: Any, bits: Any) -> Any:  # pragma: no cover - compiled
    """The float64 whose bits are the int64 ``bits`` (a bitcast LLVM vectorizes, where a table lookup is not)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], llvmlite.ir.DoubleType())

    return types.float64(types.int64), codegen


# log(erfc(a) e^(a^2) / t) as a polynomial in y = 2t - 1, t = 2 / (2 + a): the first 22 terms of Numerical Recipes'
# Chebyshev series (3rd ed., Erf::erfccheb; the rest are under 1e-13) in the monomial basis (numpy.polynomial.
# chebyshev.cheb2poly, the constant term halved as NR's Clenshaw does), so Estrin's scheme can evaluate it: NR's
# Clenshaw recurrence is one 27-step chain of dependent operations that left the vectorized loop waiting on it.
_ERFC_P = (
    -0.6717940840566903, 0.6726432239778217, 0.04734330684133281,
    -0.04689561024571256, -0.00987268933950617, 0.008824938935285152,
    0.001758933059610464, -0.0023458170406137602, -0.00014624206378841602,
    0.00067370905235584, -9.376250539366399e-05, -0.000174425972878336,
    7.150155859763198e-05, 3.2065599373311995e-05, -3.0432771907583997e-05,
    -4.0638427955199917e-07, 8.966702268415998e-06, -2.352940777472e-06,
    -1.7233172234239995e-06, 8.549446451199999e-07, 1.64150378496e-07,
    -1.18182903808e-07,
)  # fmt: skip


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _exp(a: Any) -> Any:  # pragma: no cover - compiled
    """e^a for -90 < a < 5: 2^n e^r, |r| <= ln2 / 2, Taylor to r^13 (truncation under 1e-17) by Estrin's scheme."""
    n = math.floor(a * _LOG2E + 0.5)
    r = (a - n * _LN2_HI) - n * _LN2_LO
    r2 = r * r
    r4 = r2 * r2
    r8 = r4 * r4
    f0 = (1.0 + r) + (0.5 + r * (1.0 / 6.0)) * r2
    f1 = (1.0 / 24.0 + r * (1.0 / 120.0)) + (1.0 / 720.0 + r * (1.0 / 5040.0)) * r2
    f2 = (1.0 / 40320.0 + r * (1.0 / 362880.0)) + (1.0 / 3628800.0 + r * (1.0 / 39916800.0)) * r2
    f3 = 1.0 / 479001600.0 + r * (1.0 / 6227020800.0)
    p = (f0 + f1 * r4) + (f2 + f3 * r4) * r8
    return p * _as_float64((np.int64(n) + 1023) << 52)  # 2^n, a normal number for -90 < a < 5


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _erfc_pos(a: Any) -> Any:  # pragma: no cover - compiled
    """erfc(a) for 0 <= a <= 8.5: t e^(-a^2 + P(2t - 1)), t = 2 / (2 + a), P = _ERFC_P by Estrin's scheme."""
    t = 2.0 / (2.0 + a)
    y = 2.0 * t - 1.0
    c = _ERFC_P
    y2 = y * y
    y4 = y2 * y2
    y8 = y4 * y4
    y16 = y8 * y8
    r0 = (c[0] + c[1] * y) + (c[2] + c[3] * y) * y2
    r1 = (c[4] + c[5] * y) + (c[6] + c[7] * y) * y2
    r2 = (c[8] + c[9] * y) + (c[10] + c[11] * y) * y2
    r3 = (c[12] + c[13] * y) + (c[14] + c[15] * y) * y2
    r4 = (c[16] + c[17] * y) + (c[18] + c[19] * y) * y2
    r5 = c[20] + c[21] * y
    p = ((r0 + r1 * y4) + (r2 + r3 * y4) * y8) + (r4 + r5 * y4) * y16
    return t * _exp(p - a * a)


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _gelu_libm(v: Any) -> Any:  # pragma: no cover - compiled
    """_gelu_numba.gelu's expression for one element, rounded to float32."""
    return _F32(np.float64(_F32(0.5) * v) * math.erfc(-np.float64(v * _INV_SQRT2)))


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _gelu_backward_libm(v: Any, g: Any) -> Any:  # pragma: no cover - compiled
    """_gelu_numba.gelu_backward's expression for one element, rounded to float32."""
    w = np.float64(v)
    cdf = 0.5 * math.erfc(-np.float64(v * _INV_SQRT2))
    return _F32(np.float64(g) * (cdf + w * (_INV_SQRT_2PI * math.exp(-0.5 * w * w))))


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _gelu_fast(v: Any) -> Any:  # pragma: no cover - compiled
    """(r, eps, in range): the fast value of 0.5 v erfc(-v / sqrt 2) and its error bound."""
    z = np.float64(v * _INV_SQRT2)
    a = abs(z)
    fits = a <= _Z_MAX  # False for NaN
    e = _erfc_pos(a if fits else 0.0)
    h = np.float64(_F32(0.5) * v)
    s = (2.0 - e) if z >= 0.0 else e  # 1 + erf(z) = 2 - erfc(z) = erfc(-z)
    # _K_ABS: the absolute margin 1 + erf(z) needed when it was the libm expression (kept: it only sends more
    # elements of the far left tail to the libm path)
    return h * s, abs(h) * (_K_FORWARD * s + _K_ABS), fits


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _gelu_backward_fast(v: Any, g: Any) -> Any:  # pragma: no cover - compiled
    """(r, eps, in range): the fast value of g (Phi(v) + v phi(v)) and its error bound."""
    w = np.float64(v)
    z = np.float64(v * _INV_SQRT2)
    a = abs(z)
    gw = np.float64(g)
    fits = (a <= _Z_MAX) & (abs(gw) <= _FLT_MAX)  # False for NaN
    a = a if fits else 0.0
    w = w if fits else 0.0
    e = _erfc_pos(a)
    cdf = 0.5 * (e if z <= 0.0 else 2.0 - e)  # erfc(-z)
    tail = w * (_INV_SQRT_2PI * _exp(-0.5 * w * w))
    r = gw * (cdf + tail)
    return r, abs(gw) * (_K_BACKWARD * (cdf + abs(tail))) + 2.0**-50 * abs(r), fits


@numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
def _decided(r: Any, eps: Any, fits: Any) -> Any:  # pragma: no cover - compiled
    """Whether float32(r) is float32 of every value within eps of r (Ziv's test), sign of zero included."""
    return fits & (_F32(r - eps) == _F32(r + eps)) & (abs(r) > eps)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def gelu(x: Any, out: Any, ok: Any) -> int:  # pragma: no cover - compiled
    """float32 ``x`` -> float32 ``out`` (flat, one length; ``ok`` a bool scratch of that length): float32 of
    _gelu_numba.gelu's value.  Returns how many elements took the libm path."""
    for i in range(x.size):  # the vectorized pass (one loop over whole arrays: a blocked one did not vectorize)
        r, eps, fits = _gelu_fast(x[i])
        out[i] = _F32(r)
        ok[i] = _decided(r, eps, fits)
    slow = 0
    for i in range(x.size):
        if not ok[i]:
            out[i] = _gelu_libm(x[i])
            slow += 1
    return slow


@numba.njit(nogil=True, cache=True, error_model="numpy")
def gelu_backward(x: Any, gy: Any, out: Any, ok: Any) -> int:  # pragma: no cover - compiled
    """float32 ``x``, ``gy`` -> float32 ``out`` (``ok`` a bool scratch): float32 of _gelu_numba.gelu_backward's
    value.  Returns how many elements took the libm path."""
    for i in range(x.size):
        r, eps, fits = _gelu_backward_fast(x[i], gy[i])
        out[i] = _F32(r)
        ok[i] = _decided(r, eps, fits)
    slow = 0
    for i in range(x.size):
        if not ok[i]:
            out[i] = _gelu_backward_libm(x[i], gy[i])
            slow += 1
    return slow
