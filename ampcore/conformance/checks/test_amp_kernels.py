"""The two AMP kernels called directly: ``unscale_and_check`` and ``update_scale`` (contract: ampcore.kernels).

``unscale_and_check(grads, inv_scale, found_inf)`` multiplies every gradient by the 1-element float32
``inv_scale`` and sets the 1-element float32 ``found_inf`` to 1.0 if any element of any gradient is inf or
NaN; it never clears it.  The product of two float32 numbers is one IEEE rounding, so float32 results must be
bit-exact with NumPy's float32 multiply (float64: with the float64 multiply).  For float16/bfloat16 gradients
the contract allows a float32 (or better) product rounded once to the gradient's dtype, so either rounding is
accepted, element by element.  One call gets gradients of one dtype, as GradScaler groups them.

``update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval)`` is
torch's dynamic loss-scale rule on a float32 scale and an int32 tracker; it is compared, step by step and
bit for bit, with the pure-Python model :func:`scale_rule` over long random finite/inf sequences.

Kernels may work in place: only the arrays they return are read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from ampcore import dtypes as dt

UNSCALE = pytest.mark.conformance(op="unscale_and_check")
UPDATE = pytest.mark.conformance(op="update_scale")

GRAD_DTYPES = ["float32", "float64", "bfloat16", "float16"]
# A loss scale that is not a power of two, so the unscaled values really are rounded.
INV_SCALE = np.float32(1.0) / np.float32(49152.75)
# 20 gradients of assorted odd shapes, as an optimizer's parameter list would give.
SHAPES: tuple[tuple[int, ...], ...] = (
    (7,),
    (3, 5),
    (1,),
    (2, 3, 4),
    (11, 13),
    (5, 1, 3),
    (17,),
    (1, 1),
    (4, 9),
    (3, 3, 3),
    (6, 7),
    (2, 1, 5, 3),
    (23,),
    (9, 2),
    (1, 31),
    (5, 5),
    (3, 7, 2),
    (13,),
    (8, 3),
    (2, 2, 2, 2),
)
TINY = np.finfo(np.float32).tiny
BAD_VALUES = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}
# Where in the list the bad gradient is, and where in that gradient the bad element is.
TENSOR_POSITIONS = {"first tensor": 0, "middle tensor": len(SHAPES) // 2, "last tensor": len(SHAPES) - 1}
ELEMENT_POSITIONS: dict[str, Callable[[int], int]] = {
    "first element": lambda n: 0,
    "middle element": lambda n: n // 2,
    "last element": lambda n: n - 1,
}


# --------------------------------------------------------------------------- helpers
def random_grads(dtype: dt.DType, seed: int = 0, shapes: tuple[tuple[int, ...], ...] = SHAPES) -> list[np.ndarray]:
    """Scaled-gradient-like values of both signs spanning six decades (all finite in float16), in ``dtype``."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * 10.0 ** rng.uniform(-3, 3, s)).astype(dtype.numpy) for s in shapes]


