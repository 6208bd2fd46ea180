"""The cpu backend's 16-bit and float8 GEMMs: oneMKL's low-precision routines, or float32 sgemm on widened copies.

Two paths compute every bfloat16/float16 ``matmul`` (linear layers and the convolutions' im2col products,
forward and backward, go through it) and every float8 ``scaled_mm``:

- **widened**: each operand widened to float32, NumPy's sgemm (OpenBLAS), the result rounded once;
- **mkl**: oneMKL's ``cblas_gemm_bf16bf16f32`` / ``f16f16f32`` / ``e4m3e4m3f32`` / ``e5m2e5m2f32``
  (:mod:`.mkl`) on the operands as they are, a transposed view passed as ``CblasTrans``, a batch as one call
  per matrix (with no copies), into a float32 result rounded once.

Both take float32 products, which are exact (a product of two bfloat16, float16 or float8 values fits
float32's 24 bits; float8 operands of different formats are widened exactly to bfloat16 first), accumulate in
float32 and round once: they differ in summation order only.  (The AMX and AVX512-BF16 dot-product
instructions treat denormal inputs and results as zero, per Intel's manual: where oneMKL runs them, a term
below 2**-126 may be lost.  On the AMD EPYC this was written on, oneMKL runs its generic kernels, and its
bfloat16 and float16 GEMMs kept subnormal inputs and sums exact.)

The choice is made per dtype (``bfloat16``, ``float16``, ``float8``), once per process, by :func:`choose`:
``AMPCORE_CPU_GEMM=mkl`` or ``=widened`` forces it; otherwise (``auto``) :data:`PROBE_SHAPE` products are
timed each way on the process's threads, MKL's with its rounding and the widened one with its widening, and
the faster is kept, for that thread count (``ampcore.set_num_threads`` to another probes again).
``ampcore info`` shows each choice and the ratio measured (:func:`GemmChoice.describe`).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from . import mkl, threads

__all__ = [
    "GemmChoice",
    "choose",
    "chosen",
    "key",
    "product",
    "float8_sums",
    "install_tip",
    "would_buy",
    "would_help",
    "PROBE_SHAPE",
]

F32 = np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
# The timed product: big enough that a GEMM's rate shows (0.27 GFLOP), small enough that probing costs a few
# ms per dtype.  Its shapes sit among the benchmark models' linear layers (784x1024 and 256x768, batch 256).
PROBE_SHAPE = (256, 512, 512)
# The probe times pairs of products, one by each path back to back, each path first in half of them, on the
# process's threads, after one untimed product each; the speedup is the median of the pairs' ratios, and oneMKL is
# kept only when it is more than MARGIN times faster.  A choice holds for one thread count: on the 2-core AMD EPYC
# (Zen 5) this was built on, oneMKL's bfloat16 GEMM was 1.5x the widened path on one thread (and the mlp's
# bfloat16 AMP step 1.29x its float32 step, against 0.94x widened), but on two threads it was 0.35-0.94x (and the
# step 0.59x, against 0.85x), measured with oneMKL forced.  Timed on one thread while the process ran on two, the
# probe chose oneMKL there too, and the step ran at half speed.  A pair runs under one load, the median drops the
# pairs a slowdown split, and the margin keeps the path that needs no extra library where the two are close; on a
# busy host the ratio on two threads still wanders, as the steps themselves do.
PROBE_PAIRS = 15
MARGIN = 1.1
# Where oneMKL says it runs its generic code path (``mkl_get_version``'s processor: it did on an AMD EPYC Zen 5,
# which has avx512_bf16), auto keeps the widened path without timing: there the probe's 30 ms did not predict a
# training step.  oneMKL's calls wait on its OpenMP threads, which a loaded host leaves unscheduled: at load 3-4
# the mlp's bfloat16 AMP step took 65 ms on oneMKL against 27 widened (one thread; 19 against 26 when quiet),
# the cnn's float16 step 101 ms against 29, and the probe had chosen oneMKL for them.
GENERIC = "oneMKL runs its generic kernels on this CPU, slower in training steps here; AMPCORE_CPU_GEMM=mkl uses it"
# The 16-bit dot-product units of the CPU that oneMKL's kernels for each kind can use (its float8 GEMM, and the
# bfloat16 one that mixed float8 formats go to, run on the bfloat16 units).
UNITS = {"bfloat16": ("amx_bf16", "avx512_bf16"), "float16": ("amx_fp16",), "float8": ("amx_bf16", "avx512_bf16")}


@dataclass(frozen=True)
class GemmChoice:
    """Which path runs ``kind``'s GEMMs here: ``mkl`` or not (widened), and why.

    ``speedup`` is the widened product's time over MKL's at :data:`PROBE_SHAPE` (None where not measured).
    """

    kind: str
    mkl: bool
    reason: str
    speedup: float | None = None
    threads: int | None = None

    def describe(self) -> str:
        """``oneMKL (AMX kernels), 1.90x widened sgemm (256x512x512, 2 threads)`` or ``widened sgemm (why)``."""
        if not self.mkl:
            return f"widened sgemm ({self.reason})"
        kernels = f"{mkl.short_code_path(mkl.status().code_path)} kernels"
        if self.speedup is None:
            return f"oneMKL ({kernels}; {self.reason})"
        return f"oneMKL ({kernels}), {self.speedup:.2f}x widened sgemm ({_where(self.threads)})"


_chosen: dict[tuple[str, int | None], GemmChoice] = {}
_lock = threading.Lock()


def _where(n: int | None) -> str:
    shape = "x".join(map(str, PROBE_SHAPE))
    return f"{shape}, {n} thread{'' if n == 1 else 's'}" if n is not None else shape


def key(kind: str) -> tuple[str, int | None]:
    """Where ``kind``'s choice is kept: it holds for the thread count ``ampcore.set_num_threads`` set."""
    return kind, threads.wanted()


