"""The simulator's cuBLASLt: the part of ``nvmath.bindings.cublasLt`` the cuda backend's float8 GEMM calls
(same function names, signatures, enum values and errors), over the simulator's host memory; nvmath-python is
not needed.

It refuses what cuBLASLt refuses for float8, per the cuBLAS documentation (``cublasLtMatmul``, "To use FP8
kernels...", and "Narrow Precision Data Types Usage"): every refusal is :class:`cuBLASLtError` with the status
cuBLASLt returns, and each names the rule.

- A and B ``CUDA_R_8F_E4M3`` / ``CUDA_R_8F_E5M2``, not both e5m2; ``CUBLAS_COMPUTE_32F``, scale type
  ``CUDA_R_32F``; compute capability 8.9 or more.
- Before compute capability 10.0, "TN": A transposed, B not.
- 16-byte alignment: every matrix pointer, every leading dimension in bytes, K, and the rows of D in bytes.
- C of D's type (a float8 D is not implemented here); a bias epilogue of the documented bias type
  (bfloat16 for a bfloat16 or float32 D, float16 for a float16 D); beta 0 (alpha, beta host float32).
- Scale modes (the ``*_SCALE_MODE`` attributes exist from cuBLASLt 12.8): per-tensor ``SCALAR_32F`` (the
  default); ``OUTER_VEC_32F`` on both A and B only on compute capability 9.x with cuBLASLt 12.9 or later;
  ``VEC32_UE8M0`` on both only from compute capability 10.0 (cuBLASLt 12.8), K a multiple of 32, the
  e8m0 scales in cuBLASLt's tiled layout (128 x 4 blocks, 16-byte aligned).

What it computes is the documented formula: ``D = alpha * scale_A * scale_B * op(A) op(B) (+ bias)``, the
products of the float8 values exact and accumulated in float32, the scale factor (a scalar, or per row of
op(A) and per column of op(B) for outer-vector scaling) multiplied in float32 onto the accumulator, the bias
added in float32, one rounding to D's type.  Block scaling applies each block's pair of scales to that
block's float32 partial sum (``Dot(x, y) = S^x S^y sum x_i y_i``), the partial sums accumulated in float32.
Anything else the backend never asks for raises :class:`CublasLtSimError`.
"""

from __future__ import annotations

import ctypes
import enum
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from ampcore import dtypes as dt

from . import capture
from .devices import Profile

__all__ = ["CublasLtSimError", "cuBLASLtError", "make_cublaslt", "VERSION"]

VERSION = 120901  # cuBLASLt 12.9.1: what nvidia-cublas-cu12 on PyPI installs beside cupy-cuda12x[ctk]
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF, CUDA_R_8F_E4M3, CUDA_R_8F_E5M2 = 0, 2, 14, 28, 29
CUBLAS_COMPUTE_32F = 68
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
STATUS = {1: "CUBLAS_STATUS_NOT_INITIALIZED", 7: "CUBLAS_STATUS_INVALID_VALUE", 15: "CUBLAS_STATUS_NOT_SUPPORTED"}
_INVALID, _NOT_SUPPORTED = 7, 15
_FLOAT8 = {CUDA_R_8F_E4M3: ml_dtypes.float8_e4m3fn, CUDA_R_8F_E5M2: ml_dtypes.float8_e5m2}
_SIZE = {CUDA_R_32F: 4, CUDA_R_16F: 2, CUDA_R_16BF: 2, CUDA_R_8F_E4M3: 1, CUDA_R_8F_E5M2: 1}
_BIAS = {CUDA_R_16BF: CUDA_R_16BF, CUDA_R_32F: CUDA_R_16BF, CUDA_R_16F: CUDA_R_16F}  # D type -> bias type


class MatmulDescAttribute(enum.IntEnum):
    """``cublasLtMatmulDescAttributes_t`` (nvmath's names and values)."""

    COMPUTE_TYPE = 0
    SCALE_TYPE = 1
    POINTER_MODE = 2
    TRANSA = 3
    TRANSB = 4
    TRANSC = 5
    EPILOGUE = 7
    BIAS_POINTER = 8
    A_SCALE_POINTER = 17
    B_SCALE_POINTER = 18
    C_SCALE_POINTER = 19
    D_SCALE_POINTER = 20
    AMAX_D_POINTER = 21
    FAST_ACCUM = 25
    BIAS_DATA_TYPE = 26
    A_SCALE_MODE = 31
    B_SCALE_MODE = 32


