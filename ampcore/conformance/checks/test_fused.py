"""The optional fused kernels, called directly on device arrays, and the optimizers built on ``adamw_step``.

A backend need not provide a fused kernel (the core then composes primitives, which ``ops`` checks); where
it does, the kernel must agree with the float64 reference within the suite's tolerance rules
(:mod:`ampcore.conformance.tolerance`), in every dtype the backend computes: softmax / log_softmax (odd
shapes, every axis position, non-contiguous input, magnitudes where exp overflows without subtracting the
maximum, rows of -inf), their backward kernels, gelu (each result within its ulps) and gelu_backward (exact
erf and tanh forms), max_pool2d_tiled and its backward (exactly, with NaNs and ties),
and ``adamw_step`` over several steps for Adam and AdamW, with and without weight decay, and ``adamw_step_amp``
(the step count and the skip flag on the device) against it.  ``optim.SGD`` /
``Adam`` / ``AdamW`` run a few steps on the device whichever route the backend takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore.conformance import NOT_SUPPORTED, assert_close
from ampcore.conformance import op_reference as R
from ampcore.conformance.references import gelu_exact
from ampcore.conformance.tolerance import DEFAULT_ROUNDINGS, assert_elementwise

FLOATS = [d.name for d in dt.FLOAT_DTYPES]
SEED = 20240805


def _require_kernel(backend: Any, name: str) -> None:
    """Skip as not supported when the backend leaves the optional fused kernel to the core."""
    if not backend.kernels.has(name):
        pytest.skip(
            f"{NOT_SUPPORTED}: optional fused kernel {name!r} not provided; the core's composition of "
            "primitives is used, checked in ops"
        )


def _rounded(values: Any, d: dt.DType) -> np.ndarray:
    return np.asarray(values, np.float64).astype(d.numpy)


def _put(backend: Any, values: Any, d: dt.DType) -> tuple[Any, np.ndarray]:
    """A device array of ``values`` rounded to ``d``, and the float64 values it holds."""
    array = backend.put(_rounded(values, d), d)
    return array, backend.get(array).astype(np.float64)


def _check_dtype(backend: Any, array: Any, d: dt.DType, what: str) -> None:
    got = backend.backend.dtype_of(array)
    assert got is d, f"{what}: result dtype {got.name}, expected {d.name} (the input dtype)"


# --------------------------------------------------------------------------- softmax / log_softmax
_NORMALIZED: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {"softmax": R.softmax, "log_softmax": R.log_softmax}
_BACKWARD_VJP = {"softmax_backward": R.softmax_vjp, "log_softmax_backward": R.log_softmax_vjp}
# (shape, axis): odd sizes, the reduced axis first, last and in the middle, rows of one element, an empty batch,
# and rows longer than a 256-thread block (a blocked kernel's strided loop and its reduction across warps).
_LAYOUTS = [((5, 7), 1), ((5, 7), 0), ((2, 6, 3), 1), ((4, 1), 1), ((0, 5), 1), ((3, 300), 1)]


def _layouts(
    backend: Any, d: dt.DType, rng: np.random.Generator, scale: float = 3.0
) -> Iterator[tuple[str, Any, np.ndarray, int]]:
    """(label, device array, its float64 values, axis) for every layout, plus a transposed (non-contiguous)
    view made by the backend's own transpose kernel."""
    for shape, axis in _LAYOUTS:
        x, x64 = _put(backend, rng.standard_normal(shape) * scale, d)
        yield f"shape {shape}, axis {axis}", x, x64, axis
    base, base64 = _put(backend, rng.standard_normal((7, 5)) * scale, d)
    yield "a transposed (7, 5) view, axis 1", backend.kernels.transpose(base, (1, 0)), base64.T, 1


def _check_normalized(backend: Any, op: str, x: Any, x64: np.ndarray, axis: int, d: dt.DType, what: str) -> None:
    out = getattr(backend.kernels, op)(x, axis)
    _check_dtype(backend, out, d, what)
    assert_close(backend.get(out), _NORMALIZED[op](x64, axis), d, n=x64.shape[axis], what=what)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(_NORMALIZED))
