"""The cpu backend's compiled (numba) kernels: the same bits as its NumPy kernels, and memory measured
without numba's one-time compilation."""

import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
from gemm_bound import assert_one_float32_dot_rounded_once

import ampcore
from ampcore_cpu import compiled
from ampcore_cpu import kernels as cpu_kernels

K = ampcore.get_backend("cpu").kernels


def _needs_compiled_path() -> None:
    status = compiled.status()
    if not status.enabled:
        pytest.skip(f"the cpu backend runs its NumPy fallback here: {status.describe()}")


def test_peak_memory_does_not_count_numba_compiling_the_loops():
    """In a fresh process the first float16 conversion compiles (or loads) numba's loops: tens of MiB of
    Python objects.  peak_memory loads them before tracing, so it reports the arrays (~10 KiB here)."""
    _needs_compiled_path()
    script = textwrap.dedent(
        """
        import numpy as np
        import ampcore
        backend = ampcore.get_backend("cpu")
        k, x = backend.kernels, np.ones(4096, np.float32)
        print(backend.peak_memory(lambda: k.cast(k.cast(x, ampcore.float16), ampcore.float32)))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[-1]) < 1 << 20


def test_warm_says_whether_numba_is_in_use():
    assert compiled.warm() is compiled.status().enabled


# The cnn benchmark's float16/bfloat16 products that are computed in blocks (conv2's forward, input gradient
# and weight gradient), and two more shapes; a transposed operand as the conv weight gradient passes it.
BLOCKED_SHAPES = [
    ((64, 288), (288, 8192)),
    ((32, 576), (576, 8192)),
    ((288, 8192), (8192, 64)),
    ((4096, 600), (600, 40)),
]


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shapes", BLOCKED_SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_blocked_low_precision_matmul_rounds_a_float32_dot_over_all_of_k_once(dtype, shapes, transposed):
    """Row or column blocks of the larger operand split M or N, never K: each output element is one float32 dot
    product over all of K, rounded once.  Not the unblocked product's bits: which order the BLAS sums a column
    in depends on where the column falls in its block (OpenBLAS's Haswell kernels, which it runs on AMD Zen 5,
    sum a block's last columns in another order), so the check is the bound of ``gemm_bound``."""
    rng = np.random.default_rng(0)
    (m, k), (_, n) = shapes
    a = rng.standard_normal((1, m, k), dtype=np.float32).astype(dtype)
    if transposed:
        a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    b = rng.standard_normal((1, k, n), dtype=np.float32).astype(dtype)
    got = cpu_kernels._blocked_lowp_gemm(a, b)
    assert got is not None, "the product was not blocked"
    assert got.dtype == a.dtype and got.shape == (1, m, n)
    assert_one_float32_dot_rounded_once(got, a, b, f"blocked {np.dtype(dtype).name} {shapes}")


def test_small_or_batched_low_precision_products_are_not_blocked():
    a = np.ones((1, 64, 64), np.float16)
    assert cpu_kernels._blocked_lowp_gemm(a, a) is None
    big = np.ones((2, 64, 288), np.float16), np.ones((2, 288, 8192), np.float16)
    assert cpu_kernels._blocked_lowp_gemm(*big) is None


def _adamw_case(dtype, n, seed):
    rng = np.random.default_rng(seed)
    p, g, m = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    v = np.abs(rng.standard_normal(n)).astype(dtype)
    if n > 10:
        g[3], g[7], p[5] = np.inf, np.nan, -np.inf  # IEEE values propagate alike on both paths
    return [p], [g], [m], [v]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [10, 300, 70_001])
@pytest.mark.parametrize("decoupled", [True, False])
@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
def test_compiled_adamw_step_gives_the_numpy_kernels_bits(monkeypatch, dtype, n, decoupled, weight_decay):
    """The compiled Adam(W) pass repeats the NumPy kernel's operations in its order and dtype."""
    _needs_compiled_path()
    from ampcore_cpu import fused_optim

    hyper = dict(step=7, lr=3e-3, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=weight_decay, decoupled=decoupled)
    compiled_out = fused_optim.adamw_step(*_adamw_case(dtype, n, 1), **hyper)
    monkeypatch.setattr(fused_optim, "_compiled", lambda: None)
    numpy_out = fused_optim.adamw_step(*_adamw_case(dtype, n, 1), **hyper)
    for got, want in zip(compiled_out, numpy_out):
        assert got[0].dtype == want[0].dtype == dtype
        np.testing.assert_array_equal(got[0].view(np.uint8), want[0].view(np.uint8))


def test_compiled_adamw_step_reads_a_strided_gradient_and_skips_mixed_dtypes():
    """A transposed gradient is read in the parameter's order; a float16 parameter takes the NumPy path."""
    from ampcore_cpu import fused_optim

    rng = np.random.default_rng(2)
    hyper = dict(step=1, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=True)
    g = rng.standard_normal((64, 96), dtype=np.float32)
    p1, m1, v1 = (np.zeros((96, 64), np.float32) for _ in range(3))
    p2, m2, v2 = (np.zeros((96, 64), np.float32) for _ in range(3))
    fused_optim.adamw_step([p1], [g.T], [m1], [v1], **hyper)
    fused_optim.adamw_step([p2], [np.ascontiguousarray(g.T)], [m2], [v2], **hyper)
    np.testing.assert_array_equal(p1, p2)
    p16, v = np.ones(1 << 15, np.float16), np.zeros(1 << 15, np.float32)
    assert not fused_optim._compiled_update(p16, p16, v, v, {}, {})
    empty = np.ones(0, np.float32)  # nothing to update: the NumPy path's loop does nothing either
    assert not fused_optim._compiled_update(empty, empty, empty, empty, {}, {})


def _same_or_both_nan(got, want):
    """Equal bits, or NaN in both (which NaN an operation returns is not specified: see ampcore_cpu.loops)."""
    got32, want32 = got.astype(np.float32), want.astype(np.float32)
    both_nan = np.isnan(got32) & np.isnan(want32)
    np.testing.assert_array_equal(
        np.where(both_nan, 0, got.view(np.uint16)), np.where(both_nan, 0, want.view(np.uint16))
    )


# Programs the compiled loops render (ampcore_cpu.loops.SAFE): each op, and compositions of several.
_LOOP_PROGRAMS = ["add", "sub", "mul", "div", "maximum", "minimum", "relu", "neg", "abs", "sign", "lt", "ge", "ne"]


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("name", _LOOP_PROGRAMS)
@pytest.mark.parametrize("b_shape", ["same", "bias", "row_of_ones", "one"])
def test_compiled_low_precision_programs_give_the_numpy_paths_numbers(dtype, name, b_shape):
    """Every float16/bfloat16 bit pattern as ``a`` (inf, NaN, subnormals, overflow to inf, ties) against
    reversed, bias-shaped and single-element ``b``: the compiled pass's results are the NumPy path's."""
    _needs_compiled_path()
    from ampcore import expr as E
    from ampcore.expr.python import evaluator
    from ampcore_cpu import loops
    from ampcore_cpu.elementwise import FUNCTIONS

    prog = E.get(name)
    a = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype).reshape(64, 4, 256)
    b = {
        "same": a[::-1].copy(),
        "bias": a[7, 1].copy(),
        "row_of_ones": a[3, 2].reshape(1, 1, 256).copy(),
        "one": np.full((1,), 3.0, dtype),
    }[b_shape]
    operands = (a, b)[: prog.arity]
    compiled = loops.loop(prog)(*operands)
    assert compiled is not None and compiled.shape == a.shape
    numpy_path = cpu_kernels._lowp(evaluator(prog, FUNCTIONS))(*operands) if prog.result == "T" else None
    if numpy_path is None:
        numpy_path = evaluator(prog, FUNCTIONS)(*(cpu_kernels._up(v) for v in operands))
        np.testing.assert_array_equal(compiled, numpy_path)
        return
    _same_or_both_nan(compiled, numpy_path)
    assert np.array_equal(np.isnan(compiled.astype(np.float32)), np.isnan(numpy_path.astype(np.float32)))