class MatmulMatrixScale(enum.IntEnum):
    """``cublasLtMatmulMatrixScale_t``."""

    SCALAR_32F = 0
    VEC16_UE4M3 = 1
    VEC32_UE8M0 = 2
    OUTER_VEC_32F = 3
    VEC128_32F = 4
    BLK128x128_32F = 5


class MatmulPreferenceAttribute(enum.IntEnum):
    """``cublasLtMatmulPreferenceAttributes_t``."""

    SEARCH_MODE = 0
    MAX_WORKSPACE_BYTES = 1


class Epilogue(enum.IntEnum):
    """``cublasLtEpilogue_t``."""

    DEFAULT = 1
    BIAS = 4


class PointerMode(enum.IntEnum):
    """``cublasLtPointerMode_t``."""

    HOST = 0
    DEVICE = 1


_DESC_DTYPES = {
    **dict.fromkeys(
        (
            MatmulDescAttribute.COMPUTE_TYPE,
            MatmulDescAttribute.SCALE_TYPE,
            MatmulDescAttribute.POINTER_MODE,
            MatmulDescAttribute.TRANSA,
            MatmulDescAttribute.TRANSB,
            MatmulDescAttribute.TRANSC,
            MatmulDescAttribute.BIAS_DATA_TYPE,
            MatmulDescAttribute.A_SCALE_MODE,
            MatmulDescAttribute.B_SCALE_MODE,
        ),
        np.int32,
    ),
    MatmulDescAttribute.EPILOGUE: np.uint32,
    MatmulDescAttribute.FAST_ACCUM: np.int8,
    **dict.fromkeys(
        (
            MatmulDescAttribute.BIAS_POINTER,
            MatmulDescAttribute.A_SCALE_POINTER,
            MatmulDescAttribute.B_SCALE_POINTER,
            MatmulDescAttribute.C_SCALE_POINTER,
            MatmulDescAttribute.D_SCALE_POINTER,
            MatmulDescAttribute.AMAX_D_POINTER,
        ),
        np.int64,
    ),
}
_PREF_DTYPES = {
    MatmulPreferenceAttribute.SEARCH_MODE: np.uint32,
    MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES: np.uint64,
}
matmul_heuristic_result_dtype = np.dtype(
    [
        ("algo", [("data_", "<u8", (8,))]),
        ("workspace_size", "<u8"),
        ("state", "<i4"),
        ("waves_count", "<f4"),
        ("reserved", "<i4", (4,)),
    ]
)
_ALGO_MAGIC = 0xA1C0_F8F8  # written into the algo a heuristic returns: matmul refuses an algo it never gave


class cuBLASLtError(Exception):  # noqa: N801 - nvmath's name
    """What nvmath raises for a cuBLASLt status other than success: ``status`` and its name."""

    def __init__(self, status: int, why: str = "") -> None:
        self.status = status
        super().__init__(f"{STATUS.get(status, status)} ({status}){': ' + why if why else ''}")


class CublasLtSimError(RuntimeError):
    """A cuBLASLt call or combination the stand-in does not implement (the backend never makes it)."""


def get_matmul_desc_attribute_dtype(attr: int) -> Any:
    """nvmath's helper: the NumPy type of a matmul descriptor attribute."""
    try:
        return _DESC_DTYPES[MatmulDescAttribute(attr)]
    except (KeyError, ValueError):
        raise CublasLtSimError(f"matmul descriptor attribute {attr} is not implemented by the stand-in") from None


def get_matmul_preference_attribute_dtype(attr: int) -> Any:
    """nvmath's helper: the NumPy type of a matmul preference attribute."""
    try:
        return _PREF_DTYPES[MatmulPreferenceAttribute(attr)]
    except (KeyError, ValueError):
        raise CublasLtSimError(f"matmul preference attribute {attr} is not implemented by the stand-in") from None