def test_softmax_family(backend, op, dtype):
    """softmax / log_softmax over random rows of every layout (n = the row length)."""
    _require_kernel(backend, op)
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    for label, x, x64, axis in _layouts(backend, d, np.random.default_rng(SEED)):
        _check_normalized(backend, op, x, x64, axis, d, f"{op} in {d.name}, {label}")


def _large(d: dt.DType, rng: np.random.Generator, signed: bool) -> np.ndarray:
    """Rows where exp(x) overflows (:func:`op_reference.overflowing_rows`); the last is one value repeated."""
    x = R.overflowing_rows(rng, (5, 9), d, signed)
    x[-1] = x[0, 0]
    return x


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(_NORMALIZED))
def test_softmax_family_large_magnitudes(backend, op, dtype):
    """No overflow at magnitudes where exp(x) is inf: the kernel must subtract the row maximum first."""
    _require_kernel(backend, op)
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    x, x64 = _put(backend, _large(d, np.random.default_rng(SEED), signed=op == "softmax"), d)
    _check_normalized(backend, op, x, x64, 1, d, f"{op} in {d.name} of values near {np.abs(x64).max():.3g}")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(_NORMALIZED))
def test_softmax_family_neg_inf_rows(backend, op, dtype):
    """Rows of -inf with one finite value give a one-hot softmax (log_softmax 0 there, -inf elsewhere);
    a row with some -inf entries ignores them (masked attention's case)."""
    _require_kernel(backend, op)
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    rng = np.random.default_rng(SEED)
    x = np.full((5, 6), -np.inf)
    for row, col in enumerate([0, 3, 5, 2]):
        x[row, col] = rng.standard_normal() * 3
    x[4, [1, 2, 4]] = rng.standard_normal(3)
    device, x64 = _put(backend, x, d)
    _check_normalized(backend, op, device, x64, 1, d, f"{op} in {d.name} of rows of -inf")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(_BACKWARD_VJP))
def test_softmax_family_backward(backend, op, dtype):
    """backward(y, gy, axis) with y a (rounded) forward output: the float64 vector-Jacobian product (n = row
    length)."""
    _require_kernel(backend, op)
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    forward = _NORMALIZED[op.removesuffix("_backward")]
    rng = np.random.default_rng(SEED)
    for label, _, x64, axis in _layouts(backend, d, rng):
        y, y64 = _put(backend, forward(x64, axis), d)
        gy, gy64 = _put(backend, rng.standard_normal(x64.shape), d)
        out = getattr(backend.kernels, op)(y, gy, axis)
        what = f"{op} in {d.name}, {label}"
        _check_dtype(backend, out, d, what)
        assert_close(backend.get(out), _BACKWARD_VJP[op](y64, gy64, axis), d, n=x64.shape[axis], what=what)


# --------------------------------------------------------------------------- gelu
def _approximate(op: str) -> str:
    return "tanh" if op.endswith(".tanh") else "none"


def _gelu_inputs(d: dt.DType, rng: np.random.Generator, huge: bool) -> np.ndarray:
    """Random values in [-3, 3], zeros, tiny and saturated ones (erf and tanh at +-1); ``huge`` adds +-max/4.

    Random values stay above -3: below it, down to about -7, the tanh form's derivative
    0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2) is a difference of terms ~10x larger than itself
    (t -> -1), so every implementation of that formula, torch's included, is off by ~10 eps there.
    """
    edges = [0.0, -0.0, 1e-3, -1e-3, 10.0, -10.0]
    if huge:
        edges += [ampcore.finfo(d).max / 4, -ampcore.finfo(d).max / 4]
    return np.concatenate([rng.uniform(-3, 3, 64 - len(edges)), edges]).reshape(8, 8)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["gelu", "gelu.tanh"])
def test_gelu(backend, op, dtype):
    """gelu(x, approximate) elementwise, each result within gelu's ulps at its own value (the small ones near
    x = -3 included: 1 + erf cancels there, erfc does not), including huge inputs (x**3 overflows: gelu(x) is x
    or -0)."""
    _require_kernel(backend, "gelu")
    backend.require_compute(dtype)
    d, approximate = dt.as_dtype(dtype), _approximate(op)
    x, x64 = _put(backend, _gelu_inputs(d, np.random.default_rng(SEED), huge=True), d)
    out = backend.kernels.gelu(x, approximate)
    what = f"gelu(approximate={approximate!r}) in {d.name}"
    _check_dtype(backend, out, d, what)
    assert_elementwise(backend.get(out), gelu_exact(x64, approximate), d, op, what=what, inputs=(x64,))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["gelu_backward", "gelu_backward.tanh"])