def chosen(kind: str) -> GemmChoice | None:
    """The choice already made for ``kind`` at this thread count, or None (never probes)."""
    return _chosen.get((kind, threads.wanted()))


def would_help(kind: str) -> bool:
    """Whether oneMKL's ``kind`` GEMM has units to run on here: an Intel CPU with AMX or AVX512-BF16 (AMX-FP16 for
    float16).  oneMKL took its generic kernels on an AMD EPYC with avx512_bf16 (benchmarks/README.md)."""
    return mkl.cpu_vendor() == "GenuineIntel" and any(u in mkl.cpu_flags() for u in UNITS[kind])


def would_buy(kind: str) -> str:
    """What oneMKL would buy ``kind``'s GEMMs on this CPU, for the message where it is not loaded."""
    units = [u for u in UNITS[kind] if u in mkl.cpu_flags()]
    if not units:
        return f"this CPU has no {kind} dot-product units, so oneMKL would gain little over sgemm"
    if mkl.cpu_vendor() != "GenuineIntel":
        return (
            f"this CPU has {' and '.join(units)}, but oneMKL ran its generic kernels on a non-Intel CPU, an AMD EPYC "
            "Zen 5 (1.5x widened sgemm on one thread, 0.35-0.94x on two; benchmarks/README.md)"
        )
    return f"this CPU has {' and '.join(units)}, which oneMKL's {kind} GEMM would use"


def install_tip() -> str | None:
    """The line ``ampcore train`` prints where the mkl extra is not installed and would help on this CPU, else None
    (and None where ``AMPCORE_CPU_GEMM=widened`` asks for no oneMKL).  Reads no library: cheap."""
    try:
        if mkl.gemm_mode() == "widened" or mkl.installed():
            return None
    except ValueError:  # a bad AMPCORE_CPU_GEMM: the first product says so, with the fix
        return None
    kinds = [kind for kind in ("bfloat16", "float16") if would_help(kind)]
    if not kinds:
        return None
    units = sorted({u for kind in kinds for u in UNITS[kind] if u in mkl.cpu_flags()})
    return (
        f"pip install 'ampcore-cpu[mkl]': this CPU has {' and '.join(units)}, which oneMKL's "
        f"{' and '.join(kinds)} GEMMs would use for autocast's matmuls, linear and conv layers"
    )


