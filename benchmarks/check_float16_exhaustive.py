"""Check the cpu backend's float32 -> float16 conversion against NumPy's on all 2**32 float32 bit patterns, and
the fused loops' rounding to float16 precision (``round_f16``, float32 -> float32) against NumPy's round trip.

Too slow for the test run (about a minute with numba; NumPy's own conversion of 4 billion elements is most
of it), so it is a script: ``python benchmarks/check_float16_exhaustive.py``.  It prints the number of
mismatching inputs (the first few, if any) and exits 1 on any mismatch, 2 when numba is not installed (the
conversion is then NumPy's own and there is nothing to check).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from ampcore_cpu import halfconv

BLOCK = 1 << 24


def main() -> int:
    if halfconv.engine() != "numba":
        print("numba is not installed: the cpu backend converts with NumPy's astype; nothing to check")
        return 2
    round_trip = _round_trip_loop()
    start, mismatches, shown = time.perf_counter(), 0, []
    trip_mismatches, trip_shown = 0, []
    base = np.arange(BLOCK, dtype=np.uint32)
    rounded = np.empty(BLOCK, np.float32)
    for high in range(1 << 32 - 24):
        bits = base + np.uint32(high << 24)
        with np.errstate(all="ignore"):
            expected = bits.view(np.float32).astype(np.float16).view(np.uint16)
        got = halfconv.to_float16(bits.view(np.float32)).view(np.uint16)
        bad = np.flatnonzero(got != expected)
        mismatches += bad.size
        shown += [(int(bits[i]), int(got[i]), int(expected[i])) for i in bad[: 5 - len(shown)]]
        round_trip(bits.view(np.float32), rounded)
        want = expected.view(np.float16).astype(np.float32).view(np.uint32)
        bad = np.flatnonzero(rounded.view(np.uint32) != want)
        trip_mismatches += bad.size
        trip_shown += [
            (int(bits[i]), int(rounded.view(np.uint32)[i]), int(want[i])) for i in bad[: 5 - len(trip_shown)]
        ]
    print(
        f"float32 -> float16 over all 2**32 inputs: {mismatches} mismatches against NumPy "
        f"{np.__version__} ({time.perf_counter() - start:.0f} s)"
    )
    for w, got, want in shown:
        print(f"  0x{w:08x}: got 0x{got:04x}, NumPy 0x{want:04x}")
    print(f"round_f16 (float32 -> float16 -> float32) over all 2**32 inputs: {trip_mismatches} mismatches")
    for w, got, want in trip_shown:
        print(f"  0x{w:08x}: got 0x{got:08x}, NumPy 0x{want:08x}")
    return 1 if mismatches or trip_mismatches else 0


def _round_trip_loop():  # type: ignore[no-untyped-def]
    """A compiled flat loop of the element the fused loops inline (:func:`ampcore_cpu._lowp_numba.round_f16`)."""
    import numba

    from ampcore_cpu._lowp_numba import round_f16

    @numba.njit
    def run(src, out):  # type: ignore[no-untyped-def]
        for i in range(src.size):
            out[i] = round_f16(src[i])

    return run


if __name__ == "__main__":
    sys.exit(main())