def test_compiled_low_precision_programs_leave_other_operands_to_numpy():
    _needs_compiled_path()
    from ampcore import expr as E
    from ampcore_cpu import loops

    add = loops.loop(E.get("add"))
    a = np.ones((64, 128), np.float16)
    assert add(a, np.float64(2.0)) is None  # a NumPy float64 scalar: float64 on that path
    assert add(a, 2) is None  # a Python int
    middle = np.ones((4, 64, 32), np.float16)
    assert add(middle, np.ones((4, 1, 32), np.float16)) is None  # a broadcast in the middle
    assert add(a, a.astype(np.float32)) is None
    assert add(a.T, a.T) is None  # not C-contiguous
    assert add(a[:2], a[:2]) is None  # small
    assert loops.loop(E.get("exp")) is None  # NumPy's SIMD exp: its bits are not numba's libm's


def test_adamw_step_checks_every_call_after_a_group_passed_once():
    """A group's shapes and dtypes are checked once (then remembered); its step and hyper-parameters every call,
    and a group with another shape, dtype or array type is checked in full, before anything is written."""
    from ampcore_cpu import fused_optim

    hyper = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=True)
    p, g, m, v = (np.ones((4, 3), np.float32) for _ in range(4))
    fused_optim.adamw_step([p], [g], [m], [v], step=1, **hyper)  # passes: remembered
    before = p.copy()
    with pytest.raises(ValueError, match="step must be an int >= 1"):
        fused_optim.adamw_step([p], [g], [m], [v], step=0, **hyper)
    with pytest.raises(ValueError, match="lr must be finite"):
        fused_optim.adamw_step([p], [g], [m], [v], step=2, **(hyper | {"lr": float("nan")}))
    with pytest.raises(ValueError, match="shapes differ"):
        fused_optim.adamw_step([p], [np.ones((3, 4), np.float32)], [m], [v], step=2, **hyper)
    with pytest.raises(TypeError, match="moments must be float32"):
        fused_optim.adamw_step([p], [g], [m.astype(np.float64)], [v], step=2, **hyper)
    with pytest.raises(TypeError, match="expected NumPy arrays"):
        fused_optim.adamw_step([p], [g.tolist()], [m], [v], step=2, **hyper)
    np.testing.assert_array_equal(p, before)  # nothing written by a refused call
