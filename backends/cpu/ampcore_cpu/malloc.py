"""Keep freed tensor memory in the process instead of returning it to the OS.

Each training step frees and reallocates the same multi-megabyte arrays.
glibc serves blocks above M_MMAP_THRESHOLD with fresh mmap()s and trims the
heap on free, so every step page-faults its arrays in again (~2000 faults,
~15% of the reference MLP step).  Raising both thresholds makes freed blocks
reusable, which is what torch's caching CPU allocator achieves.  Process-wide
and glibc-only; set AMPCORE_CPU_MALLOC_TUNING=0 to leave malloc alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 64 << 20  # glibc's maximum for this setting on 64-bit
TRIM_THRESHOLD = 256 << 20

_applied: bool | None = None


def tune_malloc() -> bool:
    """Apply the thresholds once; returns whether they are in effect."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if os.environ.get("AMPCORE_CPU_MALLOC_TUNING", "1").strip().lower() in {"0", "false", "no", "off"}:
        return False
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return False
    # Order matters: the mmap threshold first, then the trim threshold.
    _applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _applied
