"""The compiled float16/bfloat16 program loops on a conv bias's channel column and a Python scalar operand give
the NumPy path's numbers (ampcore_cpu.loops).

The NumPy path widens, applies the float32 ufuncs and rounds once; the compiled pass does the same per element.
Which NaN an operation returns is not specified (see ampcore_cpu.loops), so NaN matches any NaN; every other
result has the same bits.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ampcore
from ampcore import expr as E
from ampcore.expr.python import evaluator
from ampcore_cpu import compiled, loops
from ampcore_cpu import kernels as K
from ampcore_cpu.elementwise import FUNCTIONS

pytestmark = pytest.mark.skipif(
    not compiled.status().enabled,
    reason="the cpu backend is on its NumPy fallback path (no numba, or AMPCORE_CPU_NO_NUMBA=1): there is no "
    "compiled pass to compare",
)
DTYPES = [np.float16, ml_dtypes.bfloat16]
OPS = ["add", "sub", "mul", "div"]


def _numpy_path(name, *operands):
    """The program on the NumPy path: widened, its ufuncs in float32, rounded once."""
    return K._quiet(K._lowp(evaluator(E.get(name), FUNCTIONS)))(*operands)


def _compiled(name, *operands):
    return loops.loop(E.get(name))(*operands)


def _assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(got.astype(np.float32))
    assert np.array_equal(nan, np.isnan(want.astype(np.float32)))
    assert np.array_equal(np.where(nan, 0, got.view(np.uint16)), np.where(nan, 0, want.view(np.uint16)))


def _every_value(dtype, shape):
    """Every 2-byte bit pattern (inf, NaN, -0.0, subnormals, overflow, ties), tiled to ``shape``."""
    bits = np.resize(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16), shape)
    return bits.view(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((32, 32, 32, 32), (1, 32, 1, 1)), ((32, 64, 16, 16), (64, 1, 1)), ((4, 64, 256), (64, 1)), ((256, 64), (256, 1))],
)
def test_a_channel_column_operand_gives_the_numpy_paths_numbers(monkeypatch, dtype, name, a_shape, b_shape):
    a = _every_value(dtype, a_shape)
    rng = np.random.default_rng(5)
    b = rng.standard_normal(b_shape).astype(np.float32).astype(dtype)
    b.reshape(-1)[:4] = np.array([0.0, -0.0, np.inf, np.nan], np.float32).astype(dtype)[: b.size]
    got = _compiled(name, a, b)
    assert got is not None
    _assert_same(got, _numpy_path(name, a, b))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # 1e300 to float32: inf
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("scalar", [0.125, 1 / 3, -0.0, 1e-30, 70000.0, 1e300, float("inf"), float("nan")])
def test_a_python_float_operand_gives_the_numpy_paths_numbers(dtype, name, scalar):
    """The attention scale's shape (16, 4, 64, 64); scalars that round in float32, overflow or underflow it."""
    a = _every_value(dtype, (16, 4, 64, 64))
    for operands in ((a, scalar), (scalar, a)):
        got = _compiled(name, *operands)
        assert got is not None
        _assert_same(got, _numpy_path(name, *operands))


def test_the_kernel_table_takes_the_compiled_pass_for_a_scalar_and_a_channel_column(monkeypatch):
    a = np.ones((32, 8, 16, 16), np.float16)
    calls = []
    real = loops.plan
    monkeypatch.setattr(loops, "plan", lambda operands: calls.append(len(operands)) or real(operands))
    table = ampcore.get_backend("cpu").kernels
    mul, add = table.program_kernel(E.get("mul")), table.program_kernel(E.get("add"))
    mul(a, 0.5)
    add(a, np.ones((8, 1, 1), np.float16))
    assert calls == [2, 2]