def test_gelu_backward(backend, op, dtype):
    """gelu_backward(x, gy, approximate) = gy * gelu'(x), gelu' by complex step of the float64 reference."""
    _require_kernel(backend, "gelu_backward")
    backend.require_compute(dtype)
    d, approximate = dt.as_dtype(dtype), _approximate(op)
    rng = np.random.default_rng(SEED)
    x, x64 = _put(backend, _gelu_inputs(d, rng, huge=False), d)
    gy, gy64 = _put(backend, rng.standard_normal(x64.shape), d)
    out = backend.kernels.gelu_backward(x, gy, approximate)
    what = f"gelu_backward(approximate={approximate!r}) in {d.name}"
    _check_dtype(backend, out, d, what)
    expected = gy64 * R.derivative(lambda z: R.gelu(z, approximate), x64)
    assert_close(backend.get(out), expected, d, what=what)


# --------------------------------------------------------------------------- max_pool2d_tiled
# (N, C, H, W) and window: 2x2 (the common case), sizes no window covers fully, a 3x2 window.
_POOL_CASES = [((2, 3, 8, 6), (2, 2)), ((1, 2, 7, 9), (2, 2)), ((2, 2, 7, 8), (3, 2))]


def _pool_inputs(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random values with ties, signed zeros, infinities and NaNs in some windows."""
    edges = np.array([0.0, -0.0, 1.0, 1.0, np.inf, -np.inf, np.nan])
    return np.where(rng.random(shape) < 0.4, rng.choice(edges, size=shape), rng.standard_normal(shape))


def _first_maxima(x64: np.ndarray, kernel: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Each window's maximum (NaN if it holds one) and a mask of its first maximum (first NaN), in float64."""
    (kh, kw), (n, c, h, w) = kernel, x64.shape
    ho, wo = h // kh, w // kw
    windows = x64[:, :, : ho * kh, : wo * kw].reshape(n, c, ho, kh, wo, kw).transpose(0, 1, 2, 4, 3, 5)
    flat = windows.reshape(n, c, ho, wo, kh * kw)
    with np.errstate(invalid="ignore"):
        best = np.where(np.isnan(flat).any(-1), np.nan, np.max(np.where(np.isnan(flat), -np.inf, flat), -1))
    marked = (flat == best[..., None]) | np.isnan(flat)
    first = np.zeros_like(marked)
    np.put_along_axis(first, np.argmax(marked, -1)[..., None], True, -1)
    mask = np.zeros(x64.shape, bool)
    mask[:, :, : ho * kh, : wo * kw] = (
        first.reshape(n, c, ho, wo, kh, kw).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, ho * kh, wo * kw)
    )
    return best, mask


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(("shape", "kernel"), _POOL_CASES)
def test_max_pool2d_tiled(backend, shape, kernel, dtype):
    """max_pool2d_tiled(x, kernel): each window's maximum, exactly (NaN where it holds one); the backward puts
    ``g`` at each window's first maximum (first NaN) and zero everywhere else."""
    _require_kernel(backend, "max_pool2d_tiled")
    _require_kernel(backend, "max_pool2d_tiled_backward")
    backend.require_compute(dtype)
    d, rng = dt.as_dtype(dtype), np.random.default_rng(SEED)
    x, x64 = _put(backend, _pool_inputs(shape, rng), d)
    best, first = _first_maxima(x64, kernel)
    out = backend.kernels.max_pool2d_tiled(x, kernel)
    what = f"max_pool2d_tiled(kernel={kernel}) in {d.name}"
    _check_dtype(backend, out, d, what)
    np.testing.assert_array_equal(backend.get(out).astype(np.float64), best, err_msg=what)
    g, g64 = _put(backend, rng.standard_normal(best.shape), d)
    gx = backend.kernels.max_pool2d_tiled_backward(x, g, kernel)
    what = f"max_pool2d_tiled_backward(kernel={kernel}) in {d.name}"
    _check_dtype(backend, gx, d, what)
    (kh, kw), (ho, wo) = kernel, best.shape[2:]
    spread = np.zeros(shape)
    spread[:, :, : ho * kh, : wo * kw] = np.repeat(np.repeat(g64, kh, axis=2), kw, axis=3)
    np.testing.assert_array_equal(backend.get(gx).astype(np.float64), np.where(first, spread, 0.0), err_msg=what)


