"""NumPy kernels for every ampcore primitive.

float64/float32/int/bool run natively.  float16 and bfloat16 are stored at 2
bytes per element and computed in float32, with one round-to-nearest-even on
the way out: the numbers a tensor core's fp32-accumulating GEMM gives.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import dtypes as dt
from ampcore.kernels import exact_wrapper

from . import bf16conv, compiled, halfconv, lowp_gemm, lowp_max, select, special, threads

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
I64 = np.dtype(np.int64)
F16 = np.dtype(np.float16)
BF16 = np.dtype(dt.bfloat16.numpy)
LOW = frozenset({dt.float16.numpy, dt.bfloat16.numpy})
CHUNK = 1 << 16  # elements per cache-sized block in the fused passes
# unscale_and_check's block.  Each block costs ~5 us of Python/ufunc calls, so it must be big against
# that, yet small enough to be re-read from cache for the check.  10M float32 on a 512 KiB-L2 core,
# vs a plain copy: 256 KiB 1.2x, 512 KiB 1.1x, 1 MiB 1.05x (but past L2); benchmarks/bench_unscale.py.
UNSCALE_BLOCK_BYTES = 1 << 19


def _np(dtype: Any) -> np.dtype:
    return dtype.numpy if isinstance(dtype, dt.DType) else np.dtype(dtype)


def _up(x: Any) -> Any:
    """float16/bfloat16 arrays as float32; everything else unchanged (scalars too)."""
    if not isinstance(x, np.ndarray) or x.dtype not in LOW:
        return x
    return halfconv.to_float32(x) if x.dtype == F16 else x.astype(F32)


def _down(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` rounded once to ``dtype`` (from float32 through :mod:`.halfconv` / :mod:`.bf16conv`, the same bits)."""
    if x.dtype == F32 and dtype in LOW:
        return halfconv.to_float16(x) if dtype == F16 else bf16conv.to_bfloat16(x)
    return x.astype(dtype)


