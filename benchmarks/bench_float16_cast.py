"""float32 <-> float16 conversion on the cpu backend: NumPy's astype, the NumPy-integer-ops alternative,
and :mod:`ampcore_cpu.halfconv` (numba), in ms per million elements, side by side in one run.

``python benchmarks/bench_float16_cast.py [--elements N] [--repeat R]``; prints one line per method and the
speedups over NumPy's astype.  No result is asserted anywhere: the bits are checked by
tests/test_cpu_halfconv.py and benchmarks/check_float16_exhaustive.py.
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

from ampcore_cpu import halfconv


def _integer_ops_down(f: np.ndarray) -> np.ndarray:
    """Round to float16 with whole-array NumPy integer/float ops (FP16 library's trick, NaN payloads kept)."""
    with np.errstate(all="ignore"):
        w = f.view(np.uint32)
        base = (np.abs(f) * np.float32(2.0**112)) * np.float32(2.0**-110)
        shl1 = w + w
        bias = np.maximum(shl1 & np.uint32(0xFF000000), np.uint32(0x71000000))
        base += ((bias >> np.uint32(1)) + np.uint32(0x07800000)).view(np.float32)
        bits = base.view(np.uint32)
        bits = ((bits >> np.uint32(13)) & np.uint32(0x7C00)) + (bits & np.uint32(0xFFF))
        nan = np.uint32(0x7C00) | ((w & np.uint32(0x7FFFFF)) >> np.uint32(13))
        nan |= nan == np.uint32(0x7C00)
        bits = np.where(shl1 > np.uint32(0xFF000000), nan, bits) | ((w >> np.uint32(16)) & np.uint32(0x8000))
        return bits.astype(np.uint16).view(np.float16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    x = (np.random.default_rng(0).standard_normal(args.elements) * 100).astype(np.float32)
    h = x.astype(np.float16)
    assert np.array_equal(_integer_ops_down(x).view(np.uint16), h.view(np.uint16))
    halfconv.to_float16(x), halfconv.to_float32(h)  # compile before timing
    per_million = 1e3 * (1 << 20) / args.elements

    def ms(fn) -> float:
        return min(timeit.repeat(fn, number=3, repeat=args.repeat)) / 3 * per_million

    rows = {
        "copy (float32)": ms(x.copy),
        "float32->float16 NumPy astype": ms(lambda: x.astype(np.float16)),
        "float32->float16 NumPy integer ops": ms(lambda: _integer_ops_down(x)),
        f"float32->float16 halfconv ({halfconv.engine()})": ms(lambda: halfconv.to_float16(x)),
        "float16->float32 NumPy astype": ms(lambda: h.astype(np.float32)),
        f"float16->float32 halfconv ({halfconv.engine()})": ms(lambda: halfconv.to_float32(h)),
    }
    for name, t in rows.items():
        print(f"{name:45s} {t:7.3f} ms per million elements")
    names = list(rows)
    print(
        f"halfconv speedup over astype: down {rows[names[1]] / rows[names[3]]:.1f}x, "
        f"up {rows[names[4]] / rows[names[5]]:.1f}x"
    )


if __name__ == "__main__":
    main()