# --------------------------------------------------------------------------- adamw_step
STEPS = 5
# Odd, empty, and longer than a 64 Ki-element block (a blocked kernel's tail).
_PARAM_SHAPES = [(7, 13), (0,), (5,), ((1 << 16) + 3,)]
_ADAM_VARIANTS: dict[str, dict[str, Any]] = {
    "adam": dict(decoupled=False, weight_decay=0.0),
    "adam.weight_decay": dict(decoupled=False, weight_decay=0.1),
    "adamw": dict(decoupled=True, weight_decay=0.0),
    "adamw.weight_decay": dict(decoupled=True, weight_decay=0.1),
}
_ADAM_HYPER = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8)


def _state_dtype(d: dt.DType) -> dt.DType:
    """Optimizer state is float32 for float32/float16/bfloat16 parameters, float64 for float64 ones."""
    return dt.float64 if d is dt.float64 else dt.float32


def _rounder(d: dt.DType) -> Callable[[np.ndarray], np.ndarray]:
    return lambda a: _rounded(a, d).astype(np.float64)


def _draws(d: dt.DType, shapes: list[tuple[int, ...]], seed: int) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Initial parameters and STEPS gradients per parameter, rounded to ``d``, as float64."""
    rng = np.random.default_rng(seed)
    params = [_rounder(d)(rng.standard_normal(s)) for s in shapes]
    grads = [[_rounder(d)(rng.standard_normal(s)) for _ in range(STEPS)] for s in shapes]
    return params, grads


def _moment_dtype(d: dt.DType, decoupled: bool, weight_decay: float) -> dt.DType:
    """The precision the moments can be judged at: their own (float32) dtype, unless Adam's L2 term feeds the
    parameter (held in ``d``) into the gradient, which then carries ``d``'s rounding."""
    return _state_dtype(d) if decoupled or not weight_decay else d


def _roundings_after(step: int) -> int:
    """The composite rule's roundings for optimizer state after ``step`` steps: the update's own arithmetic
    (the default), plus the one rounding of the stored state each step adds."""
    return DEFAULT_ROUNDINGS + step


@pytest.mark.conformance(op="adamw_step")
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", list(_ADAM_VARIANTS))
def test_adamw_step(backend, variant, dtype):
    """STEPS calls of adamw_step over several tensors follow float64 Adam/AdamW: parameters within the
    composite rule with one more rounding per step (each step rounds the state it keeps), moments within their
    dtype's; every result keeps its dtype (moments float32, float64 for float64 parameters)."""
    _require_kernel(backend, "adamw_step")
    d = dt.as_dtype(dtype)
    sd = _state_dtype(d)
    backend.require_compute(d, sd)
    options = {**_ADAM_HYPER, **_ADAM_VARIANTS[variant]}
    p0, grads = _draws(d, _PARAM_SHAPES, SEED)
    refs = [R.adam_steps(p, g, round_param=_rounder(d), **options) for p, g in zip(p0, grads)]
    params = [backend.put(p, d) for p in p0]
    m = [backend.put(np.zeros(s), sd) for s in _PARAM_SHAPES]
    v = [backend.put(np.zeros(s), sd) for s in _PARAM_SHAPES]
    md = _moment_dtype(d, options["decoupled"], options["weight_decay"])
    for step in range(1, STEPS + 1):
        g = [backend.put(_rounded(gs[step - 1], d), d) for gs in grads]
        params, m, v = (list(a) for a in backend.kernels.adamw_step(params, g, m, v, step=step, **options))
        for i, (ref_p, ref_m, ref_v) in enumerate(next(r) for r in refs):
            what = f"adamw_step ({variant}) {d.name} tensor {i} {_PARAM_SHAPES[i]} after step {step}"
            for name, array, want in (("param", params[i], d), ("exp_avg", m[i], sd), ("exp_avg_sq", v[i], sd)):
                _check_dtype(backend, array, want, f"{what}: {name}")
            # scale=0: judged against their own magnitude, not the unit floor meant for unit inputs, which
            # would accept anything for exp_avg_sq (~1e-3 * g^2, a sum of positive terms: no cancellation).
            r = _roundings_after(step)
            assert_close(backend.get(params[i]), ref_p, d, roundings=r, scale=0.0, what=f"{what}: param")
            assert_close(backend.get(m[i]), ref_m, md, roundings=r, scale=0.0, what=f"{what}: exp_avg")
            assert_close(backend.get(v[i]), ref_v, md, roundings=r, scale=0.0, what=f"{what}: exp_avg_sq")


