"""The opencl backend's AMP family (ampcore_opencl.amp, ampcore_opencl.optim) beyond the conformance suite:
launch counts of the multi-tensor kernels, non-finite values at tile and buffer edges, empty and repeated
buffers, overflow to inf when storing float16/bfloat16, the sticky found_inf flag, nothing recompiled when a
scalar changes, update_scale and adamw_step bit for bit against the CPU backend, and gelu's accuracy."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyopencl")

from opencl_devices import get, put, state

from ampcore import dtypes as dt
from ampcore_cpu import fused_optim as cpu_optim
from ampcore_cpu import kernels as cpu
from ampcore_opencl import (
    amp,
    optim,
)

pytestmark = pytest.mark.usefixtures("opencl_device")  # every test on every OpenCL device

F32 = np.float32
INV = F32(1.0) / F32(49152.75)  # not a power of two: the products really round


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


class Counter:
    """Counts launches and program builds on the device, by wrapping the DeviceState's methods."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        s = state()
        self.launches, self.builds = 0, 0
        launch, build = s.launch, s.build

        def counted_launch(*args: Any) -> Any:
            self.launches += 1
            return launch(*args)

        def counted_build(source: str) -> Any:
            self.builds += 1
            return build(source)

        monkeypatch.setattr(s, "launch", counted_launch)
        monkeypatch.setattr(s, "build", counted_build)


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    yield Counter(monkeypatch)


def grads(sizes: list[int], dtype: dt.DType = dt.float32, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(dtype.numpy) for n in sizes]


def unscale(
    host: list[np.ndarray], dtype: dt.DType = dt.float32, inv: Any = INV, flag: float = 0.0
) -> tuple[list[np.ndarray], float]:
    out, found = amp.unscale_and_check(
        [put(g, dtype) for g in host], put(np.array([inv], F32), "float32"), put(np.array([flag], F32), "float32")
    )
    return [get(g) for g in out], float(get(found)[0])


