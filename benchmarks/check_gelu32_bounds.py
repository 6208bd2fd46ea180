"""Check the error bounds of the cpu backend's vectorized float32 GELU (ampcore_cpu._gelu32_numba) against libm
on every float32 ``x`` with |x| <= 12 (the fast path's range; 2.2e9 values).

The fast loops keep ``float32(r)`` only where Ziv's rounding test proves it is float32 of the libm value, which
is sound while ``|r - R| <= eps`` for every input; this measures the largest ``|r - R| / eps`` (forward, and the
backward's x-part at gy = 1) and exits 1 if any is above 1, 2 without numba.  Too slow for the test run (about
10 minutes on one core of a loaded 2-core Xeon): ``python benchmarks/check_gelu32_bounds.py``.  Measured there
(glibc): 2^-11 of the bound, 2^-5 in the forward's far left tail (see the module's docstring).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np

from ampcore_cpu import compiled

F32 = np.float32
STEP = 1 << 26


def _scanner(g: Any) -> Any:
    import numba  # only with numba: the script's whole subject

    inv, inv_sqrt_2pi = g._INV_SQRT2, g._INV_SQRT_2PI

    @numba.njit(error_model="numpy")
    def scan(lo: int, hi: int, sign: int) -> tuple[float, float, float, float]:  # pragma: no cover - compiled
        bits = np.empty(1, np.uint32)
        xs = bits.view(np.float32)
        qf = qb = 0.0
        at_f = at_b = 0.0
        for b in range(lo, hi):
            bits[0] = b | sign
            v = xs[0]
            big = np.float64(F32(0.5) * v) * (1.0 + math.erf(np.float64(v * inv)))
            r, eps, fits = g._gelu_fast(v)
            if fits and eps > 0 and abs(r - big) / eps > qf:
                qf, at_f = abs(r - big) / eps, v
            w = np.float64(v)
            big = 0.5 * math.erfc(-np.float64(v * inv)) + w * (inv_sqrt_2pi * math.exp(-0.5 * w * w))
            r, eps, fits = g._gelu_backward_fast(v, F32(1.0))
            if fits and eps > 0 and abs(r - big) / eps > qb:
                qb, at_b = abs(r - big) / eps, v
        return qf, at_f, qb, at_b

    return scan


def main() -> int:
    g = compiled.load("_gelu32_numba")
    if g is None:
        print(f"the cpu backend runs its {compiled.status().describe()}: nothing to check")
        return 2
    scan = _scanner(g)
    top = int(np.array([g._X_MAX], F32).view(np.uint32)[0]) + 1
    start, worst = time.perf_counter(), [0.0, 0.0, 0.0, 0.0]
    for sign in (0, 0x80000000):
        for lo in range(0, top, STEP):
            qf, at_f, qb, at_b = scan(lo, min(lo + STEP, top), sign)
            if qf > worst[0]:
                worst[:2] = qf, at_f
            if qb > worst[2]:
                worst[2:] = qb, at_b
    print(
        f"largest |r - R| / eps: forward {worst[0]:.3g} at x={worst[1]!r}, backward {worst[2]:.3g} at "
        f"x={worst[3]!r} ({time.perf_counter() - start:.0f} s)"
    )
    return 0 if max(worst[0], worst[2]) <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
