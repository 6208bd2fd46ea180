"""Float8: the ``quantize_float8`` and ``scaled_mm`` kernels (or the core's composition of the backend's
primitives, where it has none), on a backend whose capabilities claim float8.

* ``quantize_float8`` is bit for bit ml_dtypes' rounding of ``x * scale``: on every float16 and every
  bfloat16 value and a structured float32 sample (subnormals, ties, +-max, overflow, NaN), saturating and
  not; its amax is max|x| (0 for all zeros, inf for inf, NaN for NaN); row-wise scales scale each row.
* Casts to and from float8 are ml_dtypes' bit for bit.
* ``scaled_mm`` agrees with a float64 reference within one rounding of the output dtype plus float32
  accumulation, per tensor and per row, with a bias; a block-scaled GEMM (32-element blocks along K,
  float8_e8m0fnu scales, as MXFP8) agrees with the dequantized float64 product.

A backend whose capabilities say ``float8="none"`` skips every check as not supported, with its reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore.conformance import NOT_SUPPORTED
from ampcore.conformance.float8_data import FLOAT8_TARGETS, SOURCES, expected_quantize, same_bits
from ampcore.conformance.kernel_harness import seeded_rng
from ampcore.conformance.tolerance import assert_accumulated
from ampcore.float8 import scaling
from ampcore.float8.casting import current_cast
from ampcore.ops.float8 import quantize_float8, scaled_mm, scaled_mm_mx

F8 = [d.name for d in FLOAT8_TARGETS]
OUT = ["float32", "bfloat16", "float16"]
BLOCK = 32  # MX block size along the reduction dimension


def _require_float8(backend: Any) -> None:
    caps = backend.capabilities
    if caps.float8 == "none":
        why = f" ({caps.float8_reason})" if caps.float8_reason else ""
        pytest.skip(f"{NOT_SUPPORTED}: {backend.name!r} has no float8{why}")


def _on(backend: Any, values: Any, dtype: Any = None) -> Any:
    array = np.asarray(values)
    return ampcore.tensor(array, dtype=dt.as_dtype(dtype or array.dtype), device=backend.device)


def _quantize(backend: Any, x: np.ndarray, scale: Any, dtype: dt.DType, saturate: bool) -> tuple[Any, Any]:
    return quantize_float8(_on(backend, x), _on(backend, np.asarray(scale, np.float32)), dtype, saturate)


# --------------------------------------------------------------------------- conversion, bit for bit
@pytest.mark.conformance(op="quantize_float8")
@pytest.mark.parametrize("saturate", [True, False], ids=["saturate", "no-saturate"])
@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("dtype", F8)
def test_quantize_rounds_like_ml_dtypes_bit_for_bit(backend, dtype, source, saturate):
    _require_float8(backend)
    backend.require_storage(source)
    d = dt.as_dtype(dtype)
    values = SOURCES[source]()
    q, _ = _quantize(backend, values, 1.0, d, saturate)
    assert q.dtype is d, f"quantize_float8 returned {q.dtype.name}, expected {d.name}"
    want = expected_quantize(values, 1.0, d, saturate)
    same_bits(q.numpy(), want, f"quantize_float8({source} -> {dtype}, saturate={saturate})", values)


@pytest.mark.conformance(op="quantize_float8")
@pytest.mark.parametrize("dtype", F8)
def test_quantize_scales_before_rounding(backend, dtype):
    _require_float8(backend)
    d = dt.as_dtype(dtype)
    values = SOURCES["float32"]()
    for scale in (np.float32(0.3), np.float32(2.0**-7), np.float32(1000.0)):
        for saturate in (True, False):
            q, _ = _quantize(backend, values, scale, d, saturate)
            want = expected_quantize(values, scale, d, saturate)
            same_bits(q.numpy(), want, f"quantize_float8(x * {scale!r} -> {dtype}, saturate={saturate})", values)


@pytest.mark.conformance(op="cast")
@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("dtype", F8 + ["float8_e8m0fnu"])
def test_casts_to_and_from_float8_are_ml_dtypes(backend, dtype, source):
    _require_float8(backend)
    backend.require_storage(source, dtype)
    d, s = dt.as_dtype(dtype), dt.as_dtype(source)
    values = SOURCES[source]()
    with np.errstate(all="ignore"):
        want = values.astype(d.numpy)
        back = want.astype(s.numpy)
    q = _on(backend, values).to(d)
    same_bits(q.numpy(), want, f"cast {source} -> {dtype}", values)
    same_bits(q.to(s).numpy(), back, f"cast {dtype} -> {source}", want)


@pytest.mark.conformance(op="quantize_float8")
@pytest.mark.parametrize("dtype", F8)
def test_saturation_clamps_and_nan_propagates(backend, dtype):
    _require_float8(backend)
    d = dt.as_dtype(dtype)
    top = dt.finfo(d).max
    x = np.array([top * 4, -top * 4, np.inf, -np.inf, np.nan, -np.nan, top, 1.0], np.float32)
    q = _quantize(backend, x, 1.0, d, True)[0].float().numpy()
    assert q[:4].tolist() == [top, -top, top, -top], f"saturating {dtype} cast gave {q[:4]} for +-4max, +-inf"
    assert np.isnan(q[4:6]).all(), f"NaN must stay NaN through a saturating {dtype} cast, got {q[4:6]}"
    wide = _quantize(backend, x, 1.0, d, False)[0].float().numpy()
    if d is dt.float8_e5m2:
        assert wide[:4].tolist() == [np.inf, -np.inf, np.inf, -np.inf], f"e5m2 overflow must be inf, got {wide[:4]}"
    else:
        assert np.isnan(wide[:4]).all(), f"e4m3fn has no inf: overflow must be NaN, got {wide[:4]}"


@pytest.mark.conformance(op="quantize_float8")
@pytest.mark.parametrize(
    ("values", "want"),
    [([0.0, -0.0, 0.0, 0.0], 0.0), ([1.0, -np.inf, 3.0], np.inf), ([2.0, np.nan, -5.0], np.nan), ([-7.5], 7.5)],
    ids=["all-zero", "inf", "nan", "one"],
)
def test_amax_of_the_input(backend, values, want):
    _require_float8(backend)
    _, amax = _quantize(backend, np.asarray(values, np.float32), 1.0, dt.float8_e4m3fn, True)
    assert amax.dtype is dt.float32 and amax.shape == (), f"amax is {amax.dtype.name} {amax.shape}, want 0-d float32"
    got = amax.numpy()
    assert (np.isnan(got) and np.isnan(want)) or got == want, f"amax of {values} is {got}, expected {want}"


@pytest.mark.conformance(op="quantize_float8")
@pytest.mark.parametrize("dtype", F8)
def test_row_wise_scales(backend, dtype):
    _require_float8(backend)
    d = dt.as_dtype(dtype)
    rng = seeded_rng("float8", "rowwise", dtype)
    x = (rng.standard_normal((9, 37)) * np.exp(rng.uniform(-8, 8, (9, 1)))).astype(np.float32)
    scales = (np.float32(dt.finfo(d).max) / np.abs(x).max(axis=1, keepdims=True)).astype(np.float32)
    q, amax = _quantize(backend, x, scales, d, True)
    same_bits(q.numpy(), expected_quantize(x, scales, d, True), f"row-wise quantize_float8 -> {dtype}", x)
    assert amax.item() == np.abs(x).max()


@pytest.mark.conformance(op="quantize_float8_current")
@pytest.mark.parametrize("pow2", [False, True], ids=["exact-scale", "pow2-scale"])
@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
@pytest.mark.parametrize("source", OUT)
@pytest.mark.parametrize("dtype", F8)
def test_current_scaling_cast_gives_the_numpy_recipes_bits(backend, dtype, source, rowwise, pow2):
    """float8's cast with current scaling (the backend's ``quantize_float8_current``, or the core's composition
    where it has none): amax, scale, inverse scale and values as :mod:`ampcore.float8.scaling` gives them.
    Rows span 40 binades; one is all zero, one holds an inf, one a NaN (their scale is 1)."""
    _require_float8(backend)
    backend.require_storage(source)
    d = dt.as_dtype(dtype)
    rng = seeded_rng("float8", "current", dtype, source, str(rowwise))
    x = rng.standard_normal((9, 37)) * np.exp(rng.uniform(-14, 14, (9, 1)))
    x[2], x[5, 3], x[7, 11] = 0.0, np.inf, np.nan
    values = x.astype(dt.as_dtype(source).numpy)
    for rows in ([0, 1, 3, 4, 6, 8], list(range(9))):  # finite rows only, then all of them
        part = values[rows]
        q, scale, inv, amax = current_cast(_on(backend, part, source), dtype, rowwise, pow2)
        x32 = part.astype(np.float32)
        with np.errstate(invalid="ignore"):
            want_amax = np.abs(x32).max(axis=1, keepdims=True) if rowwise else np.abs(x32).max()
        want_scale = scaling.current_scale(want_amax, dtype, pow2)
        what = f"current-scaling cast of {source} rows {rows} -> {dtype} ({'rowwise' if rowwise else 'tensorwise'})"
        got_amax = amax.numpy()
        assert got_amax.shape == np.shape(want_amax) and got_amax.dtype == np.float32, f"{what}: amax {got_amax.shape}"
        assert np.array_equal(got_amax, want_amax, equal_nan=True), f"{what}: amax {got_amax}, expected {want_amax}"
        same_bits(scale.numpy(), want_scale, f"{what}: scale")
        same_bits(inv.numpy(), (np.float32(1.0) / want_scale).astype(np.float32), f"{what}: 1 / scale")
        same_bits(q.numpy(), expected_quantize(x32, want_scale, d, True), what, x32)


# --------------------------------------------------------------------------- scaled_mm
def _float8_operand(rng: np.random.Generator, shape: tuple[int, int], d: dt.DType) -> np.ndarray:
    return (rng.standard_normal(shape) * 4).astype(np.float32).astype(d.numpy)


def _within(got: np.ndarray, want: np.ndarray, magnitude: np.ndarray, k: int, out: dt.DType, what: str) -> None:
    """The accumulation rule: float32 accumulation of ``k`` exact float8 products, the two float32 scalings
    (``k + 2`` roundings in all), and one rounding to ``out``."""
    assert_accumulated(got, want, magnitude, out, k + 2, what=what)


@pytest.mark.conformance(op="scaled_mm")
@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
@pytest.mark.parametrize("dtype", OUT)
def test_scaled_mm_against_float64(backend, dtype, rowwise):
    _require_float8(backend)
    backend.require_storage(dtype)
    out = dt.as_dtype(dtype)
    rng = seeded_rng("float8", "scaled_mm", dtype, str(rowwise))
    for (m, k, n), (da, db) in [
        ((5, 48, 7), (dt.float8_e4m3fn, dt.float8_e4m3fn)),
        ((3, 33, 1), FLOAT8_TARGETS),
        ((16, 64, 32), (dt.float8_e5m2, dt.float8_e4m3fn)),  # aligned: what float8 tensor cores (cuBLASLt) take
    ]:
        a, b = _float8_operand(rng, (m, k), da), _float8_operand(rng, (k, n), db)
        sa = rng.uniform(0.01, 3, (m, 1) if rowwise else ()).astype(np.float32)
        sb = rng.uniform(0.01, 3, (1, n) if rowwise else ()).astype(np.float32)
        bias = rng.standard_normal(n).astype(out.numpy)
        got = scaled_mm(_on(backend, a), _on(backend, b), _on(backend, sa), _on(backend, sb), out, _on(backend, bias))
        assert got.dtype is out and got.shape == (m, n), f"scaled_mm gave {got.dtype.name} {got.shape}"
        a64, b64 = a.astype(np.float64) * sa, b.astype(np.float64) * sb
        want = a64 @ b64 + bias.astype(np.float64)
        magnitude = np.abs(a64) @ np.abs(b64) + np.abs(bias.astype(np.float64))
        _within(got.numpy(), want, magnitude, k, out, f"scaled_mm {da.name} x {db.name} -> {dtype}")


@pytest.mark.conformance(op="scaled_mm")
def test_scaled_mm_propagates_nan_and_inf(backend):
    _require_float8(backend)
    a = np.ones((2, 4), np.float32)
    a[0, 1] = np.nan
    b = np.ones((4, 3), np.float32)
    b[2, 2] = np.inf
    qa, qb = _on(backend, a.astype(dt.float8_e4m3fn.numpy)), _on(backend, b.astype(dt.float8_e5m2.numpy))
    one = _on(backend, np.float32(1.0))
    got = scaled_mm(qa, qb, one, one, dt.float32).numpy()
    assert np.isnan(got[0]).all(), f"a NaN in row 0 of a must make row 0 NaN, got {got[0]}"
    assert got[1].tolist() == [4.0, 4.0, np.inf], f"an inf in b must give inf in its column, got {got[1]}"


def _mx_quantize(backend: Any, x: np.ndarray) -> tuple[Any, np.ndarray]:
    """MXFP8 along x's last axis: per 32-element block, scale 2**(floor(log2 amax) - 8) stored as e8m0, the
    block divided by it (a power of two: exact) and cast to e4m3fn saturating.  Returns the float8 tensor
    blocks (list) and the e8m0 scales (rows, blocks) as stored on the device, read back."""
    rows, k = x.shape
    blocks = x.reshape(rows, k // BLOCK, BLOCK)
    amax = np.abs(blocks).max(axis=2)
    exponent = np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 8  # e4m3fn's largest exponent is 8
    scales = _on(backend, (2.0**exponent).astype(np.float32)).to(dt.float8_e8m0fnu)
    inverse = (1.0 / scales.float()).numpy()  # exact: powers of two
    q = [
        _quantize(backend, np.ascontiguousarray(blocks[:, j]), inverse[:, j : j + 1], dt.float8_e4m3fn, True)[0]
        for j in range(k // BLOCK)
    ]
    return q, scales.float().numpy()


@pytest.mark.conformance(op="scaled_mm")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_block_scaled_gemm_matches_the_reference(backend, dtype):
    """MXFP8: 32-element blocks along K with e8m0 scales, one row-wise scaled_mm per block summed in float32,
    against the float64 product of the dequantized operands."""
    _require_float8(backend)
    backend.require_storage(dtype)
    out = dt.as_dtype(dtype)
    rng = seeded_rng("float8", "mx", dtype)
    m, k, n = 6, 4 * BLOCK, 5
    a = (rng.standard_normal((m, k)) * np.exp(rng.uniform(-6, 6, (m, k // BLOCK))).repeat(BLOCK, 1)).astype(np.float32)
    b = (rng.standard_normal((n, k)) * np.exp(rng.uniform(-6, 6, (n, k // BLOCK))).repeat(BLOCK, 1)).astype(np.float32)
    qa, sa = _mx_quantize(backend, a)
    qb, sb = _mx_quantize(backend, b)  # b stored as (N, K): its blocks run along K too
    total = None
    for j in range(k // BLOCK):
        part = scaled_mm(
            qa[j], qb[j].t(), _on(backend, sa[:, j : j + 1]), _on(backend, sb[:, j : j + 1].T.copy()), dt.float32
        )
        total = part if total is None else total + part
    assert total is not None
    got = total.to(out).numpy()
    deq_a = np.concatenate([q.float().numpy().astype(np.float64) for q in qa], axis=1) * sa.repeat(BLOCK, 1)
    deq_b = np.concatenate([q.float().numpy().astype(np.float64) for q in qb], axis=1) * sb.repeat(BLOCK, 1)
    want = deq_a @ deq_b.T
    _within(got, want, np.abs(deq_a) @ np.abs(deq_b.T), k, out, f"MXFP8 block-scaled GEMM -> {dtype}")
    # The quantization is the format's: every block is ml_dtypes' saturating cast of the block over its scale.
    for j, q in enumerate(qa):
        block = np.ascontiguousarray(a[:, j * BLOCK : (j + 1) * BLOCK])
        want_q = expected_quantize(block, (1.0 / sa[:, j : j + 1]).astype(np.float32), dt.float8_e4m3fn, True)
        same_bits(q.numpy(), want_q, f"MXFP8 block {j} of a")


@pytest.mark.conformance(op="scaled_mm_mx")
@pytest.mark.parametrize("dtype", OUT)
def test_scaled_mm_mx_against_float64(backend, dtype):
    """The MX-scaled GEMM (the backend's ``scaled_mm_mx`` or the core's composition): one power of two per 32
    values along K on each operand, scales from 2**-127 (e8m0's least, a float32 subnormal) to 2**100, a
    transposed ``b`` (a Float8Linear weight), a bias; within one rounding of ``out`` and float32 accumulation of
    the float64 product."""
    _require_float8(backend)
    backend.require_storage(dtype)
    out = dt.as_dtype(dtype)
    rng = seeded_rng("float8", "scaled_mm_mx", dtype)
    for (m, k, n), (da, db) in [
        ((5, 2 * BLOCK, 7), (dt.float8_e4m3fn, dt.float8_e4m3fn)),
        ((3, BLOCK, 2), FLOAT8_TARGETS),
        ((16, 2 * BLOCK, 16), (dt.float8_e4m3fn, dt.float8_e4m3fn)),  # aligned: Blackwell's MXFP8 (cuBLASLt)
    ]:
        a, bt = _float8_operand(rng, (m, k), da), _float8_operand(rng, (n, k), db)
        sa = 2.0 ** rng.integers(-4, 3, (m, k // BLOCK))
        sb = 2.0 ** rng.integers(-4, 3, (k // BLOCK, n))
        sa[:, -1] *= 2.0**-100  # the last block's operands far out of range, their products (and float16's) not
        sb[-1, :] *= 2.0**100
        sa[0, 0] = 2.0**-127  # e8m0's least, a float32 subnormal
        sa, sb = sa.astype(np.float32), sb.astype(np.float32)
        bias = rng.standard_normal(n).astype(out.numpy)
        b = _on(backend, bt).t()  # (K, N) as a transposed view, as Float8Linear passes its weight
        got = scaled_mm_mx(_on(backend, a), b, _on(backend, sa), _on(backend, sb), out, _on(backend, bias))
        assert got.dtype is out and got.shape == (m, n), f"scaled_mm_mx gave {got.dtype.name} {got.shape}"
        a64 = a.astype(np.float64) * sa.astype(np.float64).repeat(BLOCK, 1)
        b64 = bt.T.astype(np.float64) * sb.astype(np.float64).repeat(BLOCK, 0)
        want = a64 @ b64 + bias.astype(np.float64)
        magnitude = np.abs(a64) @ np.abs(b64) + np.abs(bias.astype(np.float64))
        _within(got.numpy(), want, magnitude, k, out, f"scaled_mm_mx {da.name} x {db.name} -> {dtype}")