def expected_unscaled(g: np.ndarray, inv: Any) -> np.ndarray:
    """The float32 product rounded once to ``g``'s dtype (float64 gradients: the float64 product)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if g.dtype == np.float64:
            return g * np.float64(inv)
        return (g.astype(F32) * F32(inv)).astype(g.dtype)


def assert_unscaled(out: list[np.ndarray], host: list[np.ndarray], inv: Any = INV) -> None:
    for i, (got, g) in enumerate(zip(out, host)):
        want = expected_unscaled(g, inv)
        same = (bits(got) == bits(want)) | (np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64)))
        assert same.all(), f"gradient {i}: {int((~same).sum())} of {g.size} elements are not g * inv_scale"


# --------------------------------------------------------------------------- unscale_and_check
SIZES_20 = [7, 15, 1, 24, 143, 15, 17, 1, 36, 27, 42, 30, 23, 18, 31, 25, 42, 13, 24, 5000]


def test_twenty_gradients_are_unscaled_in_one_launch(counter):
    host = grads(SIZES_20)
    out, flag = unscale(host)
    assert counter.launches == 1, f"20 float32 gradients took {counter.launches} launches, expected 1"
    assert flag == 0.0
    assert_unscaled(out, host)


@pytest.mark.parametrize("where", ["first", "last"])
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("dtype", [dt.float32, dt.float64, dt.bfloat16, dt.float16], ids=lambda d: d.name)
def test_nonfinite_at_the_edges_of_the_last_gradient_sets_the_flag(dtype, bad, where):
    host = grads(SIZES_20, dtype, seed=1)
    host[-1][0 if where == "first" else -1] = bad
    out, flag = unscale(host, dtype)
    assert flag == 1.0, f"{bad} at the {where} element of the last gradient was missed"
    assert_unscaled(out, host)


@pytest.mark.parametrize("at", [0, 255, 256, 257, 511, 512, 999])
def test_nan_at_tile_boundaries_is_found(at):
    """Tiles are LOCAL_SIZE elements: the elements on either side of each boundary, in a 1000-element
    gradient between two others."""
    host = grads([300, 1000, 3])
    host[1][at] = np.nan
    out, flag = unscale(host)
    assert flag == 1.0, f"NaN at element {at} missed"
    assert_unscaled(out, host)


def test_empty_gradients_among_others(counter):
    host = [np.zeros(0, F32), np.ones(5, F32), np.zeros(0, F32), np.array([1.0, np.inf], F32), np.zeros(0, F32)]
    out, flag = unscale(host)
    assert flag == 1.0
    assert [g.shape for g in out] == [(0,), (5,), (0,), (2,), (0,)]
    assert_unscaled(out, host)
    launches = counter.launches
    out, flag = unscale([np.zeros(0, F32), np.zeros((3, 0), F32)])
    assert counter.launches == launches, "only empty gradients: nothing to launch"
    assert flag == 0.0


@pytest.mark.parametrize("calls", [[True, False, False], [False, True, False], [False, False]])
def test_found_inf_is_never_cleared(calls):
    """The flag passes from call to call (GradScaler accumulates it); a clean call leaves a set flag set."""
    found = put(np.array([0.0], F32), "float32")
    inv = put(np.array([INV], F32), "float32")
    seen_bad = False
    for n, bad in enumerate(calls):
        host = grads([7, 300], seed=n)
        if bad:
            host[1][-1] = np.nan
        seen_bad |= bad
        _, found = amp.unscale_and_check([put(g, "float32") for g in host], inv, found)
        assert float(get(found)[0]) == float(seen_bad), f"after call {n + 1} of {calls}"


def test_a_flag_set_before_the_call_stays_set():
    _, flag = unscale(grads([7, 300]), flag=1.0)
    assert flag == 1.0


# Values whose float32 product is finite but rounds to inf in the gradient's dtype (and the largest that do
# not): no inf may reach the optimizer unflagged.
OVERFLOW_CASES = {
    "float16 65504 stays finite": (dt.float16, 32752.0, 2.0, 0.0),
    "float16 65520 rounds to inf": (dt.float16, 32760.0, 2.0, 1.0),
    "bfloat16 max stays finite": (dt.bfloat16, float.fromhex("0x1.fep127"), 1.0 + 2.0**-9, 0.0),
    "bfloat16 past the halfway point rounds to inf": (dt.bfloat16, float.fromhex("0x1.fep127"), 1.0 + 2.0**-8, 1.0),
    "float32 overflows": (dt.float32, float(np.finfo(F32).max), 2.0, 1.0),
    "float32 max stays finite": (dt.float32, float(np.finfo(F32).max), 1.0, 0.0),
}


@pytest.mark.parametrize("case", list(OVERFLOW_CASES))
def test_flag_is_set_exactly_when_a_stored_value_is_not_finite(case):
    dtype, value, inv, want = OVERFLOW_CASES[case]
    host = [np.array([1.0, value, -value], dtype.numpy)]
    out, flag = unscale(host, dtype, inv=F32(inv))
    stored_bad = not np.isfinite(out[0].astype(np.float64)).all()
    assert (flag, float(stored_bad)) == (want, want), f"{case}: flag {flag}, stored {out[0]!r}"
    assert_unscaled(out, host, F32(inv))


def test_more_than_32_gradients_are_chunked(counter):
    host = grads([(7 * i) % 61 + 1 for i in range(70)], seed=3)
    host[45][0] = np.inf
    out, flag = unscale(host)
    assert counter.launches == 3, f"70 gradients took {counter.launches} launches, expected 3 (32 + 32 + 6)"
    assert flag == 1.0
    assert_unscaled(out, host)


def test_mixed_dtypes_run_one_launch_each(counter):
    a, b = grads([5, 9], dt.float32), grads([4, 6], dt.bfloat16, seed=1)
    arrays = [put(a[0], "float32"), put(b[0], "bfloat16"), put(a[1], "float32"), put(b[1], "bfloat16")]
    out, found = amp.unscale_and_check(arrays, put(np.array([INV], F32), "float32"), put(np.zeros(1, F32), "float32"))
    assert counter.launches == 2
    assert_unscaled([get(g) for g in out], [a[0], b[0], a[1], b[1]])


def test_a_buffer_listed_twice_is_scaled_once():
    g = put(np.full(10, 3.0, F32), "float32")
    out, _ = amp.unscale_and_check(
        [g, g.reshaped((2, 5))], put(np.array([0.5], F32), "float32"), put(np.zeros(1, F32), "float32")
    )
    assert (get(out[0]) == 1.5).all() and (get(out[1]) == 1.5).all()


def test_new_sizes_and_scales_compile_nothing(counter):
    unscale(grads([5, 9, 300]), inv=F32(0.25))
    built = counter.builds
    unscale(grads([17, 2, 1000], seed=2), inv=F32(3.0))
    unscale(grads([1, 1, 1], seed=3), inv=INV)
    assert counter.builds == built, "a new scale or new gradient sizes recompiled the kernel"


def test_bad_arguments_are_refused():
    g = put(np.ones(3, F32), "float32")
    with pytest.raises(TypeError, match="inv_scale must be a 1-element float32"):
        amp.unscale_and_check([g], put(np.ones(2, F32), "float32"), put(np.zeros(1, F32), "float32"))
    with pytest.raises(TypeError, match="gradient 0 is int32"):
        amp.unscale_and_check(
            [put(np.ones(3, np.int32), "int32")], put(np.ones(1, F32), "float32"), put(np.zeros(1, F32), "float32")
        )


# --------------------------------------------------------------------------- update_scale
SCALE_SETTINGS = {
    "torch factors, interval 3": (2.0, 0.5, 3, 65536.0),
    "1.1 and 0.3: one rounding of the float64 product": (1.1, 0.3, 2, 3.0),
    "growth overflowing float32": (2.0, 0.5, 1, 2.0**125),
}


def _found_infs(steps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random(steps) < 0.25, rng.choice([1.0, 2.0], steps), 0.0).astype(F32)


@pytest.mark.parametrize("use64", [True, False], ids=["fp64", "fma-fallback"])
@pytest.mark.parametrize("setting", list(SCALE_SETTINGS))
def test_update_scale_matches_the_cpu_backend_bit_for_bit(setting, use64):
    """200 steps of a random found_inf sequence.  The no-fp64 path (an fma of the split factor) is exact for
    factors that are float32 numbers; for 1.1/0.3 it is allowed one ulp."""
    if use64 and not state().fp64:
        pytest.skip("the device has no fp64")
    growth, backoff, interval, init = SCALE_SETTINGS[setting]
    exact = use64 or (float(F32(growth)) == growth and float(F32(backoff)) == backoff)
    scale, tracker = put(np.array([init], F32), "float32"), put(np.array([0], np.int32), "int32")
    ref_scale, ref_tracker = np.array([init], F32), np.array([0], np.int32)
    for step, f in enumerate(_found_infs(200, seed=len(setting)), 1):
        flag = np.array([f], F32)
        scale, tracker = amp._update_scale(scale, tracker, put(flag, "float32"), growth, backoff, interval, use64)
        ref_scale, ref_tracker = cpu.update_scale(ref_scale, ref_tracker, flag, growth, backoff, interval)
        got_scale, got_tracker = get(scale), get(tracker)
        what = (
            f"{setting} step {step} (found_inf {f}): scale {got_scale[0]!r} vs {ref_scale[0]!r}, "
            f"tracker {got_tracker[0]} vs {ref_tracker[0]}"
        )
        assert got_tracker[0] == ref_tracker[0], what
        if exact:
            assert bits(got_scale) == bits(ref_scale), what
        else:
            assert abs(int(bits(got_scale)[0]) - int(bits(ref_scale)[0])) <= 1, what
            ref_scale = got_scale  # follow the device's scale, so one ulp does not grow over the steps


def test_update_scale_returns_new_arrays_and_never_recompiles(counter):
    scale, tracker = put(np.array([8.0], F32), "float32"), put(np.array([2], np.int32), "int32")
    new_scale, new_tracker = amp.update_scale(scale, tracker, put(np.zeros(1, F32), "float32"), 2.0, 0.5, 3)
    assert new_scale is not scale and new_tracker is not tracker
    assert get(scale)[0] == 8.0 and get(tracker)[0] == 2, "the inputs were modified"
    assert (get(new_scale)[0], get(new_tracker)[0]) == (16.0, 0)
    built = counter.builds
    amp.update_scale(new_scale, new_tracker, put(np.ones(1, F32), "float32"), 1.5, 0.25, 7)
    assert counter.builds == built, "new factors or interval recompiled update_scale"


# --------------------------------------------------------------------------- adamw_step
ADAM = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8)
ADAM_SHAPES = [(7, 13), (0,), (5,), (300,), (1,), (2, 3, 4)]


def _adam_inputs(pd: dt.DType, seed: int, n_steps: int) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(pd.numpy) for s in ADAM_SHAPES]
    return params, [[rng.standard_normal(s).astype(pd.numpy) for s in ADAM_SHAPES] for _ in range(n_steps)]


@pytest.mark.parametrize("mode", ["adam", "adam.l2", "adamw", "adamw.decay"])
@pytest.mark.parametrize("pd", [dt.float32, dt.bfloat16, dt.float16, dt.float64], ids=lambda d: d.name)
def test_adamw_step_matches_the_cpu_backend_bit_for_bit(pd, mode):
    """Op for op the CPU backend's rule, each operation rounded once (no fma contraction): the same bits
    wherever division and square root are correctly rounded."""
    s = state()
    if not s.correctly_rounded_div_sqrt:
        pytest.skip("the device's float32 division/sqrt are not correctly rounded: no bit-exact comparison")
    if pd == dt.float64 and not s.fp64:
        pytest.skip("the device has no fp64")
    options = dict(ADAM, decoupled=mode.startswith("adamw"), weight_decay=0.1 if "." in mode else 0.0)
    md = dt.float64 if pd == dt.float64 else dt.float32
    p0, steps = _adam_inputs(pd, seed=7, n_steps=4)
    cp = [p.copy() for p in p0]
    cm = [np.zeros(p.shape, md.numpy) for p in p0]
    cv = [np.zeros(p.shape, md.numpy) for p in p0]
    params, m, v = [put(p, pd) for p in p0], [put(a, md) for a in cm], [put(a, md) for a in cv]
    for step, g in enumerate(steps, 1):
        params, m, v = optim.adamw_step(params, [put(x, pd) for x in g], m, v, step=step, **options)
        cp, cm, cv = cpu_optim.adamw_step(cp, g, cm, cv, step=step, **options)
        for i in range(len(p0)):
            for name, got, want in (("param", params[i], cp[i]), ("exp_avg", m[i], cm[i]), ("exp_avg_sq", v[i], cv[i])):
                assert (bits(get(got)) == bits(want)).all(), f"{mode} {pd.name} step {step} tensor {i}: {name}"


def test_adamw_step_with_gradients_of_another_dtype(counter):
    """float32 parameters with bfloat16 and float32 gradients: one launch per (param, grad) dtype pair, each
    the CPU backend's bits (a bfloat16 gradient widens exactly)."""
    if not state().correctly_rounded_div_sqrt:
        pytest.skip("the device's float32 division/sqrt are not correctly rounded: no bit-exact comparison")
    rng = np.random.default_rng(4)
    p0 = [rng.standard_normal(n).astype(F32) for n in (9, 300, 4)]
    g = [
        rng.standard_normal(9).astype(dt.bfloat16.numpy),
        rng.standard_normal(300).astype(F32),
        rng.standard_normal(4).astype(dt.bfloat16.numpy),
    ]
    zeros = [np.zeros(p.shape, F32) for p in p0]
    options = dict(ADAM, step=2, weight_decay=0.1, decoupled=False)
    params, m, v = optim.adamw_step(
        [put(p, "float32") for p in p0],
        [put(x, x.dtype) for x in g],
        [put(z, "float32") for z in zeros],
        [put(z, "float32") for z in zeros],
        **options,
    )
    assert counter.launches == 2
    cp, cm, cv = cpu_optim.adamw_step(
        [p.copy() for p in p0], g, [z.copy() for z in zeros], [z.copy() for z in zeros], **options
    )
    for i in range(3):
        assert (
            (bits(get(params[i])) == bits(cp[i])).all()
            and (bits(get(m[i])) == bits(cm[i])).all()
            and (bits(get(v[i])) == bits(cv[i])).all()
        ), f"tensor {i} ({g[i].dtype} gradient)"


