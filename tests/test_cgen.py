"""ampcore.cgen: one kernel text rendered for OpenCL C and CUDA C, built and run in each dialect.

The same probe kernels are rendered for both dialects; the CUDA text runs through
the CUDA simulator's g++ build (skips without g++), the OpenCL text through
pyopencl on the first usable device (skips, saying why, where none builds
kernels).  Each result is compared with NumPy/ml_dtypes bit for bit, so the two
dialects also agree with each other.  The launch arithmetic is plain Python.
"""

from __future__ import annotations

import math
import re
import shutil

import ml_dtypes
import numpy as np
import pytest

from ampcore import cgen

F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)


# --------------------------------------------------------------------------- rendering, no compiler
@pytest.mark.parametrize(
    "d, own, foreign",
    [
        (cgen.OPENCL, {"as_uint", "as_float", "convert_float_rtz"}, {"__float_as_uint", "__fadd_rn", "isnan"}),
        (
            cgen.CUDA,
            {"__float_as_uint", "__uint_as_float", "__double2float_rz", "__fadd_rn"},
            {"as_uint", "as_float", "convert_float_rtz", "isnan"},
        ),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
def test_each_dialect_renders_every_helper_in_its_own_spelling(d, own, foreign):
    text = cgen.conversions(d)
    calls = set(re.findall(r"\b(\w+)\(", text))
    assert {
        "half_to_float",
        "float_to_half",
        "bf16_to_float",
        "float_to_bf16",
        "double_to_float_odd",
        "double_to_bf16",
    } <= calls
    assert own <= calls and not foreign & calls
    assert text.count("{") == text.count("}")


def test_without_double_the_prelude_has_no_double():
    assert "double" not in cgen.conversions(cgen.OPENCL, double=False)


def test_load_and_store_spell_each_dtype_and_round_a_double_once():
    assert cgen.load("bf16", "x", "i") == "bf16_to_float(x[i])"
    assert cgen.store("f16", "ushort", "y", "i", "v", "double") == "y[i] = float_to_half(double_to_float_odd(v));"
    assert cgen.store("bf16", "ushort", "y", "i", "v", "double") == "y[i] = double_to_bf16(v);"
    assert cgen.store("b8", "uchar", "y", "i", "v") == "y[i] = (uchar)((v) != 0);"
    assert cgen.store("i64", "long", "y", "i", "v") == "y[i] = (long)(v);"


@pytest.mark.parametrize("d", [cgen.OPENCL, cgen.CUDA], ids=lambda d: d.name)
def test_element_and_compute_types_follow_the_dialect(d):
    assert [cgen.element_type(d, cgen.TAGS[n]) for n in ("float16", "bfloat16", "int64", "bool")] == [
        d.u16,
        d.u16,
        d.i64,
        d.bool_storage,
    ]
    assert [cgen.compute_type(d, t) for t in ("f16", "bf16", "b8", "f64")] == ["float", "float", "int", "double"]


def test_an_unknown_tag_is_refused_by_name():
    with pytest.raises(ValueError, match="'f8'"):
        cgen.element_type(cgen.CUDA, "f8")
    with pytest.raises(ValueError, match="'i32'"):
        cgen.nonfinite(cgen.CUDA, "i32")


def test_adamw_scalars_are_the_documented_formulas():
    mode, values = cgen.adamw_scalars(3, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.01, decoupled=True)
    assert mode == cgen.ADAMW_DECOUPLED and len(values) == len(cgen.ADAMW_SCALARS)
    named = dict(zip(cgen.ADAMW_SCALARS, values, strict=True))
    assert named["decay"] == 1.0 - 0.1 * 0.01 and named["step_size"] == 0.1 / (1.0 - 0.9**3)
    assert named["bc2_sqrt"] == math.sqrt(1.0 - 0.99**3)
    assert cgen.adamw_scalars(1, 0.1, 0.9, 0.99, 1e-8, 0.01, False)[0] == cgen.ADAMW_L2
    assert cgen.adamw_scalars(1, 0.1, 0.9, 0.99, 1e-8, 0.0, True)[0] == cgen.ADAMW_NO_DECAY


# --------------------------------------------------------------------------- launch arithmetic
def test_tile_starts_cover_every_tensor_in_whole_tiles():
    assert cgen.tile_starts([1, 1024, 1025, 0, 5], 1024) == ([0, 1, 2, 4, 4], 5)
    assert cgen.tile_starts([], 256) == ([], 0)
    assert cgen.ceil_div(0, 7) == 0 and cgen.ceil_div(7, 7) == 1 and cgen.ceil_div(8, 7) == 2


@pytest.mark.parametrize(
    "shape, axis, expected",
    [
        ((2, 3, 4), 1, (8, 3, 4)),
        ((2, 3, 4), -1, (6, 4, 1)),
        ((2, 3, 4), -3, (12, 2, 12)),
        ((5, 0), 1, (0, 0, 1)),
    ],
)
def test_row_geometry_counts_rows_and_their_stride_for_any_axis(shape, axis, expected):
    assert cgen.row_geometry(shape, axis) == expected


def test_fit_group_size_halves_to_the_row_but_not_below_the_floor():
    assert [cgen.fit_group_size(n, 256) for n in (1, 2, 3, 64, 65, 1000)] == [1, 2, 4, 64, 128, 256]
    assert [cgen.fit_group_size(n, 256, 32) for n in (1, 33, 300)] == [32, 64, 256]


# --------------------------------------------------------------------------- one probe, both dialects
def _probe(d: cgen.Dialect) -> str:
    """Conversions of x (float) and xd (double) to 16 bits and back, and an f16 unscale with its overflow flag."""
    g, u16, i64 = d.global_, d.u16, d.i64
    return (
        cgen.conversions(d)
        + cgen.nan_max(d, "float")
        + f"""
{d.kernel} convert({g}const float *x, {g}const double *xd, {g}{u16} *h, {g}{u16} *b, {g}float *hx,
                   {g}float *bx, {g}{u16} *hd, {g}{u16} *bd, {g}float *mx, {i64} n) {{
    const {i64} i = {d.global_id};
    if (i >= n) return;
    {cgen.store("f16", u16, "h", "i", "x[i]")}
    {cgen.store("bf16", u16, "b", "i", "x[i]")}
    hx[i] = {cgen.load("f16", "h", "i")};
    bx[i] = {cgen.load("bf16", "b", "i")};
    {cgen.store("f16", u16, "hd", "i", "xd[i]", "double")}
    {cgen.store("bf16", u16, "bd", "i", "xd[i]", "double")}
    mx[i] = nan_max(x[i], hx[i]);
}}
{d.kernel} unscale({g}{u16} *gr, {g}const float *inv_scale, {g}int *bad_out, {i64} n) {{
    const {i64} i = {d.global_id};
    if (i >= n) return;
    const float inv = inv_scale[0];
    int bad = 0;
{cgen.unscale_element(d, "f16", u16, "gr", "i", "    ")}    bad_out[i] = bad;
}}
"""
    )


@np.errstate(over="ignore")  # overflow to inf is what the conversions are checked on
def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    specials = np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            65504.0,
            65520.0,
            65519.996,
            6e-8,
            3e-8,
            1e-40,
            3.39e38,
            -3.4e38,
            1.0 + 2.0**-11,
            1.0 + 3 * 2.0**-11,
        ],
        np.float64,
    )
    xd = np.concatenate([specials, rng.standard_normal(2000) * np.exp2(rng.integers(-30, 20, 2000))])
    grads = np.concatenate([np.array([1.0, 60000.0, 70000.0, np.inf, np.nan, -5.0]), rng.standard_normal(100)]).astype(
        F16
    )
    return {"x": xd.astype(np.float32), "xd": xd, "g": grads.view(np.uint16)}