def unscaled_candidates(g: np.ndarray, inv: np.float32) -> list[np.ndarray]:
    """The results the contract allows for ``g * inv`` in ``g``'s dtype (one or two of them)."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is part of what is checked
        if g.dtype == np.float64:
            return [g * np.float64(inv)]
        if g.dtype == np.float32:
            return [g * inv]  # one IEEE rounding of the exact product
        # float16/bfloat16: rounded once from the float32 product, or from the exact one (float64 holds it).
        exact = g.astype(np.float64) * np.float64(inv)
        return [(g.astype(np.float32) * inv).astype(g.dtype), dt.convert(exact, dt.as_dtype(g.dtype))]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def assert_unscaled(actual: np.ndarray, original: np.ndarray, inv: np.float32, what: str) -> None:
    """``actual`` is ``original * inv`` bit for bit (any allowed rounding, element by element; NaN as NaN)."""
    assert actual.dtype == original.dtype, f"{what}: dtype {actual.dtype}, expected {original.dtype}"
    assert actual.shape == original.shape, f"{what}: shape {actual.shape}, expected {original.shape}"
    candidates = unscaled_candidates(original, inv)
    nan = np.isnan(candidates[0].astype(np.float64))
    ok = nan & np.isnan(actual.astype(np.float64))
    for c in candidates:
        ok |= ~nan & (_bits(actual) == _bits(c))
    if not ok.all():
        i = tuple(int(v) for v in np.argwhere(~ok)[0])
        raise AssertionError(
            f"{what}: {int((~ok).sum())} of {ok.size} elements are not the gradient times inv_scale; at {i}: "
            f"{original[i]!r} * {inv!r} gave {actual[i]!r}, expected {candidates[0][i]!r} "
            f"(a single rounding to {original.dtype})"
        )


@dataclass
class Unscaled:
    grads: list[np.ndarray]  # host copies of the returned gradients
    found_inf: Any  # the returned device flag, to pass to a later call
    flag: float  # its value


def unscale(backend: Any, grads: list[Any], found_inf: Any = 0.0, inv: np.float32 = INV_SCALE) -> Unscaled:
    """Run the kernel on device arrays ``grads``; ``found_inf`` is a device flag or a value to start from."""
    if not isinstance(found_inf, (int, float)):
        flag_in = found_inf
    else:
        flag_in = backend.put(np.array([found_inf], np.float32), "float32")
    out, flag = backend.kernels.unscale_and_check(list(grads), backend.put(np.array([inv]), "float32"), flag_in)
    out = list(out)
    assert len(out) == len(grads), f"unscale_and_check returned {len(out)} gradients for {len(grads)}"
    info = backend.backend
    assert info.dtype_of(flag) is dt.float32 and info.shape_of(flag) == (1,), (
        f"found_inf came back as {info.dtype_of(flag).name} {info.shape_of(flag)}, expected a 1-element float32"
    )
    value = float(backend.get(flag).reshape(-1)[0])
    assert value in (0.0, 1.0), f"found_inf is {value!r}; it must be 0.0 (all finite) or 1.0 (inf/NaN seen)"
    return Unscaled([backend.get(a) for a in out], flag, value)


def put_all(backend: Any, host: list[np.ndarray], dtype: dt.DType) -> list[Any]:
    return [backend.put(g, dtype) for g in host]


def assert_all_unscaled(result: Unscaled, host: list[np.ndarray], what: str) -> None:
    for i, (got, g) in enumerate(zip(result.grads, host)):
        assert_unscaled(got, g, INV_SCALE, f"{what}, gradient {i} of shape {g.shape}")


# --------------------------------------------------------------------------- unscale_and_check
@UNSCALE
@pytest.mark.parametrize("dtype", GRAD_DTYPES)
def test_unscale_multiplies_every_gradient_exactly(backend, dtype):
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    host = random_grads(d)
    result = unscale(backend, put_all(backend, host, d))
    assert_all_unscaled(result, host, f"{dtype} gradients")
    assert result.flag == 0.0, "found_inf was set, but every gradient is finite"


@UNSCALE
@pytest.mark.parametrize("bad", list(BAD_VALUES))
@pytest.mark.parametrize("dtype", GRAD_DTYPES)
def test_unscale_finds_nonfinite_anywhere(backend, dtype, bad):
    """``bad`` at the first, middle and last element of the first, middle and last of 20 gradients: the flag
    is set, the bad element stays that non-finite value, and every finite element is still unscaled."""
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    for tensor_where, t in TENSOR_POSITIONS.items():
        for element_where, pick in ELEMENT_POSITIONS.items():
            host = random_grads(d, seed=t)
            flat = host[t].reshape(-1)
            flat[pick(flat.size)] = BAD_VALUES[bad]
            result = unscale(backend, put_all(backend, host, d))
            where = f"{bad} at the {element_where} of the {tensor_where} of {len(host)} {dtype} gradients"
            assert result.flag == 1.0, f"{where}: found_inf stayed {result.flag}, expected 1.0"
            assert_all_unscaled(result, host, where)


@UNSCALE
@pytest.mark.parametrize("dtype", GRAD_DTYPES)
def test_unscale_flags_overflow_at_the_stored_dtypes_range(backend, dtype):
    """The overflow check is against the gradient dtype's own range: its largest finite value at inv_scale 1
    is not flagged (and stays as it was); at inv_scale 2 it overflows the dtype and is."""
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    big = float(dt.finfo(d).max)
    host = [np.asarray(dt.convert(np.array([big, -big, 1.0, -0.5]), d))]
    result = unscale(backend, put_all(backend, host, d), inv=np.float32(1.0))
    assert result.flag == 0.0, f"{dtype}'s largest finite value {big!r} at scale 1 set found_inf"
    assert_unscaled(result.grads[0], host[0], np.float32(1.0), f"{dtype} max at scale 1")
    result = unscale(backend, put_all(backend, host, d), inv=np.float32(2.0))
    assert result.flag == 1.0, f"2 * {big!r} overflows {dtype}, but found_inf stayed {result.flag}"


def _edge_lists() -> dict[str, tuple[list[np.ndarray], float]]:
    """Scenario -> (float32 gradients, expected found_inf); inv_scale is INV_SCALE unless in EDGE_INV."""
    big = np.float32(np.finfo(np.float32).max)
    bad = np.array([1.0, np.inf, 2.0], np.float32)
    return {
        "empty list": ([], 0.0),
        "only empty tensors": (
            [np.zeros((0,), np.float32), np.zeros((3, 0), np.float32), np.zeros((0, 4, 2), np.float32)],
            0.0,
        ),
        "empty tensors around a bad one": ([np.zeros((0,), np.float32), bad, np.zeros((2, 0), np.float32)], 1.0),
        "zeros and negative zeros": ([np.zeros((4, 3), np.float32), -np.zeros((5,), np.float32)], 0.0),
        # At scale 1 (reached after backoffs): a check that sums the values overflows and skips a good step.
        "float32-max values at scale 1": ([np.full((1000,), big), np.full((7,), -big)], 0.0),
        "one-element NaN among zeros": ([np.zeros((3,), np.float32), np.array([np.nan], np.float32)], 1.0),
        # The contract checks the unscaled values: a finite gradient that overflows when inv_scale > 1 (a scale
        # backed off below 1) must not reach the optimizer as inf.
        "finite gradient overflowing on unscale": ([np.ones((3,), np.float32), np.full((2,), big)], 1.0),
    }


EDGE_CASES = list(_edge_lists())
EDGE_INV = {"float32-max values at scale 1": np.float32(1.0), "finite gradient overflowing on unscale": np.float32(2.0)}


@UNSCALE
@pytest.mark.parametrize("case", EDGE_CASES)
def test_unscale_edge_lists(backend, case):
    host, expected = _edge_lists()[case]
    inv = EDGE_INV.get(case, INV_SCALE)
    result = unscale(backend, put_all(backend, host, dt.float32), inv=inv)
    assert result.flag == expected, f"{case}: found_inf is {result.flag}, expected {expected}"
    for i, (got, g) in enumerate(zip(result.grads, host)):
        assert_unscaled(got, g, inv, f"{case}, gradient {i} of shape {g.shape}")


# case -> (found_inf before the first call, the calls, found_inf after each).  A call: (seed of its 20 float32
# gradients or None for an empty list, index of the gradient whose last element is NaN or None).
STICKY: dict[str, tuple[float, list[tuple[int | None, int | None]], list[float]]] = {
    "bad then clean then empty": (0.0, [(1, 4), (2, None), (None, None)], [1.0, 1.0, 1.0]),
    "clean, bad, clean": (0.0, [(1, None), (2, 19), (3, None)], [0.0, 1.0, 1.0]),
    "set before a clean call": (1.0, [(1, None), (2, None)], [1.0, 1.0]),
}


@UNSCALE
@pytest.mark.parametrize("case", list(STICKY))
def test_found_inf_stays_set_across_calls(backend, case):
    """The kernel sets found_inf and never clears it: GradScaler accumulates one flag over calls."""
    start, calls, expected = STICKY[case]
    flag: Any = start
    for n, ((seed, nan_at), want) in enumerate(zip(calls, expected), 1):
        host = [] if seed is None else random_grads(dt.float32, seed=seed)
        if nan_at is not None:
            host[nan_at].reshape(-1)[-1] = np.nan
        result = unscale(backend, put_all(backend, host, dt.float32), flag)
        assert result.flag == want, f"{case}: after call {n} found_inf is {result.flag}, expected {want}"
        assert_all_unscaled(result, host, f"{case}, call {n}")
        flag = result.found_inf


LARGE = 1 << 20
LARGE_BAD_AT = {
    "clean": None,
    "NaN first": 0,
    "NaN last": LARGE - 1,
    "NaN at 2**17 - 1": (1 << 17) - 1,
    "NaN at 2**17": 1 << 17,
    "inf at 2**19 + 17": (1 << 19) + 17,
}


@UNSCALE
@pytest.mark.parametrize("where", list(LARGE_BAD_AT))
def test_unscale_large_tensor(backend, where):
    """A 2**20-element gradient (next to a small one): blocked or parallel passes must see every element."""
    rng = np.random.default_rng(5)
    big = (rng.standard_normal(LARGE) * 100).astype(np.float32)
    at = LARGE_BAD_AT[where]
    if at is not None:
        big[at] = np.inf if where.startswith("inf") else np.nan
    host = [big, np.ones((3,), np.float32)]
    result = unscale(backend, put_all(backend, host, dt.float32))
    assert result.flag == (0.0 if at is None else 1.0), f"{where}: found_inf is {result.flag}"
    assert_all_unscaled(result, host, f"2**20-element gradient, {where}")


ROWS, COLS = 6, 10
# name -> (slice index or None, transpose after slicing, base positions outside the view)
VIEWS: dict[str, tuple[tuple | None, bool, tuple]] = {
    "transposed": (None, True, ()),
    "every other row": ((slice(0, None, 2),), False, (slice(1, None, 2),)),
    "reversed odd rows": ((slice(None, None, -2),), False, (slice(0, None, 2),)),
    "column block": ((slice(None), slice(2, 7)), False, (slice(None), np.r_[0, 1, 7, 8, 9])),
    "transposed column block": ((slice(1, 5), slice(3, 9, 2)), True, (slice(None), np.r_[0, 1, 2, 4, 6, 8, 9])),
}


def _view(backend: Any, base: Any, index: tuple | None, transpose: bool) -> Any:
    k = backend.kernels
    v = base if index is None else k.slice(base, index)
    return k.transpose(v, (1, 0)) if transpose else v


def _host_view(base: np.ndarray, index: tuple | None, transpose: bool) -> np.ndarray:
    v = base if index is None else base[index]
    return np.ascontiguousarray(v.T if transpose else v)


@UNSCALE
@pytest.mark.parametrize("bad", ["clean", "NaN inside"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_unscale_views(backend, view, bad):
    """Gradients that are views made by the backend's own slice/transpose kernels: the kernel reads exactly
    the view's elements (inf in the base outside the view must not set the flag)."""
    index, transpose, outside = VIEWS[view]
    base = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) * np.float32(1.37) - 11
    if outside:
        base[outside] = np.inf
    if bad == "NaN inside":
        inside = np.zeros(base.shape, dtype=bool)
        inside[index if index is not None else ...] = True
        base[tuple(np.argwhere(inside)[-1])] = np.nan
    expected_view = _host_view(base, index, transpose)
    dev_view = _view(backend, backend.put(base, "float32"), index, transpose)
    assert backend.get(dev_view).tobytes() == expected_view.tobytes(), (
        f"{view}: the slice/transpose kernels gave other elements than NumPy's indexing"
    )
    other = random_grads(dt.float32, shapes=((4,), (2, 3)))
    result = unscale(backend, [dev_view] + put_all(backend, other, dt.float32))
    want = 1.0 if bad == "NaN inside" else 0.0
    assert result.flag == want, f"{view} ({bad}): found_inf is {result.flag}, expected {want}"
    assert_all_unscaled(result, [expected_view] + other, f"{view} view ({bad})")


