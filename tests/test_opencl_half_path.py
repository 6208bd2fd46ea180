"""The opencl backend's float16 conversion paths (codegen.HALF_CONVERSIONS, probe.choose_half_convert): each
path bit-exact on every device that can build it (every float16 pattern widened, every tie and its float32
neighbours narrowed, double -> float16 rounded once), the probe's rules for picking one, the choice reported
by the capabilities, and AMPCORE_OPENCL_HALF_CONVERT forcing each path through the real kernels."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyopencl")

from opencl_devices import index, state

from ampcore_opencl import codegen, probe
from ampcore_opencl.plugin import OpenCLBackend

pytestmark = pytest.mark.usefixtures("opencl_device")  # every test on every OpenCL device

PATHS = tuple(codegen.HALF_CONVERSIONS)
_KERNELS = """
__kernel void widen(__global const ushort *h, __global float *f) {
    size_t i = get_global_id(0);
    f[i] = half_to_float(h[i]);
}
__kernel void narrow(__global const float *x, __global ushort *y) {
    size_t i = get_global_id(0);
    y[i] = float_to_half(x[i]);
}
"""
_DOUBLE_KERNEL = """
__kernel void narrow_double(__global const double *x, __global ushort *y) {
    size_t i = get_global_id(0);
    y[i] = float_to_half(double_to_float_odd(x[i]));
}
"""


# --------------------------------------------------------------------------- helpers
def run_path(path: str, kernel: str, values: np.ndarray, out_dtype: Any) -> np.ndarray:
    """``kernel`` of the prelude built for ``path`` on this test's device, over ``values``."""
    import pyopencl as cl

    s = state()
    if path == "half" and "cl_khr_fp16" not in s.extensions:
        pytest.skip(f"{s.device.name.strip()!r} lacks cl_khr_fp16: no half conversion path")
    if kernel == "narrow_double" and not s.fp64:
        pytest.skip(f"{s.device.name.strip()!r} lacks cl_khr_fp64")
    chosen = f"-D{codegen.HALF_TYPE_DEFINE}"
    options = [o for o in s.build_options if o != chosen] + list(probe.HalfConvert(path, "").build_options)
    source = codegen.prelude(s.fp64) + _KERNELS + (_DOUBLE_KERNEL if s.fp64 else "")
    with probe.quiet_compiler():
        program = cl.Program(s.context, source).build(options=options)
    flags = cl.mem_flags
    src = cl.Buffer(s.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(values))
    out = np.empty(values.size, dtype=out_dtype)
    dst = cl.Buffer(s.context, flags.WRITE_ONLY, out.nbytes)
    getattr(program, kernel)(s.queue, (values.size,), None, src, dst)
    cl.enqueue_copy(s.queue, out, dst, is_blocking=True)
    return out


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bit for bit; a NaN only needs to stay NaN with its sign (a signalling payload may be quieted)."""
    bits = f"u{want.dtype.itemsize}"
    got = got.view(want.dtype)
    nan_ok = np.isnan(got) & np.isnan(want) & (np.signbit(got) == np.signbit(want))
    wrong = np.flatnonzero((got.view(bits) != want.view(bits)) & ~nan_ok)
    if wrong.size:
        k = wrong[0]
        pytest.fail(
            f"{what}: {wrong.size} wrong, e.g. input #{k}: got {got[k]!r} ({got.view(bits)[k]:#x}), "
            f"want {want[k]!r} ({want.view(bits)[k]:#x})"
        )


def ties_and_neighbours() -> np.ndarray:
    """Every float16 value, the tie halfway to the next magnitude, and the float32 numbers either side of
    the tie (the ties decide round-to-nearest-even; 65520, the tie above 65504, must give inf)."""
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    h = h[np.isfinite(h)]
    base = h.astype(np.float64)
    _, exponent = np.frexp(base)
    gap = np.maximum(np.ldexp(1.0, exponent - 11), 2.0**-24)
    tie = (base + np.where(np.signbit(h), -gap, gap) / 2).astype(np.float32)  # exact in float32
    return np.concatenate(
        [
            base.astype(np.float32),
            tie,
            np.nextafter(tie, np.float32(0)),
            np.nextafter(tie, np.copysign(np.float32(np.inf), tie)),
        ]
    )


def random_float32(count: int, seed: int) -> np.ndarray:
    """Random float32 bit patterns: half of them any pattern (NaN payloads, inf, float32 subnormals), half
    with exponents around float16's range (its subnormals to past its overflow)."""
    rng = np.random.default_rng(seed)
    anything = rng.integers(0, 1 << 32, count // 2, dtype=np.uint64).astype(np.uint32)
    near = rng.integers(0, 1 << 23, count - count // 2, dtype=np.uint32)
    near |= rng.integers(100, 146, near.size).astype(np.uint32) << 23
    near |= rng.integers(0, 2, near.size).astype(np.uint32) << 31
    return np.concatenate([anything, near]).view(np.float32)


# --------------------------------------------------------------------------- both paths, bit-exact
@pytest.mark.parametrize("path", PATHS)
def test_every_float16_pattern_widens_exactly(path):
    h = np.arange(1 << 16, dtype=np.uint16)
    got = run_path(path, "widen", h, np.float32)
    assert_same(got, h.view(np.float16).astype(np.float32), f"{path} half_to_float")


@pytest.mark.parametrize("path", PATHS)
def test_ties_and_their_neighbours_narrow_to_nearest_even(path):
    x = ties_and_neighbours()
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert_same(run_path(path, "narrow", x, np.uint16), want, f"{path} float_to_half at ties")


@pytest.mark.parametrize("path", PATHS)
def test_random_float32_patterns_narrow_like_numpy(path):
    x = np.concatenate(
        [
            random_float32(1 << 20, seed=7),
            probe.convert_operands()[1],
            np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45], np.float32),
        ]
    )
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16)
    assert_same(run_path(path, "narrow", x, np.uint16), want, f"{path} float_to_half")