@np.errstate(over="ignore")
def _check(outputs: dict[str, np.ndarray], inputs: dict[str, np.ndarray]) -> None:
    x, xd = inputs["x"], inputs["xd"]
    np.testing.assert_array_equal(outputs["h"], x.astype(F16).view(np.uint16))
    want_b = x.astype(BF16)
    same_b = outputs["b"] == want_b.view(np.uint16)
    assert (same_b | np.isnan(x)).all() and np.isnan(outputs["b"].view(BF16)[np.isnan(x)]).all()
    np.testing.assert_array_equal(outputs["hx"], x.astype(F16).astype(np.float32))
    np.testing.assert_array_equal(outputs["bx"], outputs["b"].view(BF16).astype(np.float32))
    np.testing.assert_array_equal(outputs["hd"], xd.astype(F16).view(np.uint16))  # NumPy rounds double once
    finite = ~np.isnan(xd)
    np.testing.assert_array_equal(outputs["bd"][finite], xd[finite].astype(BF16).view(np.uint16))
    np.testing.assert_array_equal(outputs["mx"], np.maximum(x, outputs["hx"]))
    grads = inputs["g"].view(F16).astype(np.float32) * np.float32(0.5)
    np.testing.assert_array_equal(outputs["gr"].view(F16), grads.astype(F16))
    np.testing.assert_array_equal(outputs["bad"] != 0, ~np.isfinite(grads.astype(F16)))


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")