def _time(fn: Callable[[], object]) -> float:
    """Wall time, not this thread's CPU time: a oneMKL call on one thread still waits for its OpenMP runtime,
    and the wait is part of its cost (0.6-0.7 ms of a 1.3-1.4 ms bfloat16 product on an AMD EPYC Zen 5)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _probe(kind: str, candidates: Callable[[], tuple[Callable[[], object], Callable[[], object]]]) -> GemmChoice:
    mode = mkl.gemm_mode()
    if mode == "widened":
        return GemmChoice(kind, False, f"{mkl.ENV_GEMM}=widened is set")
    found = mkl.status()
    if not found.enabled:
        return GemmChoice(kind, False, f"{found.reason}; {would_buy(kind)}")
    if mode == "mkl":
        return GemmChoice(kind, True, f"{mkl.ENV_GEMM}=mkl is set")
    if mkl.short_code_path(found.code_path) == "generic":
        return GemmChoice(kind, False, GENERIC)
    with_mkl, widened = candidates()
    with_mkl(), widened()  # each path's first call: MKL's dispatch, OpenBLAS's buffers
    ratios = []
    for i in range(PROBE_PAIRS):
        if i % 2:  # each path first in half the pairs
            widened_s, mkl_s = _time(widened), _time(with_mkl)
        else:
            mkl_s, widened_s = _time(with_mkl), _time(widened)
        ratios.append(widened_s / mkl_s)
    speedup = statistics.median(ratios)
    n = threads.wanted()
    if speedup > MARGIN:
        return GemmChoice(kind, True, "", speedup, n)
    kernels = mkl.short_code_path(found.code_path)
    return GemmChoice(kind, False, f"faster here: oneMKL's {kernels} kernels {speedup:.2f}x, {_where(n)}", speedup, n)


def choose(kind: str, candidates: Callable[[], tuple[Callable[[], object], Callable[[], object]]]) -> GemmChoice:
    """``kind``'s path in this process, chosen on first use: ``candidates()`` returns two callables, one
    :data:`PROBE_SHAPE` product by MKL and one by the widened path, each with its conversions."""
    where = key(kind)
    found = _chosen.get(where)
    if found is None:
        with _lock:  # one probe per kind and thread count, even when threads race to the first product
            found = _chosen.get(where)
            if found is None:
                found = _chosen[where] = _probe(kind, candidates)
    return found


def probe_operands(dtype: np.dtype, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The probe's (m, k) and (k, n) operands in ``dtype``: standard normal values, rounded."""
    m, k, n = PROBE_SHAPE
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k), F32).astype(dtype), rng.standard_normal((k, n), F32).astype(dtype)


# --------------------------------------------------------------------------- the MKL path
def _zero_or_empty(out: np.ndarray, k: int) -> bool:
    """Fill ``out`` for a product with no work (no rows, columns or K); True when there was none to do."""
    if out.size == 0:
        return True
    if k == 0:
        out.fill(0.0)
        return True
    return False


def _fits_int32(*sizes: int) -> bool:
    return max(sizes) <= mkl.INT_MAX