@pytest.mark.parametrize("path", PATHS)
def test_double_narrows_to_float16_with_one_rounding(path):
    """Just above or below a float16 tie by less than float32 can hold: rounding to float32 first would land
    on the tie and then round to even, the wrong way half the time."""
    x = ties_and_neighbours()[: (1 << 16) * 2].astype(np.float64)
    ulp = np.abs(x) * 2.0**-40 + 2.0**-1070
    d = np.concatenate([x, x + ulp, x - ulp, np.array([np.inf, -np.inf, np.nan, -0.0, 1e300, -1e-300])])
    with np.errstate(over="ignore", invalid="ignore"):
        want = d.astype(np.float16)
    assert_same(run_path(path, "narrow_double", d, np.uint16), want, f"{path} double -> float16")


# --------------------------------------------------------------------------- the choice
def test_the_chosen_path_is_reported_and_selects_the_build():
    s = state()
    chosen = s.half_convert
    assert chosen.path in PATHS
    assert OpenCLBackend().capabilities(index()).extra["float16_path"] == chosen.summary
    assert chosen.summary.startswith(chosen.label)
    assert (f"-D{codegen.HALF_TYPE_DEFINE}" in s.build_options) == (chosen.path == "half")
    if "cl_khr_fp16" not in s.extensions:
        assert chosen.path == "integer" and chosen.detail == "no cl_khr_fp16"


def test_the_probe_checks_both_paths_on_this_device():
    s = state()
    if "cl_khr_fp16" not in s.extensions:
        pytest.skip(f"{s.device.name.strip()!r} lacks cl_khr_fp16: the integer path is taken unmeasured")
    times, wrong = probe._measure_convert(s)
    assert wrong == {"integer": 0, "half": 0}
    assert all(0 < t < float("inf") for t in times.values()), times


def _fake(extensions: set[str]) -> Any:
    return SimpleNamespace(extensions=frozenset(extensions), device=SimpleNamespace(name="fake device"))


@pytest.mark.parametrize(
    "times, wrong, path",
    [
        ({"integer": 1.0, "half": 0.5}, {"integer": 0, "half": 0}, "half"),
        ({"integer": 1.0, "half": 0.95}, {"integer": 0, "half": 0}, "integer"),  # within the margin
        ({"integer": 1.0, "half": 2.0}, {"integer": 0, "half": 0}, "integer"),
        ({"integer": 1.0, "half": 0.1}, {"integer": 0, "half": 3}, "integer"),  # fast but wrong
        ({"integer": float("inf"), "half": float("inf")}, {"integer": 0, "half": 0}, "integer"),  # not timed
    ],
    ids=["half-faster", "within-margin", "integer-faster", "half-wrong", "too-slow-to-time"],
)
def test_the_faster_exact_path_is_chosen(monkeypatch, times, wrong, path):
    monkeypatch.delenv(probe.CONVERT_ENV, raising=False)
    monkeypatch.setattr(probe, "_measure_convert", lambda state: (times, wrong))
    chosen = probe.choose_half_convert(_fake({"cl_khr_fp16"}))
    assert chosen.path == path, chosen
    assert chosen.summary