class MatmulHeuristicResult:
    """nvmath's ``MatmulHeuristicResult(size)``: ``size`` zeroed ``cublasLtMatmulHeuristicResult_t`` at ``ptr``."""

    def __init__(self, size: int = 1) -> None:
        self._data = np.zeros(size, dtype=matmul_heuristic_result_dtype)

    @property
    def ptr(self) -> int:
        return int(self._data.ctypes.data)

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __len__(self) -> int:
        return len(self._data)


def _memory(ptr: int, nbytes: int) -> np.ndarray:
    """``nbytes`` of simulator device memory at ``ptr`` as a writable uint8 array."""
    if nbytes <= 0:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))


def _column_major(ptr: int, kind: int, rows: int, cols: int, ld: int) -> np.ndarray:
    """The ``rows x cols`` column-major matrix at ``ptr`` (leading dimension ``ld``) as float32 (exact)."""
    size = _SIZE[kind]
    raw = _memory(ptr, ((cols - 1) * ld + rows) * size)
    words = raw.view({1: np.uint8, 2: np.uint16, 4: np.float32}[size])
    stored = np.lib.stride_tricks.as_strided(words, (rows, cols), (size, ld * size), writeable=False)
    if kind in _FLOAT8:
        return stored.view(_FLOAT8[kind]).astype(np.float32)
    if kind == CUDA_R_16BF:
        return (stored.astype(np.uint32) << 16).view(np.float32)
    if kind == CUDA_R_16F:
        return stored.view(np.float16).astype(np.float32)
    return stored.astype(np.float32)


def _vector(ptr: int, kind: int, n: int) -> np.ndarray:
    return _column_major(ptr, kind, n, 1, max(n, 1))[:, 0]


@dataclass
class _Layout:
    kind: int
    rows: int
    cols: int
    ld: int


@dataclass
class _Desc:
    compute: int
    scale_type: int
    attrs: dict[int, int] = field(default_factory=dict)

    def get(self, attr: MatmulDescAttribute, default: int = 0) -> int:
        return self.attrs.get(int(attr), default)


