"""float16 on the OpenCL CPU runtimes (issue 28): the branch-free integer conversions and the vector pack of
float16 GEMM operands give the bits the scalar code gave, on every OpenCL device.

- ``pack_b``'s vector variant (PoCL's, :data:`ampcore_opencl.gemm.VECTOR_HALF_PACK_PLATFORMS`) widens every
  float16 bit pattern as the scalar ``half_to_float`` does, NumPy's widening, and leaves partial panels to the
  scalar tail;
- a float16 matmul on the benchmark MLP's shapes gives the same bits whichever ``pack_b`` runs, on each runtime
  (the set of platforms is patched to force one or the other);
- maximum/minimum, whose NaN test is ``a != a`` rather than PoCL's out-of-line ``isnan``, still follow NumPy
  on NaN, infinities and signed-zero ties.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyopencl")

from opencl_devices import get, put
from opencl_devices import state as device_state

from ampcore import dtypes as dt
from ampcore import expr
from ampcore.conformance.tolerance import assert_accumulated
from ampcore_opencl import gemm
from ampcore_opencl.codegen import ctype

pytestmark = pytest.mark.usefixtures("opencl_device")  # every test on every OpenCL device

NR = gemm.BLOCKS["float"][1]


def _pack_b(source: str, b_bits: np.ndarray) -> np.ndarray:
    """Run one pack_b source on the (k, n) float16 bit patterns ``b_bits``: the packed float32 panels' bits."""
    import pyopencl as cl

    state = device_state()
    k, n = b_bits.shape
    panels = -(-n // NR)
    kernel = cl.Kernel(state.build(source), "pack_b")
    flags = cl.mem_flags
    b = cl.Buffer(state.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(b_bits))
    out = cl.Buffer(state.context, flags.READ_WRITE, panels * NR * k * 4)
    rows = -(-k // 16) * 16
    kernel(state.queue, (rows, panels, 1), (16, 1, 1), b, out, np.int64(k), np.int64(n), np.int64(panels))
    host = np.empty(panels * NR * k, dtype=np.uint32)
    cl.enqueue_copy(state.queue, host, out, is_blocking=True)
    return host


def _differ(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Positions where two arrays of float32 bits differ, a NaN matching a NaN of the same sign: the scalar
    code may take the half type's conversion (Intel's runtime), which quiets a signalling NaN
    (probe.convert_mismatches' rule)."""
    g, w = got.view(np.float32), want.view(np.float32)
    same_nan = np.isnan(g) & np.isnan(w) & (np.signbit(g) == np.signbit(w))
    return np.flatnonzero((got != want) & ~same_nan)


@pytest.mark.parametrize("n", [1024, 1000, 10])
def test_vector_pack_b_every_float16_pattern(n: int) -> None:
    """All 65536 float16 patterns (subnormals, -0.0, inf, NaN payloads) through both pack_b variants: the same
    values, and NumPy's widening bit for bit from the vector one at every packed position (n = 1000 and 10
    leave a partial last panel, packed by the scalar tail)."""
    c = ctype(dt.float16)
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    k = -(-patterns.size // n)
    b_bits = np.resize(patterns, k * n).reshape(k, n)
    scalar = _pack_b(gemm._pack_b_source(c, device_state().fp64), b_bits)
    vector = _pack_b(gemm._pack_b_source(c, device_state().fp64, vector=True), b_bits)
    mismatch = _differ(scalar, vector)
    assert mismatch.size == 0, f"{mismatch.size} packed values differ, first at {mismatch[:5]}"
    panels = -(-n // NR)
    padded = np.zeros((k, panels * NR), dtype=np.uint16)
    padded[:, :n] = b_bits
    want = padded.view(np.float16).astype(np.float32).view(np.uint32)
    want = want.reshape(k, panels, NR).transpose(1, 0, 2).reshape(-1)  # bp[panel][kk][c]
    mismatch = _differ(vector, want)
    assert mismatch.size == 0, f"{mismatch.size} packed values differ from NumPy's, first at {mismatch[:5]}"


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("shape", [(256, 784, 1024), (256, 1024, 10), (16 * 64, 256, 256)])
def test_float16_matmul_same_bits_either_pack(
    monkeypatch: pytest.MonkeyPatch, vector: bool, shape: tuple[int, int, int]
) -> None:
    """The MLP's and the transformer's products in float16: forcing the vector pack on (or off) on this device
    changes no bit of the result."""
    m, k, n = shape
    rng = np.random.default_rng(7)
    a = put(rng.standard_normal((m, k)) * 0.5, "float16")
    b = put(rng.standard_normal((k, n)) * 0.05, "float16")
    platform = device_state().platform
    forced: Any = frozenset({platform}) if vector else frozenset()
    monkeypatch.setattr(gemm, "VECTOR_HALF_PACK_PLATFORMS", forced)
    got = get(gemm.matmul(a, b)).view(np.uint16)
    monkeypatch.setattr(gemm, "VECTOR_HALF_PACK_PLATFORMS", frozenset() if vector else frozenset({platform}))
    other = get(gemm.matmul(a, b)).view(np.uint16)
    assert np.array_equal(got, other), f"{int((got != other).sum())} of {got.size} float16 results differ"
    ref = get(a).astype(np.float64) @ get(b).astype(np.float64)
    size = np.abs(get(a).astype(np.float64)) @ np.abs(get(b).astype(np.float64))
    assert_accumulated(got.view(np.float16), ref, size, "float16", k, what=f"float16 ({m}, {k}) @ ({k}, {n})")


EDGES = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0**-20, 65504.0]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_nan_and_ties_as_numpy(op: str, dtype: str) -> None:
    """maximum/minimum test NaN with ``a != a`` (not the isnan builtin, a call on PoCL): NaN in either operand
    gives NaN, a tie (0.0 and -0.0) gives the second operand, as NumPy; every pair of edge values, plus a
    scalar operand (the ReLU's ``maximum(x, 0)``)."""
    from ampcore_opencl import elementwise

    kernel = elementwise.elementwise(expr.get(op))
    a, b = np.meshgrid(np.array(EDGES), np.array(EDGES))
    a, b = a.ravel(), b.ravel()
    da, db = put(a, dtype), put(b, dtype)
    got, want = get(kernel(da, db)).astype(np.float64), getattr(np, op)(get(da).astype(np.float64), get(db))
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    assert same.all(), f"{op} in {dtype} differs from NumPy at {list(zip(a[~same], b[~same]))[:4]}"
    got = get(kernel(da, 0.0)).astype(np.float64)
    want = getattr(np, op)(get(da).astype(np.float64), 0.0)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    assert same.all(), f"{op}(x, 0.0) in {dtype} differs from NumPy at {a[~same][:4]}"