def test_without_fp16_the_integer_path_is_taken_unmeasured(monkeypatch):
    monkeypatch.delenv(probe.CONVERT_ENV, raising=False)
    monkeypatch.setattr(probe, "_measure_convert", lambda state: pytest.fail("measured without cl_khr_fp16"))
    assert probe.choose_half_convert(_fake(set())) == probe.HalfConvert("integer", "no cl_khr_fp16")


def test_a_probe_that_fails_to_build_leaves_the_integer_path(monkeypatch):
    def broken(state: Any) -> Any:
        raise RuntimeError("clBuildProgram failed: error: unknown type name 'half'")

    monkeypatch.delenv(probe.CONVERT_ENV, raising=False)
    monkeypatch.setattr(probe, "_measure_convert", broken)
    chosen = probe.choose_half_convert(_fake({"cl_khr_fp16"}))
    assert chosen.path == "integer" and "unknown type name 'half'" in chosen.detail


def test_the_probe_check_catches_a_wrong_rounding():
    h, x = probe.convert_operands()
    f = h.view(np.float16).astype(np.float32)
    with np.errstate(over="ignore"):
        y = x.astype(np.float16).view(np.uint16)
    assert probe.convert_mismatches(h, f, x, y) == 0
    ties = np.flatnonzero((np.arange(x.size) % 8 == 1) & np.isfinite(x))
    wrong = y.copy()
    wrong[ties] ^= 1  # round the ties the other way
    assert probe.convert_mismatches(h, f, x, wrong) == ties.size
    nan_sign = f.copy()
    nan_sign[0x7E00] = -nan_sign[0x7E00]  # a NaN that lost its sign
    assert probe.convert_mismatches(h, nan_sign, x, y) == 1


# --------------------------------------------------------------------------- forcing a path
_FORCED = """
import json, sys
import numpy as np
import ampcore
from ampcore_opencl import devices
from ampcore_opencl.plugin import OpenCLBackend

i = int(sys.argv[1])
status = devices.device_status(i)
if not status.ok:
    print(json.dumps({"unusable": status.reason}))
    sys.exit(0)
backend = OpenCLBackend()
cast = backend.kernel_functions()["cast"]
h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
x = np.random.default_rng(1).standard_normal(1 << 16).astype(np.float32) * 1000
with np.errstate(over="ignore"):
    wide = backend.to_numpy(cast(backend.from_numpy(h, ampcore.float16, i), ampcore.float32))
    narrow = backend.to_numpy(cast(backend.from_numpy(x, ampcore.float32, i), ampcore.float16))
    widen_ok = bool(((wide.view(np.uint32) == h.astype(np.float32).view(np.uint32)) | np.isnan(h)).all())
    narrow_ok = bool((narrow.view(np.uint16) == x.astype(np.float16).view(np.uint16)).all())
print(json.dumps({"extra": backend.capabilities(i).extra["float16_path"],
                  "path": devices.device_state(i).half_convert.path, "widen_ok": widen_ok, "narrow_ok": narrow_ok}))
"""


def forced(run_python: Any, value: str) -> dict[str, Any]:
    proc = run_python("", env={probe.CONVERT_ENV: value}, args=("-c", _FORCED, str(index())))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path", PATHS)
def test_the_environment_forces_each_path_through_the_real_kernels(run_python, path):
    result = forced(run_python, path)
    if path == "half" and "cl_khr_fp16" not in state().extensions:
        assert "needs cl_khr_fp16" in result["unusable"], result
        return
    assert result["path"] == path
    assert result["extra"].endswith(f"(forced by {probe.CONVERT_ENV}={path})")
    assert result["widen_ok"] and result["narrow_ok"], result


def test_an_unknown_forced_path_makes_the_device_unusable_with_the_choices(run_python):
    result = forced(run_python, "vload_half")
    assert "'vload_half' is not a float16 conversion path" in result["unusable"]
    assert "'integer', 'half'" in result["unusable"]