class CublasLt:
    """One simulated device's cuBLASLt (``make_cublaslt(profile)``), with nvmath's function names."""

    MatmulDescAttribute = MatmulDescAttribute
    MatmulMatrixScale = MatmulMatrixScale
    MatmulPreferenceAttribute = MatmulPreferenceAttribute
    Epilogue = Epilogue
    PointerMode = PointerMode
    MatmulHeuristicResult = MatmulHeuristicResult
    cuBLASLtError = cuBLASLtError  # noqa: N815 - nvmath's name
    matmul_heuristic_result_dtype = matmul_heuristic_result_dtype
    get_matmul_desc_attribute_dtype = staticmethod(get_matmul_desc_attribute_dtype)
    get_matmul_preference_attribute_dtype = staticmethod(get_matmul_preference_attribute_dtype)

    def __init__(self, profile: Profile, version: int = VERSION) -> None:
        self.profile = profile
        self.version = version  # tests lower it to see the version gates
        self.cc = (profile.major, profile.minor)
        self._ids = itertools.count(1)
        self._objects: dict[int, Any] = {}
        self._lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []  # each matmul's modes and types, for tests

    # ---------------------------------------------------------------- objects
    def _new(self, obj: Any) -> int:
        with self._lock:
            handle = next(self._ids) * 16
            self._objects[handle] = obj
        return handle

    def _get(self, handle: int, kind: type, what: str) -> Any:
        obj = self._objects.get(int(handle))
        if not isinstance(obj, kind):
            raise cuBLASLtError(
                _INVALID if handle else 1, f"{what} {handle:#x} is not a live {kind.__name__.strip('_')}"
            )
        return obj

    def _destroy(self, handle: int, kind: type, what: str) -> None:
        self._get(handle, kind, what)
        with self._lock:
            del self._objects[int(handle)]

    def get_version(self) -> int:
        return self.version

    def create(self) -> int:
        return self._new("handle")

    def destroy(self, handle: int) -> None:
        self._destroy(handle, str, "handle")

    def matmul_desc_create(self, compute_type: int, scale_type: int) -> int:
        return self._new(_Desc(int(compute_type), int(scale_type)))

    def matmul_desc_destroy(self, desc: int) -> None:
        self._destroy(desc, _Desc, "matmul descriptor")

    def matmul_desc_set_attribute(self, desc: int, attr: int, buf: int, size: int) -> None:
        d = self._get(desc, _Desc, "matmul descriptor")
        dtype = np.dtype(get_matmul_desc_attribute_dtype(attr))
        if size != dtype.itemsize:
            raise cuBLASLtError(_INVALID, f"attribute {MatmulDescAttribute(attr).name} takes {dtype.itemsize} bytes")
        if attr in (MatmulDescAttribute.A_SCALE_MODE, MatmulDescAttribute.B_SCALE_MODE) and self.version < 120800:
            raise cuBLASLtError(_INVALID, f"cuBLASLt {self.version} has no scale-mode attributes (12.8+)")
        d.attrs[int(attr)] = int(np.frombuffer(_memory(buf, size).tobytes(), dtype=dtype)[0])

    def matrix_layout_create(self, kind: int, rows: int, cols: int, ld: int) -> int:
        if kind not in _SIZE:
            raise CublasLtSimError(f"matrix type {kind} is not implemented by the stand-in")
        return self._new(_Layout(int(kind), int(rows), int(cols), int(ld)))

    def matrix_layout_destroy(self, layout: int) -> None:
        self._destroy(layout, _Layout, "matrix layout")

    def matmul_preference_create(self) -> int:
        return self._new({})

    def matmul_preference_destroy(self, pref: int) -> None:
        self._destroy(pref, dict, "preference")

    def matmul_preference_set_attribute(self, pref: int, attr: int, buf: int, size: int) -> None:
        p = self._get(pref, dict, "preference")
        dtype = np.dtype(get_matmul_preference_attribute_dtype(attr))
        p[int(attr)] = int(np.frombuffer(_memory(buf, size).tobytes(), dtype=dtype)[0])

    # ---------------------------------------------------------------- the rules
    def _check(self, d: _Desc, a: _Layout, b: _Layout, c: _Layout, out: _Layout) -> tuple[int, int, int]:
        """(m, n, k) of ``D = op(A) op(B)`` if cuBLASLt runs this float8 problem; cuBLASLtError if it refuses."""
        refuse = lambda why: cuBLASLtError(_NOT_SUPPORTED, why)  # noqa: E731 - one status, many rules
        if self.cc < (8, 9):
            raise refuse(f"float8 GEMMs need compute capability 8.9+, this device has {self.cc[0]}.{self.cc[1]}")
        if a.kind not in _FLOAT8 or b.kind not in _FLOAT8:
            raise CublasLtSimError(f"A type {a.kind}, B type {b.kind}: the stand-in implements float8 A and B only")
        if a.kind == b.kind == CUDA_R_8F_E5M2:
            raise refuse("A and B both CUDA_R_8F_E5M2 is not a supported type combination")
        if d.compute != CUBLAS_COMPUTE_32F or d.scale_type != CUDA_R_32F:
            raise refuse("float8 needs CUBLAS_COMPUTE_32F and scale type CUDA_R_32F")
        ta, tb = d.get(MatmulDescAttribute.TRANSA), d.get(MatmulDescAttribute.TRANSB)
        if self.cc < (10, 0) and (ta, tb) != (CUBLAS_OP_T, CUBLAS_OP_N):
            raise refuse(f"before sm_100 float8 needs A transposed and B not (TN), got transa={ta}, transb={tb}")
        if ta not in (CUBLAS_OP_N, CUBLAS_OP_T) or tb not in (CUBLAS_OP_N, CUBLAS_OP_T):
            raise CublasLtSimError(f"transa={ta}, transb={tb}: the stand-in implements CUBLAS_OP_N and CUBLAS_OP_T")
        m, k = (a.cols, a.rows) if ta == CUBLAS_OP_T else (a.rows, a.cols)
        kb, n = (b.cols, b.rows) if tb == CUBLAS_OP_T else (b.rows, b.cols)
        if k != kb or (out.rows, out.cols) != (m, n) or (c.rows, c.cols) != (m, n):
            raise cuBLASLtError(
                _INVALID, f"op(A) {m}x{k}, op(B) {kb}x{n}, C {c.rows}x{c.cols}, D {out.rows}x{out.cols}"
            )
        for name, lay in (("A", a), ("B", b), ("C", c), ("D", out)):
            if lay.ld < max(1, lay.rows):
                raise cuBLASLtError(_INVALID, f"ld{name} = {lay.ld} < rows {lay.rows}")
            if (lay.ld * _SIZE[lay.kind]) % 16:
                raise refuse(f"ld{name} = {lay.ld} is not a multiple of 16 bytes")
        if k % 16 or (m * _SIZE[out.kind]) % 16:
            raise refuse(f"K = {k} and the {m} rows of D must each span a multiple of 16 bytes")
        if out.kind in _FLOAT8:
            raise CublasLtSimError("a float8 D is not implemented by the stand-in")
        if out.kind not in _BIAS or c.kind != out.kind:
            raise refuse(f"C type {c.kind} and D type {out.kind} are not a supported float8 combination")
        epilogue = d.get(MatmulDescAttribute.EPILOGUE, Epilogue.DEFAULT)
        if epilogue not in (Epilogue.DEFAULT, Epilogue.BIAS):
            raise CublasLtSimError(f"epilogue {epilogue} is not implemented by the stand-in")
        if epilogue == Epilogue.BIAS and d.get(MatmulDescAttribute.BIAS_DATA_TYPE, out.kind) != _BIAS[out.kind]:
            raise refuse(f"a bias for D type {out.kind} must be of type {_BIAS[out.kind]}")
        for attr in (MatmulDescAttribute.D_SCALE_POINTER, MatmulDescAttribute.AMAX_D_POINTER):
            if d.get(attr):
                raise cuBLASLtError(_INVALID, f"{attr.name} is set but D is not a float8 matrix")
        if d.get(MatmulDescAttribute.POINTER_MODE) != PointerMode.HOST:
            raise CublasLtSimError("the stand-in implements CUBLASLT_POINTER_MODE_HOST only")
        self._check_scales(d, m, n, k)
        return m, n, k

    def _check_scales(self, d: _Desc, m: int, n: int, k: int) -> None:
        modes = (d.get(MatmulDescAttribute.A_SCALE_MODE), d.get(MatmulDescAttribute.B_SCALE_MODE))
        outer, block = MatmulMatrixScale.OUTER_VEC_32F, MatmulMatrixScale.VEC32_UE8M0
        if modes == (outer, outer):
            if self.cc[0] != 9 or self.version < 120900:
                raise cuBLASLtError(
                    _NOT_SUPPORTED,
                    f"outer-vector scaling needs compute capability 9.x and cuBLASLt 12.9+ "
                    f"(sm_{self.cc[0]}{self.cc[1]}, cuBLASLt {self.version})",
                )
        elif modes == (block, block):
            if self.cc < (10, 0) or self.version < 120800:
                raise cuBLASLtError(
                    _NOT_SUPPORTED, f"VEC32_UE8M0 block scaling needs sm_100+, this is sm_{self.cc[0]}{self.cc[1]}"
                )
            if k % 32:
                raise cuBLASLtError(_NOT_SUPPORTED, f"block scaling needs K a multiple of 32, got {k}")
        elif modes != (MatmulMatrixScale.SCALAR_32F,) * 2:
            raise CublasLtSimError(f"scale modes {modes}: the stand-in implements (0, 0), (3, 3) and (2, 2)")
        for attr in (MatmulDescAttribute.A_SCALE_POINTER, MatmulDescAttribute.B_SCALE_POINTER):
            ptr = d.get(attr)
            if not ptr:
                raise CublasLtSimError(f"{attr.name} unset: the backend always passes its scales")
            if modes[0] == block and ptr % 16:
                raise cuBLASLtError(_INVALID, f"{attr.name} {ptr:#x}: block scales must be 16-byte aligned")

    # ---------------------------------------------------------------- the calls
    def matmul_algo_get_heuristic(
        self, handle: int, desc: int, adesc: int, bdesc: int, cdesc: int, ddesc: int, pref: int, count: int,
        results: int, returned: int,
    ) -> None:  # fmt: skip
        self._get(handle, str, "handle")
        self._get(pref, dict, "preference")
        d = self._get(desc, _Desc, "matmul descriptor")
        layouts = [self._get(h, _Layout, "matrix layout") for h in (adesc, bdesc, cdesc, ddesc)]
        self._check(d, *layouts)
        out = np.zeros(max(count, 1), dtype=matmul_heuristic_result_dtype)
        out[0]["algo"]["data_"][0] = _ALGO_MAGIC
        _memory(results, matmul_heuristic_result_dtype.itemsize)[:] = out[:1].view(np.uint8)
        _memory(returned, 4)[:] = np.array([1], np.int32).view(np.uint8)

    def matmul(
        self, handle: int, desc: int, alpha: int, a: int, adesc: int, b: int, bdesc: int, beta: int, c: int,
        cdesc: int, d: int, ddesc: int, algo: int, workspace: int, workspace_size: int, stream: int,
    ) -> None:  # fmt: skip
        self._get(handle, str, "handle")
        desc_ = self._get(desc, _Desc, "matmul descriptor")
        la, lb, lc, ld = (self._get(h, _Layout, "matrix layout") for h in (adesc, bdesc, cdesc, ddesc))
        m, n, k = self._check(desc_, la, lb, lc, ld)
        if not algo or int(np.frombuffer(_memory(algo, 8).tobytes(), np.uint64)[0]) != _ALGO_MAGIC:
            raise cuBLASLtError(_INVALID, "the algo was not returned by cublasLtMatmulAlgoGetHeuristic")
        for name, ptr in (("A", a), ("B", b), ("C", c), ("D", d)):
            if not ptr or ptr % 16:
                raise cuBLASLtError(_INVALID, f"the {name} pointer {ptr:#x} is not 16-byte aligned")
        alpha32, beta32 = (np.frombuffer(_memory(p, 4).tobytes(), np.float32)[0] for p in (alpha, beta))
        if beta32 != 0:
            raise CublasLtSimError("beta != 0 is not implemented by the stand-in")
        modes = (desc_.get(MatmulDescAttribute.A_SCALE_MODE), desc_.get(MatmulDescAttribute.B_SCALE_MODE))
        self.calls.append({"modes": modes, "types": (la.kind, lb.kind, ld.kind), "m": m, "n": n, "k": k})
        # Recorded inside a stream capture with the descriptor as it is now: a graph keeps the call's arguments.
        frozen = _Desc(desc_.compute, desc_.scale_type, dict(desc_.attrs))
        capture.run(_compute, (frozen, la, lb, ld, a, b, d, alpha32, m, n, k), {}, writes=True)


