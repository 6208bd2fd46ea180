"""The dtype set, type promotion and ``finfo``.

One table names every dtype; everything else (parsing, promotion, NumPy
equivalents) is derived from it.  bfloat16 is ``ml_dtypes.bfloat16`` on the
NumPy side: 2 bytes per element, float32's exponent range, 8 bits of precision.

The OCP float8 formats are ml_dtypes' too: ``float8_e4m3fn`` (max 448, no
inf: overflow is NaN), ``float8_e5m2`` (max 57344, with inf) and MX's
``float8_e8m0fnu`` (a power of two 2**-127 .. 2**127, NaN, no zero, no sign:
block scales only, never arithmetic).  They are storage formats: tensors of
them are made by casts and by :func:`ampcore.ops.float8.quantize_float8` and
read by casts and :func:`ampcore.ops.float8.scaled_mm`.  They are kept out of
:data:`ALL_DTYPES` (the dtypes every backend stores and computes in) and
listed in :data:`FLOAT8_DTYPES`; a backend says whether it stores them in
:attr:`ampcore.Capabilities.float8`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from .names import did_you_mean

__all__ = [
    "DType",
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "bool_",
    "ALL_DTYPES",
    "FLOAT_DTYPES",
    "LOW_PRECISION_DTYPES",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e8m0fnu",
    "FLOAT8_DTYPES",
    "as_dtype",
    "convert",
    "promote_types",
    "result_type",
    "finfo",
    "FInfo",
    "TORCH_ALIASES",
    "UNSUPPORTED_TORCH_DTYPES",
    "UnsupportedDTypeError",
    "unsupported_dtype_error",
]


_INTERNED: dict[str, DType] = {}


@dataclass(frozen=True, eq=False, init=False)
class DType:
    """A dtype ampcore knows: its name, NumPy equivalent and kind.

    Each dtype exists once (constructing one with a known name returns it; pickling and copying return it),
    so equality and hashing are identity's, done in C: ops compare and hash dtypes on every call.
    """

    name: str
    itemsize: int
    kind: str  # "f" floating, "i" signed integer, "b" bool
    numpy: Any
    # Stored, not a property: the op path reads it on most calls, and a property is a function call.
    is_floating_point: bool = field(init=False, repr=False)

    def __new__(cls, name: str, itemsize: int, kind: str, numpy: Any) -> DType:
        existing = _INTERNED.get(name)
        if existing is None:
            return super().__new__(cls)
        if (existing.itemsize, existing.kind, existing.numpy) != (itemsize, kind, np.dtype(numpy)):
            raise ValueError(
                f"dtype {name!r} already exists as {existing.itemsize} bytes, kind {existing.kind!r}, "
                f"NumPy {existing.numpy}; use ampcore.{name} instead of constructing another"
            )
        return existing

    def __init__(self, name: str, itemsize: int, kind: str, numpy: Any) -> None:
        if _INTERNED.get(name) is self:  # __new__ returned the existing dtype: it is already set up
            return
        settings = {"name": name, "itemsize": itemsize, "kind": kind, "numpy": np.dtype(numpy)}
        for attribute, value in {**settings, "is_floating_point": kind == "f"}.items():
            object.__setattr__(self, attribute, value)
        _INTERNED[name] = self

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return _interned, (self.name,)

    def __repr__(self) -> str:
        return f"ampcore.{self.name}"

    __str__ = __repr__


def _interned(name: str) -> DType:
    """The one DType called ``name`` (what unpickling and copying a DType return)."""
    return _INTERNED[name]


float64 = DType("float64", 8, "f", np.dtype(np.float64))
float32 = DType("float32", 4, "f", np.dtype(np.float32))
float16 = DType("float16", 2, "f", np.dtype(np.float16))
bfloat16 = DType("bfloat16", 2, "f", np.dtype(ml_dtypes.bfloat16))
int64 = DType("int64", 8, "i", np.dtype(np.int64))
int32 = DType("int32", 4, "i", np.dtype(np.int32))
bool_ = DType("bool", 1, "b", np.dtype(np.bool_))

ALL_DTYPES: tuple[DType, ...] = (float64, float32, float16, bfloat16, int64, int32, bool_)
FLOAT_DTYPES: tuple[DType, ...] = (float64, float32, float16, bfloat16)
LOW_PRECISION_DTYPES: tuple[DType, ...] = (float16, bfloat16)

float8_e4m3fn = DType("float8_e4m3fn", 1, "f", np.dtype(ml_dtypes.float8_e4m3fn))
float8_e5m2 = DType("float8_e5m2", 1, "f", np.dtype(ml_dtypes.float8_e5m2))
float8_e8m0fnu = DType("float8_e8m0fnu", 1, "f", np.dtype(ml_dtypes.float8_e8m0fnu))
FLOAT8_DTYPES: tuple[DType, ...] = (float8_e4m3fn, float8_e5m2, float8_e8m0fnu)

_BY_NAME = {d.name: d for d in ALL_DTYPES + FLOAT8_DTYPES}
_BY_NAME.update(
    {
        "bool_": bool_,
        "half": float16,
        "float": float32,
        "double": float64,
        "bf16": bfloat16,
        "fp16": float16,
        "fp32": float32,
        "fp64": float64,
        "long": int64,
        "int": int32,
        "e4m3": float8_e4m3fn,
        "e5m2": float8_e5m2,
        "e8m0": float8_e8m0fnu,
    }
)
_BY_NUMPY = {d.numpy: d for d in ALL_DTYPES + FLOAT8_DTYPES}

# torch's dtype aliases ampcore can store, exported on ``ampcore`` (``ampcore.long`` is ``ampcore.int64``).
TORCH_ALIASES: dict[str, DType] = {
    "long": int64,
    "int": int32,
    "half": float16,
    "float": float32,
    "double": float64,
    "bool": bool_,
}

_INTS = "ampcore stores int64 and int32 (and bool for masks): use ampcore.int64 or ampcore.int32"
_COMPLEX = "ampcore has no complex dtypes: keep real and imaginary parts in two float tensors"
_FLOAT8 = (
    "ampcore stores the OCP float8 formats ampcore.float8_e4m3fn, float8_e5m2 and float8_e8m0fnu "
    "(ampcore.float8 trains with them); the AMD fnuz variants and float4 are not supported"
)
_QUANT = "ampcore has no quantized dtypes"
# torch dtype names ampcore cannot represent -> what to do instead.
UNSUPPORTED_TORCH_DTYPES: dict[str, str] = {
    **dict.fromkeys(("uint8", "int8", "int16", "short", "uint16", "uint32", "uint64", "bits8", "bits16"), _INTS),
    **dict.fromkeys(("complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf"), _COMPLEX),
    **dict.fromkeys(
        ("float8_e4m3fnuz", "float8_e5m2fnuz", "float4_e2m1fn_x2"),
        _FLOAT8,
    ),
    **dict.fromkeys(("qint8", "quint8", "qint32", "quint4x2", "quint2x4"), _QUANT),
}


class UnsupportedDTypeError(AttributeError, ValueError):
    """A torch dtype ampcore cannot store (``ampcore.uint8``, ``as_dtype("complex64")``).

    An AttributeError, so ``hasattr(ampcore, "uint8")`` is False and ``getattr(ampcore, name, default)``
    works; a ValueError, as ``as_dtype`` raises for every name it does not know.
    """


def unsupported_dtype_error(name: str) -> UnsupportedDTypeError | None:
    """The error for the torch dtype ``name`` that ampcore does not support, or None if ``name`` is not one."""
    remedy = UNSUPPORTED_TORCH_DTYPES.get(name)
    if remedy is None:
        return None
    return UnsupportedDTypeError(f"ampcore does not support the torch dtype {name!r}; {remedy}")


def as_dtype(value: Any) -> DType:
    """Return the DType for a DType, a name (``"bfloat16"``, ``"fp16"``) or a NumPy dtype.

    Raises TypeError for anything else and ValueError for an unknown name.
    """
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        try:
            return _BY_NAME[value]
        except KeyError:
            unsupported = unsupported_dtype_error(value)
            if unsupported is not None:
                raise unsupported from None
            known = ", ".join(repr(d.name) for d in ALL_DTYPES + FLOAT8_DTYPES)
            hint = did_you_mean(value, _BY_NAME)
            raise ValueError(f"unknown dtype {value!r}{hint}; known dtypes are {known}") from None
    try:
        np_dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"expected a dtype (ampcore.float32, 'float16', ...), got {value!r}") from None
    try:
        return _BY_NUMPY[np_dtype]
    except KeyError:
        known = ", ".join(repr(d.name) for d in ALL_DTYPES + FLOAT8_DTYPES)
        raise ValueError(f"NumPy dtype {np_dtype!r} has no ampcore equivalent; use one of {known}") from None


# Lattice order: bool < ints < floats; among floats, float16 and bfloat16 are
# incomparable and meet at float32 (as in torch and the Array API).
_RANK = {bool_: 0, int32: 1, int64: 2, float16: 3, bfloat16: 3, float32: 4, float64: 5}


def promote_types(a: DType, b: DType) -> DType:
    """The smallest dtype both ``a`` and ``b`` convert to without losing range.

    float16 with bfloat16 gives float32; an integer with a float gives the float.
    """
    a, b = as_dtype(a), as_dtype(b)
    if a == b:
        return a
    if a in FLOAT8_DTYPES or b in FLOAT8_DTYPES:
        raise TypeError(
            f"no type promotion between {a.name} and {b.name}: float8 tensors are storage; "
            "cast them explicitly (x.to(ampcore.float32)) before combining them"
        )
    if {a, b} == {float16, bfloat16}:
        return float32
    return a if _RANK[a] > _RANK[b] else b


def result_type(*dtypes: DType) -> DType:
    """Fold :func:`promote_types` over several dtypes."""
    if not dtypes:
        raise ValueError("result_type needs at least one dtype")
    out = as_dtype(dtypes[0])
    for d in dtypes[1:]:
        out = promote_types(out, d)
    return out


@dataclass(frozen=True)
class FInfo:
    """Machine limits of a floating dtype (values as Python floats)."""

    dtype: DType
    bits: int
    eps: float
    max: float
    min: float
    tiny: float  # smallest positive normal number
    smallest_subnormal: float


def finfo(dtype: Any) -> FInfo:
    """Limits of a floating dtype: fp16 max 65504, eps 2**-10; bf16 max ~3.39e38, eps 2**-7;
    float8_e4m3fn max 448, eps 2**-3; float8_e5m2 max 57344, eps 2**-2."""
    d = as_dtype(dtype)
    if not d.is_floating_point:
        raise TypeError(f"finfo needs a floating dtype, got {d.name!r}")
    info = ml_dtypes.finfo(d.numpy) if d is bfloat16 or d in FLOAT8_DTYPES else np.finfo(d.numpy)
    return FInfo(
        d,
        d.itemsize * 8,
        float(info.eps),
        float(info.max),
        float(info.min),
        float(info.tiny),
        float(info.smallest_subnormal),
    )


_VIA_ODD_FLOAT32 = frozenset(d.numpy for d in (bfloat16,) + FLOAT8_DTYPES)


def convert(array: Any, dtype: Any) -> np.ndarray:
    """``array`` as a new NumPy array of ``dtype``, rounded once to nearest-even.

    NumPy's ``astype`` does that for every pair but float64 -> bfloat16, which
    ml_dtypes converts through float32 and so rounds twice (1 + 2**-8 + 2**-40
    becomes 1.0, not 1.0078125).  Here that pair goes through float32 rounded
    to *odd* (truncate, then set the last bit if anything was dropped): 24 bits
    keep enough to round correctly to bfloat16's 8.  ml_dtypes converts float64
    to the float8 formats through float32 too, so they take the same path.
    """
    target = as_dtype(dtype).numpy
    a = np.asarray(array)
    if a.dtype != np.float64 or target not in _VIA_ODD_FLOAT32:
        with np.errstate(over="ignore", invalid="ignore"):  # IEEE: too large rounds to inf, quietly
            return a.astype(target)
    with np.errstate(over="ignore", invalid="ignore"):
        f = a.astype(np.float32)
        wide = f.astype(np.float64)
        inexact = np.isfinite(a) & (wide != a)
        toward_zero = np.where(np.abs(wide) > np.abs(a), np.nextafter(f, np.float32(0)), f)
        odd = toward_zero.view(np.uint32) | inexact.astype(np.uint32)
    return odd.view(np.float32).astype(target)