def test_adamw_step_new_step_or_lr_compiles_nothing(counter):
    p0, steps = _adam_inputs(dt.float32, seed=1, n_steps=3)
    params = [put(p, "float32") for p in p0]
    m, v = [put(np.zeros(p.shape, F32), "float32") for p in p0], [put(np.zeros(p.shape, F32), "float32") for p in p0]
    for step, (g, lr) in enumerate(zip(steps, [1e-2, 3e-3, 1e-4]), 1):
        params, m, v = optim.adamw_step(
            params,
            [put(x, "float32") for x in g],
            m,
            v,
            step=step,
            lr=lr,
            beta1=0.9,
            beta2=0.99,
            eps=1e-6,
            weight_decay=0.01,
            decoupled=True,
        )
        if step == 1:
            built = counter.builds
    assert counter.builds == built, "a new step or lr recompiled adamw_step"


def test_adamw_step_launches_once_per_variant_width(counter):
    n = 40
    params = [put(np.ones(k + 1, F32), "float32") for k in range(n)]
    zeros = [[put(np.zeros(k + 1, F32), "float32") for k in range(n)] for _ in range(2)]
    optim.adamw_step(
        params,
        [put(np.ones(k + 1, F32), "float32") for k in range(n)],
        *zeros,
        step=1,
        **ADAM,
        weight_decay=0.0,
        decoupled=True,
    )
    k = amp.max_variant(state(), 4, 4 + 8 * 4)
    assert counter.launches == math.ceil(n / k), f"{n} tensors took {counter.launches} launches with K = {k}"
    assert all(np.allclose(get(p), 1.0 - 1e-2) for p in params)


