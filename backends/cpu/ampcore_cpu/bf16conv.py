"""float32 -> bfloat16 rounding, bit for bit ml_dtypes', compiled with numba where it is installed.

ml_dtypes' cast takes 0.53 ms per million elements on a 2-core Zen 3 (no
AVX-512 BF16); the same round-to-nearest-even on the bit pattern as one
compiled integer loop takes 0.39, 0.44 with the output's allocation (0.18 for
a copy): a modest gain, taken because every bfloat16 op's output goes through it.  The other direction is a
16-bit shift that ml_dtypes already does at copy speed, so it stays ml_dtypes'.

On the NumPy fallback path (:mod:`.compiled`: numba not installed or
``AMPCORE_CPU_NO_NUMBA=1``) the cast is ml_dtypes' ``astype``.  The bits are ml_dtypes': every bfloat16 value and a
structured float32 sample in ``tests/test_cpu_halfconv.py``, all 2**32 float32
inputs by ``benchmarks/check_bfloat16_exhaustive.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from . import compiled
from .halfconv import convert_bits

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
# Below this many elements ml_dtypes' cast is as fast as the compiled loop with its call and array setup
# (1.1 against 1.7 us at 1024 elements, 4.3 against 5.3 at 4096; 2-core Xeon, under load): a small op's
# output, such as autocast's 16x64 activations, takes it.
SMALL = 4096


@functools.cache
def _engine() -> Callable[..., None] | None:
    """The compiled loop of :mod:`._bf16conv_numba`, or None on the NumPy fallback path."""
    loops = compiled.load("_bf16conv_numba")
    return None if loops is None else loops.down


def engine() -> str:
    """Which conversion runs: ``"numba"`` or ``"ml_dtypes"`` (the fallback path)."""
    return "numba" if _engine() is not None else "ml_dtypes"


def to_bfloat16(a: np.ndarray) -> np.ndarray:
    """A float32 array rounded to bfloat16 (a new array), exactly as ``a.astype(ml_dtypes.bfloat16)``."""
    down: Any = _engine()
    if down is None or a.dtype != F32 or a.size < SMALL:
        return a.astype(BF16)
    return convert_bits(a, BF16, np.uint32, np.uint16, down)