# --------------------------------------------------------------------------- adamw_step_amp
_AMP_SKIPPED = {3: 1.0, 5: float("nan")}  # call -> the skip flag (else 0): found inf, and a NaN flag
_AMP_CALLS = STEPS + len(_AMP_SKIPPED)


@pytest.mark.conformance(op="adamw_step_amp")
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", list(_ADAM_VARIANTS))
def test_adamw_step_amp(backend, variant, dtype):
    """adamw_step_amp with the step count and the skip flag on the device: a call whose flag is nonzero (1, or
    NaN) leaves every parameter and moment bit for bit as it was and the count unchanged; every other call is
    one step numbered count + 1, following float64 Adam/AdamW as adamw_step does, and bit for bit the
    backend's own adamw_step of that number where it has one; the count comes back as a 1-element float32."""
    _require_kernel(backend, "adamw_step_amp")
    d = dt.as_dtype(dtype)
    sd = _state_dtype(d)
    backend.require_compute(d, sd)
    options = {**_ADAM_HYPER, **_ADAM_VARIANTS[variant]}
    p0, grads = _draws(d, _PARAM_SHAPES, SEED + 2)
    refs = [R.adam_steps(p, g, round_param=_rounder(d), **options) for p, g in zip(p0, grads)]
    fused = backend.kernels.has("adamw_step")
    params = [backend.put(p, d) for p in p0]
    m = [backend.put(np.zeros(s), sd) for s in _PARAM_SHAPES]
    v = [backend.put(np.zeros(s), sd) for s in _PARAM_SHAPES]
    twins = ([backend.put(p, d) for p in p0], *([backend.put(np.zeros(s), sd) for s in _PARAM_SHAPES] for _ in "mv"))
    steps = backend.put(np.zeros(1), dt.float32)
    step = 0
    md = _moment_dtype(d, options["decoupled"], options["weight_decay"])
    for call in range(1, _AMP_CALLS + 1):
        flag = _AMP_SKIPPED.get(call, 0.0)
        g = [backend.put(_rounded(gs[min(step, STEPS - 1)], d), d) for gs in grads]
        before = [backend.get(a).tobytes() for a in (*params, *m, *v)]
        params, m, v, steps = (
            list(a) if isinstance(a, (list, tuple)) else a
            for a in backend.kernels.adamw_step_amp(params, g, m, v, steps, backend.put([flag], dt.float32), **options)
        )
        what = f"adamw_step_amp ({variant}) {d.name}, call {call} (skip flag {flag})"
        _check_dtype(backend, steps, dt.float32, f"{what}: steps")
        count = backend.get(steps).reshape(-1)
        if flag != 0.0:
            assert count.tolist() == [step], f"{what}: steps {count.tolist()}, expected [{step}] (skipped)"
            after = [backend.get(a).tobytes() for a in (*params, *m, *v)]
            assert after == before, f"{what}: a skipped step changed a parameter or a moment"
            continue
        step += 1
        assert count.tolist() == [step], f"{what}: steps {count.tolist()}, expected [{step}]"
        if fused:
            twins = tuple(list(a) for a in backend.kernels.adamw_step(*twins[:1], g, *twins[1:], step=step, **options))
            for label, got, twin in zip(("param", "exp_avg", "exp_avg_sq"), (params, m, v), twins):
                for i, (a, b) in enumerate(zip(got, twin)):
                    assert backend.get(a).tobytes() == backend.get(b).tobytes(), (
                        f"{what}: {label} {i} differs from adamw_step(step={step})'s bits"
                    )
        for i, (ref_p, ref_m, ref_v) in enumerate(next(r) for r in refs):
            where = f"{what}: tensor {i} {_PARAM_SHAPES[i]} after step {step}"
            for name, array, want in (("param", params[i], d), ("exp_avg", m[i], sd), ("exp_avg_sq", v[i], sd)):
                _check_dtype(backend, array, want, f"{where}: {name}")
            r = _roundings_after(step)
            assert_close(backend.get(params[i]), ref_p, d, roundings=r, scale=0.0, what=f"{where}: param")
            assert_close(backend.get(m[i]), ref_m, md, roundings=r, scale=0.0, what=f"{where}: exp_avg")
            assert_close(backend.get(v[i]), ref_v, md, roundings=r, scale=0.0, what=f"{where}: exp_avg_sq")