def test_adamw_step_validates_everything_before_writing():
    p0 = np.arange(6, dtype=F32)
    params = [put(p0, "float32"), put(p0, "float32")]
    grads_ = [put(np.ones(6, F32), "float32"), put(np.ones(5, F32), "float32")]  # the last one's shape is wrong
    m = [put(np.zeros(6, F32), "float32") for _ in range(2)]
    v = [put(np.zeros(6, F32), "float32") for _ in range(2)]
    with pytest.raises(ValueError, match="tensor 1: shapes differ"):
        optim.adamw_step(params, grads_, m, v, step=1, **ADAM, weight_decay=0.0, decoupled=True)
    assert (get(params[0]) == p0).all() and (get(m[0]) == 0).all(), "the first tensor was written before the error"
    with pytest.raises(ValueError, match="step must be an int >= 1"):
        optim.adamw_step(params[:1], grads_[:1], m[:1], v[:1], step=0, **ADAM, weight_decay=0.0, decoupled=True)
    with pytest.raises(TypeError, match="moments must be float32"):
        optim.adamw_step(
            params[:1],
            grads_[:1],
            [put(np.zeros(6), "float64")],
            v[:1],
            step=1,
            **ADAM,
            weight_decay=0.0,
            decoupled=True,
        )
    with pytest.raises(ValueError, match="lr must be finite"):
        optim.adamw_step(
            params[:1], grads_[:1], m[:1], v[:1], step=1, **{**ADAM, "lr": math.nan}, weight_decay=0.0, decoupled=True
        )