def _compute(
    desc_: _Desc, la: _Layout, lb: _Layout, ld: _Layout, a: int, b: int, d: int, alpha32: Any, m: int, n: int, k: int
) -> None:
    """One cuBLASLt matmul's arithmetic, D written in place."""
    modes = (desc_.get(MatmulDescAttribute.A_SCALE_MODE), desc_.get(MatmulDescAttribute.B_SCALE_MODE))
    op_a = _column_major(a, la.kind, la.rows, la.cols, la.ld)
    op_b = _column_major(b, lb.kind, lb.rows, lb.cols, lb.ld)
    op_a = op_a.T if desc_.get(MatmulDescAttribute.TRANSA) == CUBLAS_OP_T else op_a
    op_b = op_b.T if desc_.get(MatmulDescAttribute.TRANSB) == CUBLAS_OP_T else op_b
    sa, sb = desc_.get(MatmulDescAttribute.A_SCALE_POINTER), desc_.get(MatmulDescAttribute.B_SCALE_POINTER)
    with np.errstate(all="ignore"):  # a GPU raises no floating-point warnings
        if modes[0] == MatmulMatrixScale.VEC32_UE8M0:
            value = alpha32 * _block_scaled(op_a, op_b, _block_scales(sa, m, k), _block_scales(sb, n, k))
        else:
            acc = np.matmul(op_a, op_b)  # float32 products (exact: float8) and float32 accumulation
            if modes[0] == MatmulMatrixScale.OUTER_VEC_32F:
                factor = (alpha32 * _vector(sa, CUDA_R_32F, m))[:, None] * _vector(sb, CUDA_R_32F, n)[None, :]
            else:
                factor = alpha32 * _vector(sa, CUDA_R_32F, 1)[0] * _vector(sb, CUDA_R_32F, 1)[0]
            value = (acc * factor).astype(np.float32)
        if desc_.get(MatmulDescAttribute.EPILOGUE, Epilogue.DEFAULT) == Epilogue.BIAS:
            bias = _vector(desc_.get(MatmulDescAttribute.BIAS_POINTER), _BIAS[ld.kind], m)
            value = (value + bias[:, None]).astype(np.float32)
        _store(d, ld, value)