def _lowp(fn: Callable[..., Any], compiled: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """Run ``fn`` in float32 for low-precision inputs and round the result once to their dtype.

    ``compiled``: the same in one compiled pass (:func:`.loops.loop`), returning None where it does not apply.
    """

    def kernel(*args: Any) -> Any:
        dtype = next(a.dtype for a in args if isinstance(a, np.ndarray))  # operands may be scalars
        if dtype in LOW:
            if compiled is not None:
                out = compiled(*args)
                if out is not None:
                    return out
            return _down(np.asarray(fn(*[_up(a) for a in args])), dtype)
        out = np.asarray(fn(*args))
        return out if out.dtype == dtype else out.astype(dtype)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel


def _lowp_unary(fn: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`_lowp` for a unary primitive, with its one parameter (no tuple packing on the hot path)."""

    def kernel(x: Any) -> Any:
        dtype = x.dtype
        if dtype in LOW:
            return _down(np.asarray(fn(_up(x))), dtype)
        out = np.asarray(fn(x))
        return out if out.dtype == dtype else out.astype(dtype)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel


def _lowp_binary(fn: Callable[..., Any], compiled: Callable[..., Any] | None) -> Callable[..., Any]:
    """:func:`_lowp` for a binary primitive, with its two parameters (no tuple packing on the hot path)."""

    def kernel(a: Any, b: Any) -> Any:
        dtype = a.dtype if isinstance(a, np.ndarray) else b.dtype  # one operand may be a scalar
        if dtype in LOW:
            if compiled is not None:
                out = compiled(a, b)
                if out is not None:
                    return out
            return _down(np.asarray(fn(_up(a), _up(b))), dtype)
        out = np.asarray(fn(a, b))
        return out if out.dtype == dtype else out.astype(dtype)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel


def _compare(fn: Callable[..., Any], compiled: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """A comparison-like program (a bool result): 2-byte operands compared exactly in float32."""

    def kernel(*args: Any) -> Any:
        if compiled is not None:
            out = compiled(*args)
            if out is not None:
                return out
        return np.asarray(fn(*[_up(a) for a in args]))

    return kernel


def _erf(x: np.ndarray) -> np.ndarray:
    return special.erf(x)  # float64, rounded once to the input dtype by _lowp


def _sign(x: np.ndarray) -> np.ndarray:
    return np.sign(x) if x.dtype != np.bool_ else x.copy()


try:
    # NumPy 2 keeps the floating-point error state in a context variable; np.errstate builds a new state
    # object on every entry (~1 us, as much as a small kernel).  Setting the variable to one prebuilt
    # "ignore all" state does what ``with np.errstate(all="ignore")`` does, for a fifth of the cost.
    from numpy._core._multiarray_umath import _make_extobj
    from numpy._core._ufunc_config import _extobj_contextvar as _ERRSTATE

    _IGNORE_ALL: Any = _make_extobj(all="ignore")
except ImportError:  # NumPy 1.x, or a NumPy that moved them: the public context manager
    _ERRSTATE = None


_QUIET_BODY = """\
token = _set_state(_ignore_all)
try:
    return {call}
finally:
    _reset_state(token)
"""
_QUIET_BODY_CM = """\
with _errstate(all="ignore"):
    return {call}
"""


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """IEEE results (inf, NaN) without NumPy's floating-point warnings; the wrapper takes ``fn``'s own
    parameters (:func:`ampcore.forwarding.exact_wrapper`), as it is on every kernel call."""
    if _ERRSTATE is None:
        return exact_wrapper(fn, _QUIET_BODY_CM, {"_errstate": np.errstate})
    env = {"_set_state": _ERRSTATE.set, "_reset_state": _ERRSTATE.reset, "_ignore_all": _IGNORE_ALL}
    return exact_wrapper(fn, _QUIET_BODY, env)


# The casts :mod:`.halfconv` / :mod:`.bf16conv` do faster with the same bits, by (source NumPy dtype, target
# DType, as the core passes it); a NumPy dtype target misses and takes dt.convert, with the same bits.
_FAST_CASTS: dict[tuple[np.dtype, Any], Callable[[np.ndarray], np.ndarray]] = {
    (F32, dt.float16): halfconv.to_float16,
    (F16, dt.float32): halfconv.to_float32,
    (F32, dt.bfloat16): bf16conv.to_bfloat16,
}


def cast(x: np.ndarray, dtype: Any) -> np.ndarray:
    fast = _FAST_CASTS.get((x.dtype, dtype))
    if fast is not None:
        return fast(x)
    return dt.convert(x, dtype)  # always a new array (the contract), rounded once even float64 -> bfloat16


_BITS = {2: np.int16, 4: np.int32, 8: np.int64}


def _is_plus_zero(v: Any) -> bool:
    return not isinstance(v, np.ndarray) and v == 0 and math.copysign(1.0, float(v)) > 0


def _select_bits(cond: np.ndarray, a: Any, b: Any, dtype: np.dtype) -> np.ndarray | None:
    """``where`` as a bitwise blend (a & m) | (b & ~m), or None when the fast path does not apply.

    np.where branches per element and is ~10x slower on random masks (the
    ReLU backward); the blend gives the same bits, +0.0 and NaN included.
    """
    bits = _BITS.get(dtype.itemsize)
    arrays = [v for v in (a, b) if isinstance(v, np.ndarray)]
    if (
        bits is None
        or cond.ndim == 0
        or cond.dtype != np.bool_
        or any(v.shape != cond.shape or v.dtype != dtype for v in arrays)
    ):
        return None
    if not all(isinstance(v, np.ndarray) or _is_plus_zero(v) for v in (a, b)):
        return None
    mask = cond.view(np.uint8).astype(bits)
    np.negative(mask, out=mask)  # 0 -> all zero bits, 1 -> all one bits
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        out = np.bitwise_and(a.view(bits), mask)
        np.invert(mask, out=mask)
        np.bitwise_or(out, np.bitwise_and(b.view(bits), mask, out=mask), out=out)
    elif isinstance(a, np.ndarray):
        out = np.bitwise_and(a.view(bits), mask, out=mask)
    else:
        np.invert(mask, out=mask)
        out = np.bitwise_and(b.view(bits), mask, out=mask)
    return out.view(dtype)


# Below this many elements np.where beats the bitwise blend (its fixed cost is a few more NumPy calls):
# 1024 float32, 2.7 vs 5.2 us; 4096, even; 16384, 60 vs 10 us (2-core Xeon, NumPy 2.4).
SMALL_WHERE = 1 << 12


def where(cond: np.ndarray, a: Any, b: Any) -> np.ndarray:
    a_is_array = isinstance(a, np.ndarray)
    dtype = a.dtype if a_is_array else b.dtype  # never two scalars (the contract)
    if cond.size > SMALL_WHERE:
        fast = select.select(cond, a, b, dtype)  # one compiled pass; None without numba or for other shapes
        fast = _select_bits(cond, a, b, dtype) if fast is None else fast
        if fast is not None:
            return fast
    if not a_is_array:
        a = np.asarray(a, dtype=dtype)
    elif not isinstance(b, np.ndarray):
        b = np.asarray(b, dtype=dtype)
    return np.where(cond, a, b).astype(dtype, copy=False)


def _accumulator(x: np.ndarray) -> Any:
    # Compared with dtype objects, not scalar types: ``x.dtype == np.float64`` converts the type on every call.
    if x.dtype.kind in "biu":
        return I64
    return F64 if x.dtype == F64 else F32


def _reduced_dtype(x: np.ndarray) -> Any:
    """Floats keep their dtype, bool/int sum to int64 (not ``dtype.kind``: bfloat16's kind is "V")."""
    return np.int64 if x.dtype.kind in "biu" else x.dtype


def reduce_sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    dtype = x.dtype
    half = dtype == F16
    # float16 widened first: NumPy's reduction would widen it element by element, far slower.
    # np.add.reduce is what np.sum calls for an ndarray, without its Python-level dispatch (arguments by
    # position: axis, dtype, out, keepdims).
    out = np.add.reduce(_up(x) if half else x, axes, _accumulator(x), None, keepdims)
    if type(out) is not np.ndarray:  # a full reduction returns a NumPy scalar
        out = np.asarray(out)
    if half:
        return _down(out, dtype)
    reduced = _reduced_dtype(x)
    return out if out.dtype == reduced else out.astype(reduced)


def reduce_max(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """np.max; a float16/bfloat16 ``x`` is reduced in float32 and narrowed back, which is exact both ways.

    NumPy's float16 loop and ml_dtypes' bfloat16 one compare element by element in C: a float8 cast's amax over a
    (64, 128) bfloat16 activation took 45 µs, against 3 µs widened (2-core AMD EPYC Zen 5).
    """
    fast = lowp_max.max_f16(x, axes, keepdims) if x.dtype == F16 else None  # one compiled pass, no float32 copy
    if fast is not None:
        return fast
    if x.dtype in LOW:
        widened = np.asarray(np.max(_up(x), axis=axes, keepdims=keepdims))
        if not np.isnan(widened).any():  # NumPy's float32 loop may not keep a NaN's payload: those take the slow one
            return _down(widened, x.dtype)
    return np.asarray(np.max(x, axis=axes, keepdims=keepdims))


_SHORT_AXIS = 16  # taps of a pooling window and the like: argmax by comparison against the maximum


def _argmax_short(x: np.ndarray, axis: int) -> np.ndarray:
    """np.argmax over a short, not-last float ``axis``: first maximum, first NaN where there is one.

    NumPy's argmax runs along the last axis only and copies the array to get there; over a 2x2
    pooling window's tap axis of a (32, 4, 32, 16, 16) float32 array it took 8.6 ms, this 1.6 ms
    (2-core Zen 3).  ``x == max`` marks every maximum (a NaN maximum matches nothing, so NaNs are
    marked by ``isnan``); the index counts down from the last tap to the first marked one.
    """
    n = x.shape[axis]
    marked = x == np.max(x, axis=axis, keepdims=True)
    marked |= np.isnan(x)
    at = lambda i: marked[(slice(None),) * axis + (i,)]  # noqa: E731
    idx = np.full(at(0).shape, n - 1, dtype=np.int8 if n <= 127 else np.int64)
    open_ = np.ones(idx.shape, dtype=np.bool_)  # no maximum found yet in an earlier tap
    for i in range(n - 1):
        first = at(i) & open_
        idx -= first * idx.dtype.type(n - 1 - i)
        open_ &= ~first
    return idx.astype(np.int64)


def argmax(x: np.ndarray, axis: int) -> np.ndarray:
    x = _up(x)
    axis %= max(x.ndim, 1)
    if x.dtype.kind == "f" and x.ndim > 1 and axis < x.ndim - 1 and 1 < x.shape[axis] <= _SHORT_AXIS and x.size:
        return _argmax_short(x, axis)
    return np.asarray(np.argmax(x, axis=axis)).astype(np.int64, copy=False)


def cumsum(x: np.ndarray, axis: int) -> np.ndarray:
    acc = _accumulator(x)
    return np.cumsum(x, axis=axis, dtype=acc).astype(_reduced_dtype(x), copy=False)


def _blas_ready(x: np.ndarray) -> np.ndarray:
    """``x``, or a C-contiguous copy of a batched (>2-D) operand that is not one.

    NumPy's batched matmul hands BLAS only operands it can describe as a run of matrices; a transposed
    view such as ``a.mT`` sends the whole product to its slow non-BLAS loop: (16, 1024, 64) @ (16, 64, 1024)
    with the first a transposed view took 217 ms against 47 ms with a copy, on a 2-core Zen 3.
    """
    return x if x.ndim <= 2 or x.flags.c_contiguous else np.ascontiguousarray(x)


def _folded_gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A C-contiguous (..., M, K) ``a`` times a 2-D (K, N) ``b`` as one (... * M, K) @ (K, N) GEMM.

    np.matmul runs one BLAS call per batch item: a linear layer's (16, 64, 1024) @ (1024, 256) took 3.2 ms
    as 16 products, 2.0 ms as one (2-core Xeon, OpenBLAS).  Each output element is still one float32 dot
    product over all of K; the BLAS may sum it in another order for another M (OpenBLAS's Haswell kernels do,
    on AMD Zen 5), so the bits can differ from the batched product's by summation order
    (tests/test_cpu_folded_gemm.py checks the bound on the benchmark models' shapes).
    """
    out = np.matmul(a.reshape(math.prod(a.shape[:-1]), a.shape[-1]), b)  # not -1: a may be empty
    return out.reshape(a.shape[:-1] + out.shape[-1:])


def _gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul; a product whose batch dimensions are all 1 runs as one 2-D GEMM, a batched ``a`` times a
    2-D ``b`` as one folded GEMM (:func:`_folded_gemm`).

    A 2-D product hands a transposed operand to BLAS as it is (its transpose flag); a batched one needs
    :func:`_blas_ready`'s copy.  conv's weight gradient for one group, (1, 32768, 32) transposed, spent
    ~4.5 ms per step in that copy (2-core Zen 3).
    """
    if a.ndim == 2 and b.ndim == 2:
        return np.matmul(a, b)
    if b.ndim == 2 and a.ndim > 2 and a.flags.c_contiguous and a.shape[-2] > 1:
        return _folded_gemm(a, b)
    if a.ndim > 2 and a.ndim == b.ndim and all(n == 1 for n in a.shape[:-2] + b.shape[:-2]):
        lead = a.shape[:-2]
        out = np.matmul(a.reshape(a.shape[-2:]), b.reshape(b.shape[-2:]))
        return out.reshape(lead + out.shape)
    return np.matmul(_blas_ready(a), _blas_ready(b))


# A float16/bfloat16 product whose larger operand has at least this many elements is computed block by block
# (:func:`_blocked_lowp_gemm`): widening the whole operand to float32 held three times its bytes at once.
BLOCKED_GEMM_ELEMENTS = 1 << 21
_BLOCK_ELEMENTS = 1 << 20  # elements of the larger operand widened per block (4 MiB of float32)
# Each block's product stays at least this large (m*n*k), far above the sizes where OpenBLAS switches to its
# "direct" small-matrix sgemm (under 28*512*512 on Skylake-X), so blocks run at the whole product's rate.
_BLOCK_MIN_MNK = 1 << 25


def _blocked_lowp_gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """A 2-D float16/bfloat16 ``a @ b`` (batch dimensions all 1 allowed) in column blocks of ``b`` or row
    blocks of ``a``, whichever is the larger operand, each widened, multiplied and rounded in turn; None
    where the product is small or batched.

    Every output element is still one float32 dot product over the whole of K, rounded once: the blocks split
    M or N, never K.  Not always with the whole product's bits: the BLAS may sum a column in another order
    depending on where it falls in a block (OpenBLAS's Haswell kernels, which it runs on AMD Zen 5, do), a
    summation-order difference (``tests/test_cpu_compiled_kernels.py`` checks the bound on the benchmark models'
    shapes).  Peak memory is the two 2-byte operands, the 2-byte output and one
    block, instead of float32 copies of both operands and of the output: the cnn's conv2 input gradient,
    (32, 576) @ (576, 8192), held 28 MiB in float16 against 19 in float32.
    """
    if a.size < BLOCKED_GEMM_ELEMENTS and b.size < BLOCKED_GEMM_ELEMENTS:  # the common case, decided cheaply
        return None
    if a.ndim != b.ndim or any(n != 1 for n in a.shape[:-2] + b.shape[:-2]) or a.ndim < 2:
        return None
    lead = a.shape[:-2]
    a2, b2 = a.reshape(a.shape[-2:]), b.reshape(b.shape[-2:])
    m, k, n = a2.shape[0], a2.shape[1], b2.shape[1]
    if max(m * k, k * n) < BLOCKED_GEMM_ELEMENTS or min(m, n) < 16:
        return None
    out = np.empty((m, n), a.dtype)
    if k * n >= m * k:  # blocks of b's columns
        step = max(-(-_BLOCK_ELEMENTS // k), -(-_BLOCK_MIN_MNK // (m * k)))
        if step >= n:
            return None
        aw = _up(a2)
        for s in range(0, n, step):
            out[:, s : s + step] = _down(np.matmul(aw, _up(b2[:, s : s + step])), a.dtype)
    else:  # blocks of a's rows
        step = max(-(-_BLOCK_ELEMENTS // k), -(-_BLOCK_MIN_MNK // (n * k)))
        if step >= m:
            return None
        bw = _up(b2)
        for s in range(0, m, step):
            out[s : s + step] = _down(np.matmul(_up(a2[s : s + step]), bw), a.dtype)
    return out.reshape(lead + out.shape)


def _widened_sums(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """The float32 sums of a float16/bfloat16 ``a @ b`` on the widened path (float32 copies, BLAS sgemm), or
    None for a product large enough to go block by block (:func:`_blocked_lowp_gemm`)."""
    if a.size >= BLOCKED_GEMM_ELEMENTS or b.size >= BLOCKED_GEMM_ELEMENTS:
        return None
    if a.dtype == BF16 and a.ndim == 2 and b.ndim == 2:  # an autocast linear's product, without the generic steps
        return np.matmul(a.astype(F32), b.astype(F32))
    return _gemm(_up(a), _up(b))


def widened_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A float16/bfloat16 ``a @ b`` on the widened path: float32 copies, BLAS sgemm (float32 products and
    accumulation), one rounding on output."""
    sums = _widened_sums(a, b)
    if sums is not None:
        return _down(sums, a.dtype)
    blocked = _blocked_lowp_gemm(a, b)
    return blocked if blocked is not None else _down(_gemm(_up(a), _up(b)), a.dtype)


def mkl_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A float16/bfloat16 ``a @ b`` on oneMKL's path (:mod:`.lowp_gemm`): float32 result, one rounding."""
    return _down(lowp_gemm.product(a, b), a.dtype)


def _probe_candidates(dtype: np.dtype) -> Callable[[], tuple[Callable[[], object], Callable[[], object]]]:
    def candidates() -> tuple[Callable[[], object], Callable[[], object]]:
        a, b = lowp_gemm.probe_operands(dtype)
        return (lambda: mkl_matmul(a, b)), (lambda: widened_matmul(a, b))

    return candidates


_PROBES = {dtype: _probe_candidates(dtype) for dtype in (F16, BF16)}


# The choice's key names the dtype by its name; dtype.name is a property that builds the string on every read,
# and this runs on every autocast matmul (with the calls it replaces, about 4% of the whole op).
_KIND = {F16: "float16", BF16: "bfloat16"}


def gemm_choice(dtype: np.dtype) -> lowp_gemm.GemmChoice:
    """Which path runs float16 or bfloat16 GEMMs at this thread count (chosen on first use: :mod:`.lowp_gemm`).
    A choice already made is one dict lookup: every 16-bit matmul asks."""
    kind = _KIND[dtype]
    return lowp_gemm._chosen.get((kind, threads._wanted)) or lowp_gemm.choose(kind, _PROBES[dtype])


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    dtype = a.dtype
    if dtype in LOW:
        return mkl_matmul(a, b) if gemm_choice(dtype).mkl else widened_matmul(a, b)
    if a.ndim == 2 and b.ndim == 2:
        return np.matmul(a, b)
    return _gemm(a, b)


def matmul_sums(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """What :func:`matmul` computes before its one rounding: the float32 sums of a float16/bfloat16 product (by
    the path :func:`gemm_choice` chose), a float32 or float64 product itself; None where a 16-bit product goes
    block by block, rounding each block as it goes.  A captured GEMM's fused epilogue starts from these."""
    dtype = a.dtype
    if dtype in LOW:
        return lowp_gemm.product(a, b) if gemm_choice(dtype).mkl else _widened_sums(a, b)
    return matmul(a, b)


# Results up to this many elements are broadcast as a copy: np.broadcast_to's view machinery costs ~3 us
# (a sum's backward pays it on every step), a 16K-element copy well under that (2-core Xeon, NumPy 2.4).
SMALL_BROADCAST = 1 << 14


def transpose(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """``x`` with its axes permuted (the method: np.transpose adds a Python-level dispatch)."""
    return x.transpose(axes)


def broadcast_to(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """``x`` broadcast to ``shape``: a view, or for a small result a copy (the contract allows either)."""
    shape = tuple(shape)
    if math.prod(shape) <= SMALL_BROADCAST:
        out = np.empty(shape, x.dtype)
        out[...] = x  # ValueError for shapes that do not broadcast, as np.broadcast_to (np.copyto is a Python wrapper)
        return out
    return np.broadcast_to(x, shape)


def reshape(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """np.reshape; where that must copy a permuted view, the copy walks the source in memory order.

    NumPy's copy walks the output's order, so un-permuting short axes reads with a large stride in its
    inner loop: max-pool's backward, (32, 2, 2, 32, 16, 16) transposed to (32, 32, 16, 2, 16, 2) and
    flattened, took 5.3 ms; writing into the output's matching permuted view, 2.7 ms (2-core Zen 3).
    The same elements are copied, so the bits are the same.
    """
    if x.ndim < 3 or x.flags.c_contiguous:
        return x.reshape(shape)  # the method: np.reshape adds ~0.4 us of Python-level dispatch to a 0.1 us view
    try:
        return np.reshape(x, shape, copy=False)
    except ValueError:  # no view: copy in the source's memory order
        order = sorted(range(x.ndim), key=lambda axis: -abs(x.strides[axis]))
        out = np.empty(x.shape, dtype=x.dtype)
        out.transpose(order)[...] = x.transpose(order)
        return out.reshape(shape)


def slice_(x: np.ndarray, index: tuple) -> np.ndarray:
    return x[index]


def slice_assign(base: np.ndarray, index: tuple, values: np.ndarray) -> np.ndarray:
    out = base.copy()
    out[index] = values
    return out


def pad(x: np.ndarray, widths: Sequence[tuple[int, int]], value: float) -> np.ndarray:
    out = np.full(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, widths)), value, dtype=x.dtype)
    out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, widths))] = x
    return out


def concat(xs: Sequence[np.ndarray], axis: int) -> np.ndarray:
    return np.concatenate(list(xs), axis=axis)


def take(x: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    return np.take(x, indices, axis=axis)


def scatter_add(src: np.ndarray, indices: np.ndarray, axis: int, size: int) -> np.ndarray:
    moved = np.moveaxis(_up(src), axis, 0)
    out = np.zeros((size,) + moved.shape[1:], dtype=moved.dtype)
    loops = compiled.load("_scatter_numba") if out.dtype in (F32, F64) and indices.ndim == 1 else None
    if loops is None or moved.shape[0] != indices.size or moved.size == 0:
        np.add.at(out, indices, moved)
    else:  # np.add.at's additions, in its order, in one compiled loop (:mod:`._scatter_numba`)
        rows = np.ascontiguousarray(moved).reshape(indices.size, -1)
        bad = loops.add_rows(rows, indices, out.reshape(size, -1))
        if bad >= 0:
            raise IndexError(f"index {indices[bad]} is out of bounds for axis {axis} with size {size}")
    return np.moveaxis(out, 0, axis).astype(src.dtype, copy=False)


def full(shape: tuple[int, ...], value: Any, dtype: Any, device_index: int = 0) -> np.ndarray:
    # np.full costs 0.7 us on a 13-element array, empty-then-fill a third of that (the same values; only a
    # non-finite value into an integer dtype needs np.full's unsafe copy), and a zero int or positive-zero float
    # is calloc'd memory (a -0.0 is filled: its sign bit counts).
    if (type(value) is int or (type(value) is float and math.copysign(1.0, value) > 0)) and value == 0:
        return np.zeros(shape, dtype=_np(dtype))
    out = np.empty(shape, dtype=_np(dtype))
    try:
        out.fill(value)
    except (OverflowError, ValueError):  # inf or NaN into an integer dtype: np.full's unsafe cast, and its value
        np.copyto(out, value, casting="unsafe")
    return out


def arange(start: float, stop: float, step: float, dtype: Any, device_index: int = 0) -> np.ndarray:
    target = _np(dtype)
    if target.kind in "iub":
        return np.arange(start, stop, step, dtype=target)
    return dt.convert(np.arange(start, stop, step, dtype=np.float64), dtype)


def uniform(shape: tuple[int, ...], dtype: Any, seed: int, device_index: int = 0) -> np.ndarray:
    target = _np(dtype)
    rng = np.random.default_rng(seed)
    out = rng.random(shape, dtype=np.float64 if target == np.float64 else np.float32).astype(target, copy=False)
    if target.itemsize == 2:  # a float32 sample just below 1 rounds up to 1.0 in 2 bytes: keep [0, 1)
        np.minimum(out, np.nextafter(target.type(1), target.type(0)), out=out)
    return out


def normal(shape: tuple[int, ...], dtype: Any, seed: int, device_index: int = 0) -> np.ndarray:
    target = _np(dtype)
    rng = np.random.default_rng(seed)
    drawn = rng.standard_normal(shape, dtype=np.float64 if target == np.float64 else np.float32)
    return drawn.astype(target, copy=False)


def _writable(g: np.ndarray) -> np.ndarray:
    """``g`` itself when it can be scaled in place, else a C-contiguous copy: a read-only or strided
    array the caller handed in is never written through."""
    return g if g.flags.writeable and g.flags.c_contiguous else np.array(g, order="C")


def unscale_and_check(grads: list[np.ndarray], inv_scale: np.ndarray, found_inf: np.ndarray) -> tuple[list, np.ndarray]:
    """Multiply in place by ``inv_scale`` and look for inf/NaN, in one pass while each value is in a register.

    float32 and float64 gradients take one compiled loop each (:func:`._optim_numba.unscale`): 0.2-0.5 us for
    an MLP's bias or weight, against 1.5-2.5 for NumPy's two passes and their error state (six of them were 22
    us of a 470 us float16 AMP step; 2-core AMD EPYC Zen 5).  Others, and every gradient without numba, are
    scaled block by block and each block checked while it is still in cache.  ``np.isfinite`` is exact; a
    cheaper sum could overflow from finite values, a false positive that would skip a good step.  The check is
    on the scaled values, so a finite value that overflows when inv_scale > 1 counts too (hence no overflow
    warning).
    """
    inv = inv_scale.reshape(())[()]
    out = [_writable(g) for g in grads]
    bad = False
    loops = compiled.load("_optim_numba") if inv.dtype == F32 else None
    rest = []
    for g in out:
        if loops is not None and (g.dtype == F32 or g.dtype == F64):
            bad = loops.unscale(g.reshape(-1), inv) or bad
        else:
            rest.append(g)
    if rest:
        with np.errstate(over="ignore", invalid="ignore"):
            for g in rest:
                flat = g.reshape(-1)
                step = UNSCALE_BLOCK_BYTES // flat.itemsize
                for start in range(0, flat.size, step):
                    block = flat[start : start + step]
                    np.multiply(block, inv, out=block)
                    bad = bad or not np.isfinite(block).all()
    if bad:
        found_inf[...] = 1.0
    return out, found_inf


def update_scale(
    scale: np.ndarray,
    growth_tracker: np.ndarray,
    found_inf: np.ndarray,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
) -> tuple[np.ndarray, np.ndarray]:
    """torch's rule: back off and reset on inf; grow every ``growth_interval`` clean steps (unless that overflows).

    The products are taken in float64 and rounded once to float32, as torch's
    ``float * double`` does, so a factor like 1.1 gives torch's scale bit for bit.
    """
    scale, tracker = scale.copy(), growth_tracker.copy()
    if found_inf.reshape(())[()] != 0:
        scale[...] = scale.astype(np.float64) * backoff_factor
        tracker[...] = 0
    else:
        successful = tracker + 1
        if successful.reshape(())[()] == growth_interval:
            with np.errstate(over="ignore"):
                grown = (scale.astype(np.float64) * growth_factor).astype(np.float32)
            if np.isfinite(grown).all():
                scale = grown
            tracker[...] = 0
        else:
            tracker = successful
    return scale, tracker


def primitive_table() -> dict[str, Callable[..., Any]]:
    """Every primitive kernel but ``elementwise`` (:mod:`.elementwise`'s), keyed by its contract name."""
    table: dict[str, Callable[..., Any]] = {}
    table.update(
        cast=_quiet(cast),
        where=where,  # the program select(x0, x1, x2), hand-written: a compiled select or a bit blend (faster)
        sum=_quiet(reduce_sum),
        max=_quiet(reduce_max),
        argmax=argmax,
        cumsum=_quiet(cumsum),
        matmul=_quiet(matmul),
        reshape=reshape,
        transpose=transpose,
        broadcast_to=broadcast_to,
        slice=slice_,
        slice_assign=slice_assign,
        pad=pad,
        concat=concat,
        take=take,
        scatter_add=_quiet(scatter_add),
        full=full,
        arange=arange,
        uniform=uniform,
        normal=normal,
        unscale_and_check=unscale_and_check,
        update_scale=update_scale,
    )
    return table