# --------------------------------------------------------------------------- optimizers
_OPTIMIZERS: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "optim.SGD": (ampcore.optim.SGD, dict(lr=0.1, weight_decay=0.01)),
    "optim.SGD.momentum": (ampcore.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1)),
    "optim.SGD.nesterov": (ampcore.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "optim.Adam": (ampcore.optim.Adam, dict(lr=1e-2, weight_decay=0.1)),
    "optim.AdamW": (ampcore.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
}
_OPT_SHAPES = [(7, 13), (5,), (3, 1, 4)]


def _reference_params(
    op: str, options: dict[str, Any], p0: list[np.ndarray], grads: list[list[np.ndarray]], d: dt.DType
) -> list[list[np.ndarray]]:
    """The float64 parameters after each step, per parameter."""
    if op.startswith("optim.SGD"):
        runs = [R.sgd_steps(p, g, round_param=_rounder(d), **options) for p, g in zip(p0, grads)]
        return [[p for p, _ in run] for run in runs]
    decoupled = op == "optim.AdamW"
    adam_runs = [
        R.adam_steps(
            p,
            g,
            lr=options["lr"],
            beta1=0.9,
            beta2=0.999,
            eps=1e-8,
            weight_decay=options["weight_decay"],
            decoupled=decoupled,
            round_param=_rounder(d),
        )
        for p, g in zip(p0, grads)
    ]
    return [[p for p, _, _ in run] for run in adam_runs]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(_OPTIMIZERS))
def test_optimizer_steps(backend, op, dtype):
    """STEPS optimizer steps of parameters on the device, gradients from backward of sum(p * c_t), follow the
    float64 rule within the composite rule plus one rounding per step (as adamw_step's), whether the backend runs
    adamw_step or the core's composition."""
    d = dt.as_dtype(dtype)
    backend.require_compute(d, _state_dtype(d))
    cls, options = _OPTIMIZERS[op]
    p0, grads = _draws(d, _OPT_SHAPES, SEED + 1)
    expected = _reference_params(op, options, p0, grads, d)
    params = [ampcore.nn.Parameter(backend.tensor(p, d)) for p in p0]
    optimizer = cls(params, **options)
    for step in range(1, STEPS + 1):
        optimizer.zero_grad()
        loss = sum((p * backend.tensor(g[step - 1], d)).sum() for p, g in zip(params, grads))
        loss.backward()
        optimizer.step()
        for i, p in enumerate(params):
            what = f"{op} {d.name} parameter {i} {_OPT_SHAPES[i]} after step {step}"
            assert p.dtype is d, f"{what}: dtype {p.dtype.name}, expected {d.name}"
            assert_close(p.numpy(), expected[i][step - 1], d, roundings=_roundings_after(step), scale=0.0, what=what)