@needs_gxx
def test_cuda_rendering_builds_and_runs_bit_exact_on_the_simulator(monkeypatch):
    from ampcore_cuda.launch import raw_kernel
    from ampcore_cuda.runtime import import_cupy

    monkeypatch.setenv("AMPCORE_CUDA_SIMULATOR", "h100")  # built as the backend builds kernels: NVRTC, no flush
    cp = import_cupy()
    inputs = _inputs()
    n, ng = inputs["x"].size, inputs["g"].size
    out = {k: cp.zeros(n, np.uint16) for k in ("h", "b", "hd", "bd")}
    out |= {k: cp.zeros(n, np.float32) for k in ("hx", "bx", "mx")}
    raw_kernel(("cgen-probe", "convert"), lambda: _probe(cgen.CUDA), "convert")(
        (cgen.ceil_div(n, 256),),
        (256,),
        (
            cp.asarray(inputs["x"]),
            cp.asarray(inputs["xd"]),
            out["h"],
            out["b"],
            out["hx"],
            out["bx"],
            out["hd"],
            out["bd"],
            out["mx"],
            np.int64(n),
        ),
    )
    gr, bad = cp.asarray(inputs["g"].copy()), cp.zeros(ng, np.int32)
    raw_kernel(("cgen-probe", "unscale"), lambda: _probe(cgen.CUDA), "unscale")(
        (cgen.ceil_div(ng, 256),), (256,), (gr, cp.asarray(np.array([0.5], np.float32)), bad, np.int64(ng))
    )
    _check({k: v.get() for k, v in (out | {"gr": gr, "bad": bad}).items()}, inputs)


def _opencl_state():
    try:
        from ampcore_opencl.plugin import OpenCLBackend

        backend = OpenCLBackend()
        count = backend.device_count() if backend.availability().ok else 0
    except Exception as err:  # noqa: BLE001 - no pyopencl or no platform: skip with the reason
        pytest.skip(f"no OpenCL device: {err}")
    reasons = []
    for i in range(count):
        status = backend.device_status(i)
        if status.ok:
            return backend._state(i)
        reasons.append(f"opencl:{i}: {status.reason}")
    pytest.skip("no OpenCL device builds kernels here: " + ("; ".join(reasons) or backend.availability().reason))


def test_opencl_rendering_builds_and_runs_bit_exact_on_a_device():
    import pyopencl as cl

    state = _opencl_state()
    if not state.fp64:
        pytest.skip(f"{state!r} has no cl_khr_fp64; the probe converts doubles")
    inputs = _inputs()
    n, ng = inputs["x"].size, inputs["g"].size
    program = cl.Program(state.context, _probe(cgen.OPENCL)).build()
    mf = cl.mem_flags
    host = {k: np.zeros(n, np.uint16) for k in ("h", "b", "hd", "bd")}
    host |= {k: np.zeros(n, np.float32) for k in ("hx", "bx", "mx")}
    host |= {"gr": inputs["g"].copy(), "bad": np.zeros(ng, np.int32)}
    bufs = {k: cl.Buffer(state.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=v) for k, v in host.items()}
    x, xd, inv = (
        cl.Buffer(state.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=v)
        for v in (inputs["x"], inputs["xd"], np.array([0.5], np.float32))
    )
    program.convert(
        state.queue, (n,), None, x, xd, *(bufs[k] for k in ("h", "b", "hx", "bx", "hd", "bd", "mx")), np.int64(n)
    )
    program.unscale(state.queue, (ng,), None, bufs["gr"], inv, bufs["bad"], np.int64(ng))
    for k, v in host.items():
        cl.enqueue_copy(state.queue, v, bufs[k])
    state.queue.finish()
    _check(host, inputs)


@needs_gxx
def test_update_scale_and_adamw_render_into_kernels_the_simulator_builds():
    from ampcore_cuda.sim.build import build

    d = cgen.CUDA
    adamw = (
        cgen.conversions(d)
        + f"""
{d.kernel} adamw(unsigned short *p, const float *g, float *m, float *v, int mode, float weight_decay, float decay,
                 float one_minus_beta1, float beta2, float one_minus_beta2, float bc2_sqrt, float eps,
                 float step_size, long long n) {{
    const long long i = {d.global_id};
    if (i >= n) return;
{cgen.adamw_element(d, "f16", "unsigned short", "f32", ("p", "g", "m", "v"), "i", "    ")}}}
"""
    )
    assert build(adamw, "adamw").exists()
    update = cgen.update_scale_kernel(d, "double growth, double backoff", "(double)s * growth", "(double)s * backoff")
    assert build(update, "update_scale").exists()
