"""Float8: the two kernels of float8 training at the Tensor level, and their reference compositions.

``quantize_float8`` scales, casts and measures a tensor in one pass;
``scaled_mm`` is ``torch._scaled_mm``: a float8 GEMM with float32
accumulation and dequantization scales; ``scaled_mm_mx`` is the same GEMM with
one scale per 32 values along K (OCP MX block scaling).  Each runs a backend's
own kernel when it has one (``kernels.has("quantize_float8")``) and otherwise the
reference composition of primitives below, so every backend whose
capabilities store float8 runs them, and a third-party backend may override
either.

Neither records autograd: float8 training calls them inside its own autograd
function (``Float8Linear``), which decides what the backward quantizes.  The
outputs never require grad.

The algorithm is the contract (``ampcore.kernels``)::

    quantize_float8(x, scale, dtype, saturate):
        y    = float32(x) * scale                 # float32, scale broadcast (0-d or per row)
        y    = clamp(y, -max, max) if saturate    # NaN stays NaN
        q    = round_to_nearest_even(y, dtype)    # overflow: e4m3fn NaN, e5m2 inf
        amax = max(|float32(x)|)                  # 0-d float32; NaN if any x is NaN, 0 if x is empty

    scaled_mm(a, b, scale_a, scale_b, out_dtype, bias):
        out = (float32(a) * scale_a) @ (float32(b) * scale_b)   # float32 products and accumulation
        out = out + float32(bias)                               # if given, in float32
        return round_to_nearest_even(out, out_dtype)            # once

    scaled_mm_mx(a, b, scale_a, scale_b, out_dtype, bias):   # K a multiple of 32
        a32 = float32(a) * repeat(scale_a, 32, axis=1)          # scale_a (M, K/32): powers of two
        b32 = float32(b) * repeat(scale_b, 32, axis=0)          # scale_b (K/32, N)
        out = a32 @ b32 (+ float32(bias))                       # float32 accumulation
        return round_to_nearest_even(out, out_dtype)            # once

``scaled_mm`` scales the operands before the product, as torch's CPU
``_scaled_mm`` does (bit-identical bfloat16 outputs); a GPU's float8 GEMM
scales the float32 accumulator instead, which differs only by float32 rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtypes as dt
from ..hooks import STATE
from ..kernels import KernelGate
from ..plugins.capabilities import check_storable
from ..tensor_base import TensorBase, wrap

if TYPE_CHECKING:
    from ..tensor import Tensor

__all__ = [
    "quantize_float8",
    "scaled_mm",
    "scaled_mm_mx",
    "scaled_mm_torch",
    "quantize_float8_reference",
    "scaled_mm_reference",
    "scaled_mm_mx_reference",
    "MX_BLOCK",
    "QUANTIZE_INPUT_DTYPES",
    "QUANTIZE_DTYPES",
    "SCALED_MM_OUT_DTYPES",
]

QUANTIZE_INPUT_DTYPES: tuple[dt.DType, ...] = (dt.float32, dt.bfloat16, dt.float16)
QUANTIZE_DTYPES: tuple[dt.DType, ...] = (dt.float8_e4m3fn, dt.float8_e5m2)
SCALED_MM_OUT_DTYPES: tuple[dt.DType, ...] = (dt.float32, dt.bfloat16, dt.float16)
_MAX = {d: dt.finfo(d).max for d in QUANTIZE_DTYPES}
MX_BLOCK = 32  # values along K that share one scale in scaled_mm_mx (OCP MX)


# --------------------------------------------------------------------------- reference compositions
def quantize_float8_reference(k: Any, x: Any, scale: Any, dtype: dt.DType, saturate: bool) -> tuple[Any, Any]:
    """``quantize_float8`` from the primitives ``cast``, ``mul``, ``gt``/``lt``/``where``, ``abs`` and ``max``
    (``sum`` for an empty ``x``); ``k`` is a backend's kernel table or gate, the arguments its arrays."""
    x32 = x if k.dtype_of(x) is dt.float32 else k.cast(x, dt.float32)
    y = k.mul(x32, scale)
    if saturate:
        m = _MAX[dtype]
        y = k.where(k.gt(y, m), m, k.where(k.lt(y, -m), -m, y))  # comparisons are false for NaN: it stays
    q = k.cast(y, dtype)
    shape = k.shape_of(x32)
    axes = tuple(range(len(shape)))
    magnitude = k.abs(x32)
    amax = k.sum(magnitude, axes, False) if 0 in shape else k.max(magnitude, axes, False)
    return q, amax