# --------------------------------------------------------------------------- gelu
def _sigmoid_2y(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sigmoid(2y) and its derivative factor sigmoid * (1 - sigmoid), y = sqrt(2/pi) (x + 0.044715 x^3), in
    long double: the tanh form without torch's cancellations."""
    xl = x.astype(np.longdouble)
    e = np.exp(-2 * np.sqrt(np.longdouble(2) / np.longdouble(np.pi)) * (xl + np.longdouble(0.044715) * xl**3))
    return 1 / (1 + e), e / (1 + e) ** 2


def _gelu64(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return (x.astype(np.longdouble) * _sigmoid_2y(x)[0]).astype(np.float64)
    return 0.5 * x * np.vectorize(math.erfc)(-x / math.sqrt(2.0))


def _gelu_grad64(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        s, ds = _sigmoid_2y(x)
        xl = x.astype(np.longdouble)
        c2 = 2 * np.sqrt(np.longdouble(2) / np.longdouble(np.pi))
        return (s + xl * ds * c2 * (1 + 3 * np.longdouble(0.044715) * xl * xl)).astype(np.float64)
    return 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2.0)) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


EPS = {dt.float32: 2.0**-23, dt.float16: 2.0**-10, dt.bfloat16: 2.0**-7, dt.float64: 2.0**-52}


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16, dt.float64], ids=lambda d: d.name)
def test_gelu_and_its_backward_are_accurate_element_by_element(dtype, approximate):
    """Each element within 4 eps of max(|reference|, 1)... and of its own magnitude where that is larger, over
    [-10, 10] (20001 points: a size that is no multiple of the work-group)."""
    if dtype == dt.float64 and not state().fp64:
        pytest.skip("the device has no fp64")
    x = np.linspace(-10, 10, 20001).astype(dtype.numpy)
    x64 = x.astype(np.float64)
    gy = np.full(x.shape, 0.75, dtype.numpy)
    tol = 4 * EPS[dtype]
    for what, got, want in (
        ("gelu", amp.gelu(put(x, dtype), approximate), _gelu64(x64, approximate)),
        (
            "gelu_backward",
            amp.gelu_backward(put(x, dtype), put(gy, dtype), approximate),
            0.75 * _gelu_grad64(x64, approximate),
        ),
    ):
        assert got.dtype == dtype and got.shape == x.shape
        err = np.abs(get(got).astype(np.float64) - want)
        allowed = tol * np.maximum(np.abs(want), 1.0)
        worst = int(np.argmax(err / allowed))
        assert (err <= allowed).all(), (
            f"{what}({approximate}) {dtype.name} at x={x64[worst]}: {get(got)[worst]!r} vs {want[worst]!r}"
        )


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float_arithmetic_meets_the_float32_tolerance(monkeypatch, approximate):
    """The path of a device without fp64 (float32 computed in float), forced here: within 4 eps on this
    device's float exp (OpenCL allows 3 ulp)."""
    monkeypatch.setattr(amp, "gelu_compute_type", lambda s, d: "float")
    x = np.linspace(-10, 10, 20001).astype(F32)
    x64 = x.astype(np.float64)
    for what, got, want in (
        ("gelu", amp.gelu(put(x, "float32"), approximate), _gelu64(x64, approximate)),
        (
            "gelu_backward",
            amp.gelu_backward(put(x, "float32"), put(x, "float32"), approximate),
            x64 * _gelu_grad64(x64, approximate),
        ),
    ):
        err = np.abs(get(got).astype(np.float64) - want)
        allowed = 4 * EPS[dt.float32] * np.maximum(np.abs(want), 1.0)
        worst = int(np.argmax(err / allowed))
        assert (err <= allowed).all(), (
            f"{what}({approximate}) at x={x64[worst]}: {get(got)[worst]!r} vs {want[worst]!r}"
        )


