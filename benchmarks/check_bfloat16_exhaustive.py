"""Compare the cpu backend's compiled float32 -> bfloat16 rounding with ml_dtypes' on all 2**32 float32 inputs.

Not part of the test run (24 s on one core of a 2-core Zen 3: numba and ml_dtypes are both fast);
``tests/test_cpu_bf16conv.py`` checks a structured sample and every bfloat16 value.

    python benchmarks/check_bfloat16_exhaustive.py
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

from ampcore_cpu import bf16conv

BLOCK = 1 << 24


def main() -> int:
    if bf16conv.engine() != "numba":
        print("numba is not installed: bfloat16 rounding is ml_dtypes' own; nothing to compare")
        return 0
    start, mismatches = time.perf_counter(), 0
    for first in range(0, 1 << 32, BLOCK):
        x = np.arange(first, first + BLOCK, dtype=np.uint64).astype(np.uint32).view(np.float32)
        got = bf16conv.to_bfloat16(x).view(np.uint16)
        with np.errstate(invalid="ignore"):  # ml_dtypes warns on NaN inputs
            want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
        bad = np.flatnonzero(got != want)
        mismatches += bad.size
        for i in bad[:3]:
            print(f"0x{int(x.view(np.uint32)[i]):08x}: 0x{int(got[i]):04x} != 0x{int(want[i]):04x}")
    print(f"{mismatches} mismatches on all 2**32 float32 inputs ({time.perf_counter() - start:.0f} s)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