def _block_scales(ptr: int, outer: int, k: int) -> np.ndarray:
    """The (outer, K / 32) e8m0 scales of one operand, read from cuBLASLt's tiled layout, as float32.

    The documentation's offset -> indices direction (the backend writes with indices -> offset): each 128 x 4
    tile is 512 bytes, tiles row-major; inside one ``outer = ((offset % 16) / 4) * 32 + offset / 16`` and
    ``inner = offset % 4``.
    """
    inner = k // 32
    tiles_outer, tiles_inner = -(-outer // 128), -(-inner // 4)
    raw = _memory(ptr, tiles_outer * tiles_inner * 512).reshape(tiles_outer, tiles_inner, 512)
    offset = np.arange(512)
    rows = ((offset % 16) // 4) * 32 + offset // 16
    cols = offset % 4
    grid = np.zeros((tiles_outer * 128, tiles_inner * 4), np.uint8)
    for t_o in range(tiles_outer):
        for t_i in range(tiles_inner):
            grid[t_o * 128 + rows, t_i * 4 + cols] = raw[t_o, t_i]
    return np.ldexp(np.float32(1.0), grid[:outer, :inner].astype(np.int32) - 127).astype(np.float32)


def _block_scaled(op_a: np.ndarray, op_b: np.ndarray, sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """Sum over 32-value blocks of ``sa[i, blk] * sb[j, blk] * (float32 partial sum)``, in float32."""
    m, k = op_a.shape
    n = op_b.shape[1]
    blocks = k // 32
    partial = np.matmul(op_a.reshape(m, blocks, 32).transpose(1, 0, 2), op_b.reshape(blocks, 32, n))
    total = np.zeros((m, n), np.float32)
    for j in range(blocks):
        total = (total + partial[j] * (sa[:, j, None] * sb[None, :, j])).astype(np.float32)
    return total


def _store(ptr: int, layout: _Layout, value: np.ndarray) -> None:
    """``value`` (m x n float32) rounded once to D's type, into column-major D."""
    size = _SIZE[layout.kind]
    raw = _memory(ptr, ((layout.cols - 1) * layout.ld + layout.rows) * size)
    words = raw.view({2: np.uint16, 4: np.float32}[size])
    target = np.lib.stride_tricks.as_strided(words, (layout.rows, layout.cols), (size, layout.ld * size))
    if layout.kind == CUDA_R_32F:
        target[...] = value
    elif layout.kind == CUDA_R_16BF:
        target[...] = np.asarray(dt.convert(value, dt.bfloat16)).view(np.uint16)
    else:
        target[...] = value.astype(np.float16).view(np.uint16)


_modules: dict[str, CublasLt] = {}


def make_cublaslt(profile: Profile) -> CublasLt:
    """The simulated ``nvmath.bindings.cublasLt`` of ``profile``'s device (one per profile and process)."""
    if profile.key not in _modules:
        _modules[profile.key] = CublasLt(profile)
    return _modules[profile.key]