def test_gelu_edge_cases_follow_the_cpu_backend():
    """inf, -inf (NaN: -inf * 0, as torch's formula), NaN, zeros and huge values (x^3 overflows)."""
    from ampcore_cpu.fused_nn import NN_KERNELS

    host = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38, -3e38, 1e-30], F32)
    for approximate in ("none", "tanh"):
        got, want = get(amp.gelu(put(host, "float32"), approximate)), NN_KERNELS["gelu"](host, approximate)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        assert same.all(), f"gelu({approximate}) of {host} gave {got}, the CPU backend {want}"
    empty = amp.gelu(put(np.zeros((0, 3), F32), "float32"), "none")
    assert empty.shape == (0, 3)
    x = put(host, "float32")
    with pytest.raises(ValueError, match="unknown approximate 'fast'"):
        amp.gelu(x, "fast")
    with pytest.raises(ValueError, match="must have the input's shape and dtype"):
        amp.gelu_backward(x, put(np.ones(3, F32), "float32"), "none")


def test_kernels_names_the_family():
    from ampcore_opencl import kernels, optim

    assert set(amp.kernels()) == {"unscale_and_check", "update_scale", "gelu", "gelu_backward"}
    assert set(optim.kernels()) == {"adamw_step", "adamw_step_amp"}
    assert {"adamw_step", "adamw_step_amp", "softmax", "log_softmax_backward"} <= set(kernels.kernel_table())