# --------------------------------------------------------------------------- adamw_step argument checks
def _bad_arguments(backend: Any, d: dt.DType, sd: dt.DType) -> Iterator[tuple[str, dict[str, Any], type]]:
    """(label, the keyword changes to a valid call, the error) for every argument the contract rejects;
    the bad tensor is the last of three, so a kernel that checks while it writes has written the others."""
    yield "step=0", {"step": 0}, ValueError
    yield "step=1.5", {"step": 1.5}, ValueError
    yield "step=True", {"step": True}, ValueError
    yield "lr=nan", {"lr": float("nan")}, ValueError
    yield "eps=inf", {"eps": float("inf")}, ValueError
    yield "one grad too few", {"grads": lambda g: g[:-1]}, ValueError
    yield "a grad of another shape", {"grads": lambda g: g[:-1] + [backend.put(np.zeros((2, 2)), d)]}, ValueError
    if backend.stores("int32"):
        yield "an int32 parameter", {"params": lambda p: p[:-1] + [backend.put(np.zeros(5), dt.int32)]}, TypeError
    other = dt.float64 if sd is dt.float32 else dt.float32
    if backend.stores(other):
        yield f"{other.name} moments", {"exp_avgs": lambda m: m[:-1] + [backend.put(np.zeros(5), other)]}, TypeError
    yield "a parameter that is not the backend's array", {"params": lambda p: p[:-1] + [object()]}, TypeError


@pytest.mark.conformance(op="adamw_step.arguments")
@pytest.mark.parametrize("dtype", FLOATS)
def test_adamw_step_rejects_bad_arguments_before_writing(backend, dtype):
    """adamw_step raises the contract's error (ValueError / TypeError, with check_adamw_step's message where
    that function decides) for each bad argument, and leaves every parameter and moment as it was."""
    _require_kernel(backend, "adamw_step")
    d = dt.as_dtype(dtype)
    sd = _state_dtype(d)
    backend.require_compute(d, sd)
    from ampcore.kernels import check_adamw_step

    rng = np.random.default_rng(SEED)
    shapes = [(3, 4), (7,), (5,)]
    for label, change, error in _bad_arguments(backend, d, sd):
        host = {
            "params": [_rounded(rng.standard_normal(s), d) for s in shapes],
            "exp_avgs": [_rounded(rng.standard_normal(s) ** 2, sd) for s in shapes],
            "exp_avg_sqs": [_rounded(rng.standard_normal(s) ** 2, sd) for s in shapes],
        }
        args = {
            "params": [backend.put(a, d) for a in host["params"]],
            "grads": [backend.put(_rounded(rng.standard_normal(s), d), d) for s in shapes],
            "exp_avgs": [backend.put(a, sd) for a in host["exp_avgs"]],
            "exp_avg_sqs": [backend.put(a, sd) for a in host["exp_avg_sqs"]],
        }
        hyper = {**_ADAM_HYPER, "weight_decay": 0.1}
        kwargs: dict[str, Any] = {"step": 1, "decoupled": True}
        for key, value in change.items():
            if key in args:
                args[key] = value(args[key])
            elif key in hyper:
                hyper[key] = value
            else:
                kwargs[key] = value
        what = f"adamw_step with {label} ({d.name})"
        expected_message = None
        if not any(isinstance(a, object) and type(a) is object for a in args["params"]):
            try:
                check_adamw_step(
                    args["params"],
                    args["grads"],
                    args["exp_avgs"],
                    args["exp_avg_sqs"],
                    kwargs["step"],
                    hyper,
                    shape_of=backend.backend.shape_of,
                    dtype_of=backend.backend.dtype_of,
                )
            except (ValueError, TypeError) as exc:
                expected_message = str(exc)
        with pytest.raises(Exception) as info:
            backend.kernels.adamw_step(*args.values(), **kwargs, **hyper)
        assert isinstance(info.value, error), (
            f"{what}: raised {type(info.value).__name__}: {info.value}; the contract says {error.__name__}"
        )
        if expected_message is not None:
            assert str(info.value) == expected_message, (
                f"{what}: message {str(info.value)!r}, expected check_adamw_step's {expected_message!r}"
            )
        for name in ("params", "exp_avgs", "exp_avg_sqs"):
            for i, before in enumerate(host[name]):
                array = args[name][i] if i < len(args[name]) and type(args[name][i]) is not object else None
                if array is None or backend.backend.shape_of(array) != before.shape:
                    continue
                after = backend.get(array)
                if after.dtype == before.dtype:
                    assert np.array_equal(after.view(np.uint8), before.view(np.uint8)), (
                        f"{what}: {name}[{i}] was written before the error"
                    )