# --------------------------------------------------------------------------- update_scale
def scale_rule(
    scale: np.float32, tracker: int, found_inf: float, growth_factor: float, backoff_factor: float, growth_interval: int
) -> tuple[np.float32, int]:
    """torch's rule (``_amp_update_scale_``): back off on inf; grow after ``growth_interval`` clean steps in a
    row, unless the grown scale is not finite in float32 (then keep it); either way reset the tracker.  The
    products are float32 scale * float64 factor rounded once to float32, as torch's ``float * double``."""
    with np.errstate(over="ignore"):
        if found_inf != 0.0:
            return np.float32(np.float64(scale) * backoff_factor), 0
        tracker += 1
        if tracker < growth_interval:
            return scale, tracker
        grown = np.float32(np.float64(scale) * growth_factor)
        return (grown if np.isfinite(grown) else scale), 0


@dataclass(frozen=True)
class RuleSetting:
    """A scale-rule configuration and a random finite/inf sequence for it: an inf step follows a clean one with
    probability ``p_inf`` and another inf one with ``p_stay`` (bursts); inf steps pass 1.0 or 2.0 (GradScaler
    passes the sum of its optimizers' flags)."""

    growth_factor: float
    backoff_factor: float
    growth_interval: int
    init_scale: float
    p_inf: float
    p_stay: float
    steps: int = 2000
    seed: int = 0

    def found_infs(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        out, bad = np.zeros(self.steps, np.float32), False
        for i, u in enumerate(rng.random(self.steps)):
            bad = u < (self.p_stay if bad else self.p_inf)
            out[i] = rng.choice([1.0, 2.0]) if bad else 0.0
        return out


# Factors are float32 numbers, so the float32 model is also torch's float64 product rounded once to float32.
# The sequences keep the scale a normal float32 (a device may flush subnormal scales to zero; not checked).
RULE_SETTINGS = {
    "torch defaults, 2000 clean steps": RuleSetting(2.0, 0.5, 2000, 65536.0, 0.0, 0.0),
    "torch factors, interval 50, rare inf": RuleSetting(2.0, 0.5, 50, 65536.0, 0.01, 0.3, seed=1),
    "interval 1, saturating at float32 max": RuleSetting(2.0, 0.5, 1, 1.0, 0.4, 0.4, seed=2),
    "factors 1.5 and 0.75 (rounded products)": RuleSetting(1.5, 0.75, 7, 1000.0, 0.07, 0.5, seed=3),
    "factors 4 and 0.25, frequent inf": RuleSetting(4.0, 0.25, 2, 2.0**20, 0.2, 0.4, seed=4),
    "growth overflowing from 2**126": RuleSetting(2.0, 0.5, 5, 2.0**126, 0.02, 0.2, seed=5),
    "factor 1.25 near float32 max": RuleSetting(1.25, 0.5, 2, 1.5 * 2.0**127, 0.05, 0.2, seed=6),
    "long inf bursts": RuleSetting(2.0, 0.5, 8, 2.0**24, 0.015, 0.9, seed=7),
    # Not float32 numbers: the product must be rounded once (torch), not after rounding the factor to float32.
    "factors 1.1 and 0.3 (one rounding)": RuleSetting(1.1, 0.3, 3, 3.0, 0.03, 0.3, seed=8),
}


@UPDATE
@pytest.mark.parametrize("setting", list(RULE_SETTINGS))
def test_update_scale_follows_the_rule(backend, setting):
    backend.require_storage("int32")  # the growth tracker
    s = RULE_SETTINGS[setting]
    info = backend.backend
    scale = backend.put(np.array([s.init_scale]), "float32")
    tracker = backend.put(np.array([0]), "int32")
    model_scale, model_tracker = np.float32(s.init_scale), 0
    flags = s.found_infs()
    for step, f in enumerate(flags, 1):
        before = (model_scale, model_tracker)
        scale, tracker = backend.kernels.update_scale(
            scale, tracker, backend.put(np.array([f]), "float32"), s.growth_factor, s.backoff_factor, s.growth_interval
        )
        if step == 1:
            assert info.dtype_of(scale) is dt.float32 and info.dtype_of(tracker) is dt.int32, (
                f"update_scale returned {info.dtype_of(scale).name} / {info.dtype_of(tracker).name}; "
                "expected the float32 scale and int32 tracker it was given"
            )
        model_scale, model_tracker = scale_rule(
            model_scale, model_tracker, float(f), s.growth_factor, s.backoff_factor, s.growth_interval
        )
        assert model_scale >= TINY, f"setting error: {setting} drives the scale subnormal at step {step}"
        assert info.shape_of(scale) == (1,) and info.shape_of(tracker) == (1,), (
            f"scale and tracker came back with shapes {info.shape_of(scale)}, {info.shape_of(tracker)}; expected (1,)"
        )
        got_scale, got_tracker = backend.get(scale), backend.get(tracker)
        if got_scale[0].tobytes() != model_scale.tobytes() or int(got_tracker[0]) != model_tracker:
            recent = "".join("x" if v else "." for v in flags[max(0, step - 30) : step])
            pytest.fail(
                f"{setting}: step {step} (found_inf={f}) from scale {before[0]!r}, tracker {before[1]} gave "
                f"scale {got_scale[0]!r}, tracker {int(got_tracker[0])}; the rule gives scale {model_scale!r}, "
                f"tracker {model_tracker} (growth_factor={s.growth_factor}, backoff_factor={s.backoff_factor}, "
                f"growth_interval={s.growth_interval}; last steps, x = inf: {recent})"
            )