def _gemm2d(fn: Callable[..., None], a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = a @ b`` for 2-D operands; float32 sgemm of exact float32 copies past MKL's 32-bit sizes."""
    (m, k), n = a.shape, b.shape[1]
    if _zero_or_empty(out, k):
        return
    if not _fits_int32(m, n, k, *(s // a.itemsize for s in a.strides + b.strides)):
        np.matmul(a.astype(F32), b.astype(F32), out=out)
        return
    mkl.gemm(fn, a, b, out)


def _offsets(strides: tuple[int, ...], shape: tuple[int, ...]) -> list[int]:
    """The byte offset of each matrix of a batch with ``shape`` and ``strides`` (0 where broadcast), in C order."""
    off = np.zeros(shape, np.int64)
    for axis, (stride, size) in enumerate(zip(strides, shape)):
        off += (np.arange(size, dtype=np.int64) * stride).reshape((size,) + (1,) * (len(shape) - axis - 1))
    return off.reshape(-1).tolist()


def _batched(fn: Callable[..., None], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(..., m, k) @ (..., k, n), batch dimensions broadcast: one MKL call per matrix, with no copy unless a
    matrix's own strides fit no BLAS layout."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = np.empty(batch + (m, n), F32)
    if _zero_or_empty(out, k):
        return out
    if mkl.layout(a[(0,) * (a.ndim - 2)]) is None:
        a = np.ascontiguousarray(a)
    if mkl.layout(b[(0,) * (b.ndim - 2)]) is None:
        b = np.ascontiguousarray(b)
    ab = np.broadcast_to(a, batch + (m, k))
    bb = np.broadcast_to(b, batch + (k, n))
    (ta, lda), (tb, ldb) = mkl.layout(ab[(0,) * len(batch)]), mkl.layout(bb[(0,) * len(batch)])  # type: ignore[misc]
    if not _fits_int32(m, n, k, lda, ldb):
        np.matmul(a.astype(F32), b.astype(F32), out=out)
        return out
    ldc, base_a, base_b, base_c = n, ab.ctypes.data, bb.ctypes.data, out.ctypes.data
    offsets = zip(_offsets(ab.strides[: len(batch)], batch), _offsets(bb.strides[: len(batch)], batch))
    for i, (oa, ob) in enumerate(offsets):
        fn(mkl.ROW_MAJOR, ta, tb, m, n, k, 1.0, base_a + oa, lda, base_b + ob, ldb, 0.0, base_c + i * m * n * 4, ldc)
    return out


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` as a float32 array, by MKL's routine for their dtype (same for both, loaded: see :func:`choose`).

    A batched ``a`` whose rows are one contiguous run times a 2-D ``b`` is one (batch * m, k) product.
    """
    fn = mkl.routine(a.dtype)
    assert fn is not None, f"no oneMKL GEMM for {a.dtype}"  # callers asked choose() first
    if a.ndim == 2 and b.ndim == 2:
        out = np.empty((a.shape[0], b.shape[1]), F32)
        _gemm2d(fn, a, b, out)
        return out
    if b.ndim == 2 and a.flags.c_contiguous and a.shape[-2] > 1:
        k = a.shape[-1]
        folded = np.empty((math.prod(a.shape[:-1]), b.shape[1]), F32)
        _gemm2d(fn, a.reshape(folded.shape[0], k), b, folded)
        return folded.reshape(a.shape[:-1] + (b.shape[1],))
    return _batched(fn, a, b)


# --------------------------------------------------------------------------- float8
def _bf16_table(dtype: np.dtype) -> np.ndarray:
    """Each of the 256 codes of a float8 ``dtype`` as bfloat16 bits: exact (3 or 2 mantissa bits, and
    exponents within bfloat16's normal range), NaN and inf kept."""
    codes = np.arange(256, dtype=np.uint8).view(dtype)
    return codes.astype(F32).astype(BF16).view(np.uint16)


_TABLES = {np.dtype(d): _bf16_table(np.dtype(d)) for d in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)}


def _as_bf16(x: np.ndarray) -> np.ndarray:
    """A float8 array as bfloat16, exactly, in its own layout (a transposed view stays one)."""
    return np.take(_TABLES[x.dtype], x.view(np.uint8)).view(BF16)


def float8_sums(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The float32 sums of a 2-D float8 ``a @ b``, unscaled: MKL's float8 routine where both operands share a
    format it has one for, else MKL's bfloat16 routine on exact bfloat16 copies."""
    if a.dtype != b.dtype or mkl.routine(a.dtype) is None:
        a, b = _as_bf16(a), _as_bf16(b)
    return product(a, b)
