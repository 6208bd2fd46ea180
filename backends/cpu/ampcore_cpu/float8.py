"""Float8 kernels of the CPU backend: exact through ml_dtypes and a float32 BLAS GEMM.

``quantize_float8`` scales in float32, then rounds to float8 with one
compiled integer loop where numba is installed (:mod:`._float8_numba`, the
saturation folded in: 47 ms per 16M values on a 2-core Xeon, against 500 ms
for ml_dtypes' cast), else with ml_dtypes' cast after a clamp; the bits are
ml_dtypes' either way (tests/test_float8.py: every float16 and bfloat16 value
and a structured float32 sample).  The amax is NumPy's ``max`` of ``|x|``.
``quantize_float8_current`` (the training recipes' cast) is one compiled call: the amax pass, the scale
rule in float32 and the rounding pass, bfloat16 inputs widened in the loop.  The rounding loop has no branch,
so it vectorizes, in 32-bit lanes (1M values: 461 -> 82 µs on a 2-core AMD EPYC Zen 5).
``scaled_mm`` runs one of two paths, chosen once per process and thread count (:mod:`.lowp_gemm`):

- **mkl**: oneMKL's float8 GEMM (``cblas_gemm_e4m3e4m3f32`` / ``e5m2e5m2f32``; operands of two formats go
  as exact bfloat16 copies to ``cblas_gemm_bf16bf16f32``) gives the unscaled float32 sums, whose products
  are exact; the scales multiply the sums, per tensor or per row and column, as a GPU's float8 GEMM does.
- **widened**: the operands scaled in float32 (a float8 value times a float32 scale, rounded once; by a
  256-entry table, :func:`scaled_float32`), then sgemm (float32 accumulation, as torch's CPU ``_scaled_mm``).

Both add the bias in float32 and round once to ``out_dtype``.  They differ by float32 rounding: the
contract (``ampcore.kernels``) allows either.  Non-finite scales take the widened path, whose
``inf * 0 = NaN`` in the operands is the contract's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ampcore import dtypes as dt

from . import compiled, lowp_gemm
from .kernels import BF16, F32, _down, _gemm, _quiet, _up

_MAX = {d.numpy: np.float32(dt.finfo(d).max) for d in (dt.float8_e4m3fn, dt.float8_e5m2)}
_E4M3 = dt.float8_e4m3fn.numpy


@functools.cache
def _loops() -> Any:
    """:mod:`._float8_numba`, or None on the NumPy fallback path."""
    return compiled.load("_float8_numba")


def _engine() -> Callable[..., None] | None:
    """The compiled float32 -> float8 rounding loop, or None on the NumPy fallback path."""
    loops = _loops()
    return None if loops is None else loops.round_codes


def engine() -> str:
    """Which float32 -> float8 rounding runs: ``"numba"`` or ``"ml_dtypes"`` (the NumPy fallback path)."""
    return "numba" if _engine() is not None else "ml_dtypes"


def to_float8(y: np.ndarray, target: np.dtype, saturate: bool) -> np.ndarray:
    """A C-contiguous float32 ``y`` rounded to the float8 ``target``, clamped to +-max first when ``saturate``
    (NaN stays NaN); exactly ``np.clip(y, -max, max).astype(target)`` (without the clip if not saturating)."""
    run = _engine()
    if run is None or y.size < 1024:
        if saturate:
            m = _MAX[target]
            y = np.clip(y, -m, m)  # NaN stays NaN
        return y.astype(target)
    out = np.empty(y.shape, np.uint8)
    run(y.reshape(-1).view(np.uint32), out.reshape(-1), target == _E4M3, bool(saturate))
    return out.view(target)


def quantize_float8(x: np.ndarray, scale: np.ndarray, dtype: Any, saturate: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(cast(x * scale, dtype), max|x|)``; see the kernel contract in ``ampcore.kernels``."""
    target = dtype.numpy
    x32 = _up(x) if x.dtype != F32 else x
    y = np.multiply(x32, scale, dtype=F32)  # a new C-contiguous array
    amax = np.abs(x32).max() if x32.size else np.float32(0)
    return to_float8(y, target, saturate), np.asarray(amax, dtype=F32)