def scaled_mm_reference(
    k: Any, a: Any, b: Any, scale_a: Any, scale_b: Any, out_dtype: dt.DType, bias: Any, use_fast_accum: bool
) -> Any:
    """``scaled_mm`` from the primitives ``cast``, ``mul``, ``matmul`` and ``add`` (see the module's
    algorithm); ``use_fast_accum`` changes nothing here."""
    a32 = k.mul(k.cast(a, dt.float32), scale_a)
    b32 = k.mul(k.cast(b, dt.float32), scale_b)
    out = k.matmul(a32, b32)
    if bias is not None:
        out = k.add(out, bias if k.dtype_of(bias) is dt.float32 else k.cast(bias, dt.float32))
    return out if out_dtype is dt.float32 else k.cast(out, out_dtype)


def _expand_blocks(k: Any, x32: Any, scale: Any, axis: int) -> Any:
    """``x32 * repeat(scale, MX_BLOCK, axis)`` without materializing the repeat: blocks along ``axis`` as a new
    axis of length MX_BLOCK, scaled by broadcasting."""
    rows, cols = k.shape_of(x32)
    if axis == 1:
        blocks, scales = (rows, cols // MX_BLOCK, MX_BLOCK), (rows, cols // MX_BLOCK, 1)
    else:
        blocks, scales = (rows // MX_BLOCK, MX_BLOCK, cols), (rows // MX_BLOCK, 1, cols)
    return k.reshape(k.mul(k.reshape(x32, blocks), k.reshape(scale, scales)), (rows, cols))


def scaled_mm_mx_reference(
    k: Any, a: Any, b: Any, scale_a: Any, scale_b: Any, out_dtype: dt.DType, bias: Any, use_fast_accum: bool
) -> Any:
    """``scaled_mm_mx`` from the primitives ``cast``, ``reshape``, ``mul``, ``matmul`` and ``add``: each
    operand scaled by its block's power of two (exact in float32), then one float32 GEMM."""
    a32 = _expand_blocks(k, k.cast(a, dt.float32), scale_a, 1)
    b32 = _expand_blocks(k, k.cast(b, dt.float32), scale_b, 0)
    out = k.matmul(a32, b32)
    if bias is not None:
        out = k.add(out, bias if k.dtype_of(bias) is dt.float32 else k.cast(bias, dt.float32))
    return out if out_dtype is dt.float32 else k.cast(out, out_dtype)


# --------------------------------------------------------------------------- checks
def _tensor(name: str, value: Any, fn: str) -> TensorBase:
    if not isinstance(value, TensorBase):
        raise TypeError(f"{fn}() {name} must be a Tensor, got {type(value).__name__}")
    return value


def _same_device(fn: str, first: TensorBase, *others: tuple[str, TensorBase | None]) -> None:
    for name, t in others:
        if t is not None and t.device != first.device:
            raise ValueError(
                f"{fn}() {name} is on {str(t.device)!r} but the first operand is on {str(first.device)!r}; "
                "move it with .to(device)"
            )


def _float32_scale(fn: str, name: str, scale: TensorBase) -> None:
    if scale.dtype is not dt.float32:
        raise TypeError(
            f"{fn}() {name} must be a float32 tensor, got {scale.dtype.name}; convert it with {name}.float()"
        )


def _choice(fn: str, name: str, value: Any, choices: tuple[dt.DType, ...]) -> dt.DType:
    d = dt.as_dtype(value)
    if d not in choices:
        names = ", ".join(c.name for c in choices)
        raise ValueError(f"{fn}() {name} must be one of {names}, got {d.name}")
    return d


def _broadcasts_onto(scale: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether ``scale`` broadcasts to ``shape`` without changing it (0-d, or per row: (rows, 1))."""
    if len(scale) > len(shape):
        return False
    return all(s in (1, n) for s, n in zip(scale[::-1], shape[::-1]))


# --------------------------------------------------------------------------- Tensor level
def quantize_float8(x: Any, scale: Any, dtype: Any = dt.float8_e4m3fn, saturate: bool = True) -> tuple[Tensor, Tensor]:
    """``(q, amax)``: ``x * scale`` cast to the float8 ``dtype`` and ``max|x|``, in one pass.

    ``x`` is float32, bfloat16 or float16; ``scale`` a float32 tensor on its
    device, 0-d per tensor or one scale per row (shape ``(rows, 1)``; any
    shape that broadcasts onto ``x``'s without changing it); ``dtype``
    ``ampcore.float8_e4m3fn`` or ``ampcore.float8_e5m2``.  The product is
    rounded to float32, then to nearest-even in ``dtype``.  ``saturate=True``
    clamps to the format's +-max first (NaN stays NaN), as torchao and
    Transformer Engine do for their forward casts; ``saturate=False`` gives
    what the format has on overflow (e4m3fn has no inf: NaN; e5m2: inf).
    ``amax`` is a 0-d float32 tensor: the largest magnitude of ``x`` (NaN if
    any element is NaN, 0 for an empty ``x``).  Records no autograd.
    """
    x = _tensor("x", x, "quantize_float8")
    scale = _tensor("scale", scale, "quantize_float8")
    if x.dtype not in QUANTIZE_INPUT_DTYPES:
        raise TypeError(
            f"quantize_float8() x must be float32, bfloat16 or float16, got {x.dtype.name}; cast it with x.float()"
        )
    dtype = _choice("quantize_float8", "dtype", dtype, QUANTIZE_DTYPES)
    if not isinstance(saturate, (bool, np.bool_)):
        raise TypeError(f"quantize_float8() saturate must be True or False, got {saturate!r}")
    _float32_scale("quantize_float8", "scale", scale)
    if not _broadcasts_onto(scale.shape, x.shape):
        raise ValueError(
            f"quantize_float8() scale of shape {scale.shape} does not broadcast onto x of shape {x.shape}; "
            f"pass a 0-d scale (per tensor) or one of shape {x.shape[:-1] + (1,)} (per row)"
        )
    _same_device("quantize_float8", x, ("scale", scale))
    backend = x._backend
    check_storable(backend, x.device.index, dtype)
    gate = KernelGate.of(backend, "quantize_float8")
    if backend.kernels.has("quantize_float8"):
        q, amax = gate.quantize_float8(x._data, scale._data, dtype, bool(saturate))
    else:
        q, amax = quantize_float8_reference(gate, x._data, scale._data, dtype, bool(saturate))
    out = wrap(q, x.device, backend)
    if STATE.watching and STATE.overflow_hook is not None:  # detect_overflow: a cast that overflowed
        STATE.overflow_hook("quantize_float8", "forward", [x, scale], [out])
    return out, wrap(amax, x.device, backend)


def _per_tensor(gate: KernelGate, scale: TensorBase) -> Any:
    """A one-element scale as a 0-d array (the kernel contract's per-tensor form)."""
    return scale._data if scale.shape == () else gate.reshape(scale._data, ())


def scaled_mm(
    a: Any,
    b: Any,
    scale_a: Any,
    scale_b: Any,
    out_dtype: Any,
    bias: Any = None,
    use_fast_accum: bool = False,
) -> Tensor:
    """``(a * scale_a) @ (b * scale_b) + bias`` for float8 ``a`` (M, K) and ``b`` (K, N), rounded once to
    ``out_dtype``: torch._scaled_mm's semantics.

    ``scale_a`` and ``scale_b`` are float32 *dequantization* scales (the
    inverse of the scales :func:`quantize_float8` multiplied by): one element
    each (per tensor), or ``scale_a`` of shape (M, 1) and ``scale_b`` of
    shape (1, N) (per row of ``a`` and column of ``b``).  Products and
    accumulation are float32; ``bias`` (N,) float32, bfloat16 or float16 is
    added in float32; ``out_dtype`` is float32, bfloat16 or float16.
    ``use_fast_accum`` lets a GPU kernel accumulate with less precision
    (ignored where the backend has no faster path).  Records no autograd.
    """
    fn = "scaled_mm"
    a, b = _tensor("a", a, fn), _tensor("b", b, fn)
    scale_a, scale_b = _tensor("scale_a", scale_a, fn), _tensor("scale_b", scale_b, fn)
    if bias is not None:
        bias = _tensor("bias", bias, fn)
    for name, t in (("a", a), ("b", b)):
        if t.dtype not in QUANTIZE_DTYPES:
            raise TypeError(
                f"{fn}() {name} must be float8_e4m3fn or float8_e5m2, got {t.dtype.name}; "
                "quantize it with ampcore.ops.float8.quantize_float8"
            )
        if len(t.shape) != 2:
            raise ValueError(f"{fn}() {name} must be a matrix, got shape {t.shape}")
    (m, ka), (kb, n) = a.shape, b.shape
    if ka != kb:
        raise ValueError(f"{fn}() shapes {a.shape} and {b.shape} cannot be multiplied ({ka} != {kb})")
    out_dtype = _choice(fn, "out_dtype", out_dtype, SCALED_MM_OUT_DTYPES)
    for name, scale, row in (("scale_a", scale_a, (m, 1)), ("scale_b", scale_b, (1, n))):
        _float32_scale(fn, name, scale)
        size = int(np.prod(scale.shape)) if scale.shape else 1
        if not (size == 1 and len(scale.shape) <= 2) and scale.shape != row:
            raise ValueError(
                f"{fn}() {name} of shape {scale.shape} is neither one scale (per tensor) nor {row} (per row); "
                f"pass a 0-d tensor or one of shape {row}"
            )
    if bias is not None:
        if bias.shape != (n,) or bias.dtype not in SCALED_MM_OUT_DTYPES:
            raise ValueError(
                f"{fn}() bias must be a ({n},) float32, bfloat16 or float16 tensor, got {bias.dtype.name} "
                f"of shape {bias.shape}"
            )
    _same_device(fn, a, ("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("bias", bias))
    backend = a._backend
    gate = KernelGate.of(backend, fn)
    # One element is per tensor (0-d in the kernel contract), whatever its shape; (M, 1) / (1, N) per row.
    sa = scale_a._data if scale_a.shape == (m, 1) and m != 1 else _per_tensor(gate, scale_a)
    sb = scale_b._data if scale_b.shape == (1, n) and n != 1 else _per_tensor(gate, scale_b)
    args = (a._data, b._data, sa, sb, out_dtype, None if bias is None else bias._data, bool(use_fast_accum))
    out = gate.scaled_mm(*args) if backend.kernels.has(fn) else scaled_mm_reference(gate, *args)
    return wrap(out, a.device, backend)


def scaled_mm_mx(
    a: Any,
    b: Any,
    scale_a: Any,
    scale_b: Any,
    out_dtype: Any,
    bias: Any = None,
    use_fast_accum: bool = False,
) -> Tensor:
    """:func:`scaled_mm` with MX block scales: ``scale_a`` (M, K / 32) holds one dequantization scale per 32
    values of each row of ``a`` (M, K), ``scale_b`` (K / 32, N) one per 32 values of each column of ``b``
    (K, N); K a multiple of 32.  The scales are float32 powers of two (e8m0 values: OCP MX), so each scaled
    operand is exact in float32; products and accumulation are float32, rounded once to ``out_dtype``.
    A backend with the ``scaled_mm_mx`` kernel runs it (a Blackwell GPU: block-scaled float8 tensor cores),
    any other the reference composition.  Records no autograd.
    """
    fn = "scaled_mm_mx"
    a, b = _tensor("a", a, fn), _tensor("b", b, fn)
    scale_a, scale_b = _tensor("scale_a", scale_a, fn), _tensor("scale_b", scale_b, fn)
    if bias is not None:
        bias = _tensor("bias", bias, fn)
    for name, t in (("a", a), ("b", b)):
        if t.dtype not in QUANTIZE_DTYPES:
            raise TypeError(
                f"{fn}() {name} must be float8_e4m3fn or float8_e5m2, got {t.dtype.name}; "
                "quantize it with ampcore.ops.float8.quantize_float8"
            )
        if len(t.shape) != 2:
            raise ValueError(f"{fn}() {name} must be a matrix, got shape {t.shape}")
    (m, ka), (kb, n) = a.shape, b.shape
    if ka != kb:
        raise ValueError(f"{fn}() shapes {a.shape} and {b.shape} cannot be multiplied ({ka} != {kb})")
    if ka % MX_BLOCK:
        raise ValueError(f"{fn}() needs K a multiple of {MX_BLOCK}, got K = {ka}; pad both operands with zeros")
    out_dtype = _choice(fn, "out_dtype", out_dtype, SCALED_MM_OUT_DTYPES)
    for name, scale, want in (("scale_a", scale_a, (m, ka // MX_BLOCK)), ("scale_b", scale_b, (ka // MX_BLOCK, n))):
        _float32_scale(fn, name, scale)
        if scale.shape != want:
            raise ValueError(
                f"{fn}() {name} of shape {scale.shape} is not one scale per {MX_BLOCK} values along K; "
                f"pass one of shape {want}"
            )
    if bias is not None and (bias.shape != (n,) or bias.dtype not in SCALED_MM_OUT_DTYPES):
        raise ValueError(
            f"{fn}() bias must be a ({n},) float32, bfloat16 or float16 tensor, got {bias.dtype.name} "
            f"of shape {bias.shape}"
        )
    _same_device(fn, a, ("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("bias", bias))
    backend = a._backend
    gate = KernelGate.of(backend, fn)
    args = (
        a._data,
        b._data,
        scale_a._data,
        scale_b._data,
        out_dtype,
        None if bias is None else bias._data,
        bool(use_fast_accum),
    )
    out = gate.scaled_mm_mx(*args) if backend.kernels.has(fn) else scaled_mm_mx_reference(gate, *args)
    return wrap(out, a.device, backend)


def scaled_mm_torch(
    self: Any,
    mat2: Any,
    scale_a: Any,
    scale_b: Any,
    bias: Any = None,
    scale_result: Any = None,
    out_dtype: Any = None,
    use_fast_accum: bool = False,
) -> Tensor:
    """``torch._scaled_mm`` with its signature (``ampcore._scaled_mm``): :func:`scaled_mm` with
    ``out_dtype`` defaulting to ``self``'s dtype.

    A float8 ``out_dtype`` is torch's CPU rule: the float32 result times
    ``1 / scale_result`` (float32, 1 when None), cast without saturation.
    ``scale_result`` is ignored for the other output dtypes, as in torch.
    """
    out = dt.as_dtype(self.dtype if out_dtype is None else out_dtype)
    if out not in QUANTIZE_DTYPES:
        return scaled_mm(self, mat2, scale_a, scale_b, out, bias, use_fast_accum)
    wide = scaled_mm(self, mat2, scale_a, scale_b, dt.float32, bias, use_fast_accum)
    gate = KernelGate.of(wide._backend, "scaled_mm")
    if scale_result is not None:
        scale_result = _tensor("scale_result", scale_result, "_scaled_mm")
        _float32_scale("_scaled_mm", "scale_result", scale_result)
        if int(np.prod(scale_result.shape)) != 1:
            raise ValueError(f"_scaled_mm() scale_result must be one float32 value, got shape {scale_result.shape}")
        _same_device("_scaled_mm", wide, ("scale_result", scale_result))
    if scale_result is None:
        inverse = gate.from_numpy(np.asarray(1.0, np.float32), dt.float32, wide.device.index)
    else:  # 1 / scale_result on the device: no host read
        inverse = gate.div(gate.full((), 1.0, dt.float32, wide.device.index), _per_tensor(gate, scale_result))
    return quantize_float8(wide, wrap(inverse, wide.device, wide._backend), out, saturate=False)[0]