def quantize_float8_current(
    x: np.ndarray, dtype: Any, eps: float, rowwise: bool, round_pow2: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """float8's cast with current scaling in one call: ``(q, scale, 1 / scale, max|x|)``; see the kernel contract.

    The composition it replaces (abs, max, the scale rule, quantize_float8, the inverse) is six kernel calls,
    each with its own pass or its own Python: on the digits MLP's (64, 128) bfloat16 activations it took
    ~25 µs per cast in a captured step, NumPy's passes in one call ~12, the compiled loop ~5 (2-core AMD EPYC
    Zen 5).  The NumPy passes below are the fallback path's, and an empty input's.
    """
    target = dtype.numpy
    loops = _loops()
    if loops is not None and x.size:  # an empty row cannot be reshaped to (rows, -1)
        return _compiled_cast(loops, x, target, eps, rowwise, round_pow2, False)[:4]
    x32 = _up(x) if x.dtype != F32 else x
    magnitude = np.abs(x32)
    if x32.size == 0:
        amax = np.zeros((x32.shape[0], 1) if rowwise else (), F32)
    else:
        amax = np.asarray(magnitude.max(axis=1, keepdims=True) if rowwise else magnitude.max(), F32)
    if amax.ndim == 0:  # per tensor: the same float32 operations on NumPy scalars, without array overhead
        a = amax[()]
        s = _MAX[target] / max(a, np.float32(eps)) if a < np.float32(np.inf) else np.float32(1.0)
        scale = np.asarray(np.ldexp(np.float32(0.5), np.frexp(s)[1]) if round_pow2 else s, F32)
    else:
        finite = amax < np.float32(np.inf)  # false for inf and NaN
        scale = np.where(finite, _MAX[target] / np.maximum(amax, np.float32(eps)), np.float32(1.0)).astype(F32)
        if round_pow2:  # 2 ** floor(log2(scale)): frexp reads the exponent (every scale here is a finite normal)
            scale = np.asarray(np.ldexp(np.float32(0.5), np.frexp(scale)[1]), F32)
    q = to_float8(np.multiply(x32, scale, dtype=F32), target, True)
    return q, scale, np.asarray(np.float32(1.0) / scale, F32), amax


def _compiled_cast(
    loops: Any, x: np.ndarray, target: np.dtype, eps: float, rowwise: bool, round_pow2: bool, dequantize: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`quantize_float8_current` as one compiled loop: the amax pass and the scaled rounding pass per row
    (per tensor unless ``rowwise``), and the scale rule between them in float32, as the NumPy composition
    computes it, on ``x`` as a 2-D array.  A (64, 128) bfloat16 cast: ~12 -> ~3.6 µs.  Returns ``(q, scale,
    1 / scale, amax, dequantized)``: the three scales are views of the loop's (3, rows) array, and
    ``dequantized`` (with ``dequantize``, else None) is :func:`quantize_current_dequantized`'s float32 operand."""
    source = np.ascontiguousarray(x.view(np.uint16) if x.dtype == BF16 else x if x.dtype == F32 else _up(x))
    rows = source if source.ndim == 2 else source.reshape(source.shape[0], -1) if rowwise else source.reshape(1, -1)
    q = np.empty(rows.shape, np.uint8)
    scales = np.empty((3, rows.shape[0] if rowwise else 1), F32)
    dequantized = np.empty(rows.shape, F32) if dequantize else None
    loops.quantize_current(rows, q, scales, *_constants(target, eps, round_pow2), rowwise, dequantized)
    if rowwise:
        scale, inv, amax = scales[0][:, None], scales[1][:, None], scales[2][:, None]
    else:
        scale, inv, amax = scales[0, 0, ...], scales[1, 0, ...], scales[2, 0, ...]
    if rows is not source:
        q, dequantized = q.reshape(x.shape), None if dequantized is None else dequantized.reshape(x.shape)
    return q.view(target), scale, inv, amax, dequantized


@functools.cache
def _constants(target: np.dtype, eps: float, round_pow2: bool) -> tuple[Any, ...]:
    """The loops' constant arguments for a format, an eps and a rounding: float8's max, eps in float32, the
    power-of-two flag and whether the format is e4m3 (else e5m2)."""
    return (_MAX[target], F32.type(eps), bool(round_pow2), target == _E4M3)


def quantize_current_dequantized(
    x: np.ndarray, dtype: Any, eps: float, rowwise: bool, round_pow2: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`quantize_float8_current`'s four results and the float32 operand ``scaled_mm``'s widened path makes
    of ``q`` and ``1 / scale`` (:func:`scaled_float32`), in ``q``'s layout, computed in the same pass (compiled
    path only; a captured program asks for it, :mod:`.dequantize`)."""
    if x.size == 0:
        return (*quantize_float8_current(x, dtype, eps, rowwise, round_pow2), np.empty(x.shape, F32))
    q, scale, inv, amax, dequantized = _compiled_cast(_loops(), x, dtype.numpy, eps, rowwise, round_pow2, True)
    assert dequantized is not None
    return q, scale, inv, amax, dequantized


def widened_path() -> bool:
    """Whether ``scaled_mm`` runs the widened path now (the choice can change with the thread count)."""
    choice = lowp_gemm.chosen("float8")
    return not (choice if choice is not None else gemm_choice()).mkl


def scaled_mm(
    a: np.ndarray,
    b: np.ndarray,
    scale_a: np.ndarray,
    scale_b: np.ndarray,
    out_dtype: Any,
    bias: np.ndarray | None,
    use_fast_accum: bool,
) -> np.ndarray:
    """``(a * scale_a) @ (b * scale_b) + bias`` in float32, rounded once to ``out_dtype``."""
    return _down(scaled_sums(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum), out_dtype.numpy)


def scaled_sums(
    a: np.ndarray,
    b: np.ndarray,
    scale_a: np.ndarray,
    scale_b: np.ndarray,
    out_dtype: Any,
    bias: np.ndarray | None,
    use_fast_accum: bool,
) -> np.ndarray:
    """What :func:`scaled_mm` rounds once to ``out_dtype``: ``(a * scale_a) @ (b * scale_b) + bias`` in float32
    (a captured GEMM's fused epilogue starts from it)."""
    out = scaled_product(a, b, scale_a, scale_b, not widened_path())
    if bias is not None:
        out += _up(bias) if bias.dtype != F32 else bias
    return out


def scaled_product(a: np.ndarray, b: np.ndarray, scale_a: np.ndarray, scale_b: np.ndarray, mkl: bool) -> np.ndarray:
    """``(a * scale_a) @ (b * scale_b)`` in float32, by oneMKL's path (``mkl``, finite scales) or the widened one
    (see the module docstring)."""
    if mkl and np.isfinite(scale_a).all() and np.isfinite(scale_b).all():
        out = lowp_gemm.float8_sums(a, b)
        np.multiply(out, scale_a, out=out)
        np.multiply(out, scale_b, out=out)
        return out
    return _gemm(_widened(a, scale_a), _widened(b, scale_b))


def _widened(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """A ``scaled_mm`` operand on the widened path: :func:`scaled_float32` of a float8 one; a float32 one is that
    already (a captured program's dequantized operand, :mod:`.dequantize`, which the mkl path never gets)."""
    return x if x.dtype == F32 else scaled_float32(x, scale)


# Each float8 format's 256 codes as float32 values (exact; NaN codes NaN, e5m2's infinities inf).
_CODES = {d.numpy: np.arange(256, dtype=np.uint8).view(d.numpy).astype(F32) for d in (dt.float8_e4m3fn, dt.float8_e5m2)}


def scaled_float32(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``np.multiply(x.astype(float32), scale, dtype=float32)`` for a float8 ``x``, with its bits, by a table lookup.

    A per-tensor scale is folded into the 256-entry table (the same float32 product of each code and the scale,
    rounded once), so one ``np.take`` pass gives the scaled operand; a per-row or per-column scale multiplies the
    looked-up values.  ml_dtypes' cast and the multiply took 4.1 ms for a 1024x784 e4m3 operand, the lookup of
    the scaled table 0.44 (2-core AMD EPYC Zen 5).
    """
    codes = x.view(np.uint8)  # the scale broadcasts onto x without changing its shape (the contract)
    if scale.size == 1:
        return _lookup(np.multiply(_CODES[x.dtype], scale.reshape(()), dtype=F32), codes)
    out = _lookup(_CODES[x.dtype], codes)
    return np.multiply(out, scale, out=out)


def as_looked_up(values: np.ndarray) -> np.ndarray:
    """A float32 view laid out as :func:`_lookup` lays out what it gathers through the same view of codes (BLAS
    sums a transposed operand in another order than a contiguous one): F-contiguous as it is, where the gather
    runs in memory order, else a C-contiguous copy."""
    if values.size >= SMALL_LOOKUP and values.flags.f_contiguous and not values.flags.c_contiguous:
        return values
    return np.ascontiguousarray(values)


SMALL_LOOKUP = 1024  # codes below this many: np.take (a C-ordered result), else the compiled gather


def _lookup(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``np.take(table, codes)``, by the compiled gather where numba is installed.

    np.take first converts the uint8 codes to an intp index array, eight bytes per code: a (128, 128) operand
    took 11.9 µs, the compiled gather 4.4 (2-core AMD EPYC Zen 5).  A transposed operand is gathered in its
    memory order and handed back transposed, as BLAS takes it.
    """
    loops = _loops()
    if loops is None or codes.size < SMALL_LOOKUP:
        return np.take(table, codes)
    if codes.flags.f_contiguous and not codes.flags.c_contiguous:
        return _lookup(table, codes.T).T
    src = np.ascontiguousarray(codes)
    out = np.empty(src.shape, F32)
    compiled.load("_select_numba").gather(src.reshape(-1), table, out.reshape(-1))
    return out


def _probe_candidates() -> tuple[Callable[[], object], Callable[[], object]]:
    """Two tensorwise e4m3 products with a bfloat16 output, one per path (:func:`.lowp_gemm.choose`)."""
    a, b = lowp_gemm.probe_operands(np.dtype(dt.float8_e4m3fn.numpy))
    scale = np.asarray(0.75, F32)
    return (lambda: _down(scaled_product(a, b, scale, scale, True), BF16)), (
        lambda: _down(scaled_product(a, b, scale, scale, False), BF16)
    )


def gemm_choice() -> lowp_gemm.GemmChoice:
    """Which path runs float8 ``scaled_mm`` at this thread count (chosen on first use: :mod:`.lowp_gemm`)."""
    return lowp_gemm.choose("float8", _probe_candidates)


def float8_table() -> dict[str, Callable[..., Any]]:
    """The float8 kernels, quiet (IEEE inf/NaN without NumPy warnings)."""
    return {
        "quantize_float8": _quiet(quantize_float8),
        "quantize_float8_current": _quiet(quantize_float8_current),
        "scaled_mm": _quiet(scaled_mm),
    }
