"""Float8 formats and kernels on the cpu backend and through the core's reference compositions.

Every conversion is checked bit for bit against ml_dtypes: all 65,536 float16 and all 65,536 bfloat16 values,
and a structured float32 sample (subnormals, ties, +-max, overflow, NaN, inf), both saturate modes.
"""

from __future__ import annotations

import importlib.util

import ml_dtypes
import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore.conformance.float8_data import (
    FLOAT8_TARGETS,
    all_bfloat16,
    all_float16,
    expected_quantize,
    float32_sample,
    same_bits,
)
from ampcore.conformance.tolerance import assert_accumulated
from ampcore.ops.float8 import quantize_float8, quantize_float8_reference, scaled_mm, scaled_mm_reference

E4M3, E5M2, E8M0 = dt.float8_e4m3fn, dt.float8_e5m2, dt.float8_e8m0fnu


def _t(values, dtype=dt.float32):
    return ampcore.tensor(np.asarray(values), dtype=dtype, device="cpu")


def _one():
    return _t(np.float32(1.0))


# --------------------------------------------------------------------------- formats
def test_finfo_of_the_float8_formats():
    assert dt.finfo(E4M3).max == 448.0 and dt.finfo(E4M3).eps == 2**-3
    assert dt.finfo(E5M2).max == 57344.0 and dt.finfo(E5M2).eps == 2**-2
    assert dt.finfo(E8M0).max == 2.0**127
    assert ampcore.finfo("float8_e4m3fn").smallest_subnormal == 2**-9


def test_float8_dtypes_parse_by_name_and_numpy_dtype_and_are_one_byte():
    assert dt.as_dtype("e4m3") is E4M3 and dt.as_dtype("float8_e5m2") is E5M2
    assert dt.as_dtype(np.dtype(ml_dtypes.float8_e8m0fnu)) is E8M0
    assert all(d.itemsize == 1 for d in dt.FLOAT8_DTYPES)
    assert not set(dt.FLOAT8_DTYPES) & set(dt.ALL_DTYPES)


def test_float8_does_not_promote_with_other_dtypes():
    with pytest.raises(TypeError, match="cast them explicitly"):
        dt.promote_types(E4M3, dt.float32)
    assert dt.promote_types(E5M2, E5M2) is E5M2


def test_convert_from_float64_to_float8_rounds_once():
    # Through float32 rounded to nearest, 1 + 2**-4 + 2**-40 becomes a tie and rounds down to 1.0.
    got = dt.convert(np.array([1 + 2**-4 + 2**-40, 1 + 2**-4]), E4M3).astype(np.float64)
    assert got.tolist() == [1.125, 1.0]


def test_cpu_capabilities_say_float8_is_emulated_and_store_it():
    caps = ampcore.get_backend("cpu").capabilities()
    assert caps.float8 == "emulated" and set(dt.FLOAT8_DTYPES) <= caps.storable
    assert caps.as_dict()["float8"] == "emulated"


def test_capabilities_refuse_an_unknown_float8_support():
    with pytest.raises(ValueError, match="'sometimes'"):
        ampcore.Capabilities("x", frozenset({dt.float32}), frozenset({dt.float32}), float8="sometimes")


def test_a_backend_without_float8_refuses_float8_tensors_with_the_reason(register_fake):
    fake = register_fake()
    x = ampcore.ones(2, device=fake.name)
    with pytest.raises(TypeError, match="cannot store float8_e4m3fn tensors: .*Capabilities.float8"):
        x.to(E4M3)
    with pytest.raises(TypeError, match="cannot store float8_e5m2"):
        quantize_float8(x, ampcore.ones((), device=fake.name), E5M2, True)


# --------------------------------------------------------------------------- conversion, bit for bit
def _quantize_bits(values: np.ndarray, dtype: dt.DType, saturate: bool, kernel: bool) -> np.ndarray:
    source = dt.as_dtype(values.dtype)
    x = ampcore.from_numpy(values).to("cpu") if source is not dt.float32 else _t(values)
    assert x.dtype is source
    if kernel:
        q, _ = quantize_float8(x, _one(), dtype, saturate)
    else:
        backend = ampcore.get_backend("cpu")
        q_array, _ = quantize_float8_reference(backend.kernels, x._data, _one()._data, dtype, saturate)
        q = ampcore.from_numpy(q_array)
    assert q.dtype is dtype
    return q.numpy()


@pytest.mark.parametrize("kernel", [True, False], ids=["cpu-kernel", "reference-composition"])
@pytest.mark.parametrize("saturate", [True, False], ids=["saturate", "overflow"])
@pytest.mark.parametrize("dtype", FLOAT8_TARGETS, ids=lambda d: d.name)
@pytest.mark.parametrize("source", ["float16", "bfloat16", "float32"])
def test_quantize_is_bit_exact_against_ml_dtypes(source, dtype, saturate, kernel):
    values = {"float16": all_float16, "bfloat16": all_bfloat16, "float32": float32_sample}[source]()
    got = _quantize_bits(values, dtype, saturate, kernel)
    want = expected_quantize(values, np.float32(1.0), dtype, saturate)
    same_bits(got, want, f"quantize_float8 {source} -> {dtype.name} saturate={saturate}")


@pytest.mark.parametrize("dtype", FLOAT8_TARGETS, ids=lambda d: d.name)
@pytest.mark.parametrize("source", [dt.float16, dt.bfloat16, dt.float32], ids=lambda d: d.name)
@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
def test_cast_to_and_from_float8_is_ml_dtypes(source, dtype):
    values = float32_sample().astype(source.numpy)
    q = ampcore.from_numpy(values).to(dtype)
    same_bits(q.numpy(), values.astype(dtype.numpy), f"cast {source.name} -> {dtype.name}")
    back = q.to(source).numpy()
    same_bits(back, values.astype(dtype.numpy).astype(source.numpy), f"cast {dtype.name} -> {source.name}")


def test_e8m0_scales_store_and_cast_as_ml_dtypes():
    powers = np.float32(2.0) ** np.arange(-127, 128, dtype=np.float32)
    q = _t(powers).to(E8M0)
    assert q.dtype is E8M0 and q.numpy().view(np.uint8).tolist() == list(range(255))
    assert np.array_equal(q.float().numpy(), powers)


# --------------------------------------------------------------------------- quantize_float8
def test_saturate_clamps_to_max_and_keeps_nan():
    x = _t([1000.0, -1e30, np.inf, -np.inf, np.nan, 448.0, 464.0])
    q, _ = quantize_float8(x, _one(), E4M3, True)
    got = q.float().numpy()
    assert got[:4].tolist() == [448.0, -448.0, 448.0, -448.0] and np.isnan(got[4]) and got[5:].tolist() == [448.0] * 2


def test_without_saturation_e4m3_overflows_to_nan_and_e5m2_to_inf():
    # 464 is the tie between 448 and the NaN code 0x7f: to even, 448; anything above it is NaN.
    x = _t([465.0, 464.0, -1e6, np.inf])
    q4 = quantize_float8(x, _one(), E4M3, False)[0].float().numpy()
    assert np.isnan(q4[0]) and q4[1] == 448.0 and np.isnan(q4[2]) and np.isnan(q4[3])
    q5 = quantize_float8(_t([61440.0, 61439.0, -1e6]), _one(), E5M2, False)[0].float().numpy()
    assert q5.tolist() == [np.inf, 57344.0, -np.inf]


@pytest.mark.parametrize(
    ("values", "want"),
    [([0.0, -0.0, 0.0], 0.0), ([1.0, -np.inf, 2.0], np.inf), ([1.0, np.nan, -3.0], np.nan), ([], 0.0)],
    ids=["all-zero", "inf", "nan", "empty"],
)
def test_amax_is_the_largest_magnitude_of_the_input(values, want):
    for kernel in (True, False):
        x = _t(np.asarray(values, np.float32))
        if kernel:
            _, amax = quantize_float8(x, _one(), E4M3, True)
        else:
            k = ampcore.get_backend("cpu").kernels
            amax = ampcore.from_numpy(quantize_float8_reference(k, x._data, _one()._data, E4M3, True)[1])
        assert amax.dtype is dt.float32 and amax.shape == ()
        np.testing.assert_array_equal(amax.numpy(), np.float32(want))


def test_amax_is_of_the_unscaled_input_in_its_own_dtype():
    x = _t([1.5, -300.0], dt.bfloat16)
    q, amax = quantize_float8(x, _t(np.float32(0.5)), E4M3, True)
    assert amax.item() == 300.0 and q.float().numpy().tolist() == [0.75, -144.0]


def test_row_wise_scales_scale_each_row():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 7)).astype(np.float32) * 100
    scales = (448.0 / np.abs(x).max(axis=1, keepdims=True)).astype(np.float32)
    q, amax = quantize_float8(_t(x), _t(scales), E4M3, True)
    same_bits(q.numpy(), expected_quantize(x, scales, E4M3, True), "row-wise quantize_float8")
    assert amax.item() == np.abs(x).max()
    assert np.abs(q.float().numpy()).max(axis=1).tolist() == [448.0] * 5


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"x": "int"}, TypeError, "x must be float32, bfloat16 or float16, got int64"),
        ({"scale": "bf16"}, TypeError, "scale must be a float32 tensor, got bfloat16"),
        ({"scale": "wrong-shape"}, ValueError, r"does not broadcast onto x of shape \(3, 4\)"),
        ({"dtype": E8M0}, ValueError, "dtype must be one of float8_e4m3fn, float8_e5m2, got float8_e8m0fnu"),
        ({"saturate": "yes"}, TypeError, "saturate must be True or False"),
    ],
)
def test_quantize_float8_names_the_bad_argument(kwargs, error, match):
    args = {"x": ampcore.ones(3, 4), "scale": _one(), "dtype": E4M3, "saturate": True}
    replacements = {
        "int": ampcore.ones(3, 4, dtype=dt.int64),
        "bf16": _t(np.float32(1.0), dt.bfloat16),
        "wrong-shape": ampcore.ones(4, 1),
    }
    for key, value in kwargs.items():
        args[key] = replacements.get(value, value) if isinstance(value, str) and value in replacements else value
    with pytest.raises(error, match=match):
        quantize_float8(args["x"], args["scale"], args["dtype"], args["saturate"])


def test_quantize_float8_records_no_autograd():
    x = ampcore.ones(2, 3, requires_grad=True)
    q, amax = quantize_float8(x, _one(), E4M3, True)
    assert q.grad_fn is None and not q.requires_grad and not amax.requires_grad


# --------------------------------------------------------------------------- scaled_mm
def _operands(m, k, n, seed=0, a_dtype=E4M3, b_dtype=E4M3):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32).astype(a_dtype.numpy)
    b = rng.standard_normal((k, n)).astype(np.float32).astype(b_dtype.numpy)
    return a, b


def _reference(a, b, sa, sb, bias=None):
    out = (a.astype(np.float64) * sa) @ (b.astype(np.float64) * sb)
    return out if bias is None else out + bias.astype(np.float64)


@pytest.mark.parametrize("out_dtype", [dt.float32, dt.bfloat16, dt.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
def test_scaled_mm_matches_float64_within_one_rounding(out_dtype, rowwise):
    m, k, n = 6, 40, 5
    a, b = _operands(m, k, n, a_dtype=E4M3, b_dtype=E5M2)
    rng = np.random.default_rng(1)
    sa = rng.uniform(0.5, 2, (m, 1) if rowwise else ()).astype(np.float32)
    sb = rng.uniform(0.5, 2, (1, n) if rowwise else ()).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    out = scaled_mm(ampcore.from_numpy(a), ampcore.from_numpy(b), _t(sa), _t(sb), out_dtype, _t(bias))
    assert out.dtype is out_dtype and out.shape == (m, n)
    want = _reference(a, b, sa, sb, bias)
    scale = np.abs(a.astype(np.float64) * sa) @ np.abs(b.astype(np.float64) * sb) + np.abs(bias)
    # the accumulation rule: k exact products, the two float32 scalings and the bias (k + 3 roundings in float32),
    # then one rounding to the output dtype
    assert_accumulated(out.numpy(), want, scale, out_dtype, k + 3, what=f"scaled_mm to {out_dtype.name}")


def test_scaled_mm_kernel_equals_the_reference_composition_bit_for_bit(monkeypatch):
    """On the widened path (float32 operands scaled, sgemm): oneMKL's path scales the sums instead, within
    float32 rounding of this (tests/test_cpu_lowp_gemm.py)."""
    from ampcore_cpu import lowp_gemm

    monkeypatch.setitem(lowp_gemm._chosen, lowp_gemm.key("float8"), lowp_gemm.GemmChoice("float8", False, "this test"))
    a, b = _operands(7, 33, 9, seed=3)
    k = ampcore.get_backend("cpu").kernels
    sa, sb = np.float32(0.37), np.float32(1.9)
    bias = np.random.default_rng(4).standard_normal(9).astype(ml_dtypes.bfloat16)
    for out_dtype in (dt.float32, dt.bfloat16, dt.float16):
        native = k.scaled_mm(a, b, np.asarray(sa), np.asarray(sb), out_dtype, bias, False)
        composed = scaled_mm_reference(k, a, b, np.asarray(sa), np.asarray(sb), out_dtype, bias, False)
        same_bits(native, composed, f"scaled_mm -> {out_dtype.name}")


def test_scaled_mm_accepts_one_element_scales_of_any_rank():
    a, b = _operands(1, 4, 1)
    fa, fb = ampcore.from_numpy(a), ampcore.from_numpy(b)
    one = scaled_mm(fa, fb, _t(np.float32(2.0)), _t(np.float32(1.0)), dt.float32).numpy()
    two = scaled_mm(fa, fb, _t(np.full((1, 1), 2.0, np.float32)), _t(np.ones(1, np.float32)), dt.float32).numpy()
    assert np.array_equal(one, two)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"a": "bf16"}, TypeError, "a must be float8_e4m3fn or float8_e5m2, got bfloat16"),
        ({"b": "wrong-k"}, ValueError, r"cannot be multiplied \(4 != 5\)"),
        ({"scale_a": "wrong-rows"}, ValueError, r"scale_a of shape \(2, 1\) is neither one scale"),
        ({"scale_b": "bf16-scale"}, TypeError, "scale_b must be a float32 tensor"),
        ({"out_dtype": E4M3}, ValueError, "out_dtype must be one of float32, bfloat16, float16"),
        ({"bias": "wrong-bias"}, ValueError, r"bias must be a \(2,\) float32, bfloat16 or float16 tensor"),
    ],
)
def test_scaled_mm_names_the_bad_argument(change, error, match):
    a, b = _operands(3, 4, 2)
    args = {
        "a": ampcore.from_numpy(a),
        "b": ampcore.from_numpy(b),
        "scale_a": _one(),
        "scale_b": _one(),
        "out_dtype": dt.bfloat16,
        "bias": None,
    }
    bad = {
        "bf16": ampcore.ones(3, 4, dtype=dt.bfloat16),
        "wrong-k": ampcore.from_numpy(_operands(5, 5, 2)[1]),
        "wrong-rows": ampcore.ones(2, 1),
        "bf16-scale": _t(np.float32(1), dt.bfloat16),
        "wrong-bias": ampcore.ones(3),
    }
    for key, value in change.items():
        args[key] = bad[value] if isinstance(value, str) else value
    with pytest.raises(error, match=match):
        scaled_mm(**args)


def test_scaled_mm_torch_signature_defaults_and_float8_output():
    a, b = _operands(4, 8, 3, seed=5)
    fa, fb = ampcore.from_numpy(a), ampcore.from_numpy(b)
    out = ampcore._scaled_mm(fa, fb, _one(), _one())
    assert out.dtype is E4M3  # torch: out_dtype defaults to the first operand's dtype
    wide = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float32)
    q = ampcore._scaled_mm(fa, fb, _one(), _one(), scale_result=_t(np.float32(4.0)), out_dtype=E5M2)
    same_bits(q.numpy(), (wide * np.float32(0.25)).astype(E5M2.numpy), "float8 output with scale_result")


# --------------------------------------------------------------------------- torch parity
def _torch_float8(torch, array):
    return torch.from_numpy(np.ascontiguousarray(array).view(np.uint8)).view(torch.float8_e4m3fn)


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="torch is not installed (the test command installs its CPU wheel: torch==2.13.0)",
)
@pytest.mark.parametrize(
    ("m", "k", "n", "rowwise", "bias"),
    [(32, 64, 48, False, False), (110, 83, 66, False, True), (64, 128, 64, False, False), (61, 67, 98, True, True)],
)
def test_cpu_scaled_mm_equals_torch_scaled_mm_on_cpu(m, k, n, rowwise, bias):
    """torch 2.13's CPU _scaled_mm: bfloat16 outputs bit for bit wherever the two float32 accumulations agree
    (torch runs oneDNN's kernel on AMX CPUs, NumPy OpenBLAS: the summation orders differ), and where they do
    not, one bfloat16 ulp at most; float32 outputs within summation-order rounding."""
    import torch

    rng = np.random.default_rng(m * k * n)
    a = (rng.standard_normal((m, k)) * 3).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((k, n)) * 3).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.uniform(0.001, 2, (m, 1) if rowwise else ()).astype(np.float32)
    sb = rng.uniform(0.001, 2, (1, n) if rowwise else ()).astype(np.float32)
    bias_values = rng.standard_normal(n).astype(ml_dtypes.bfloat16) if bias else None
    ta, tb = _torch_float8(torch, a), _torch_float8(torch, b.T).t()
    ts = torch.from_numpy(np.asarray(sa)), torch.from_numpy(np.asarray(sb))
    t_bias = None if bias_values is None else torch.from_numpy(bias_values.view(np.int16)).view(torch.bfloat16)
    ours = {}
    theirs = {}
    for name in ("bfloat16", "float32"):
        tb_name = t_bias if name == "bfloat16" else (None if t_bias is None else t_bias.float())
        theirs[name] = torch._scaled_mm(ta, tb, *ts, bias=tb_name, out_dtype=getattr(torch, name)).float().numpy()
        b_ours = None if bias_values is None else _t(bias_values, dt.bfloat16).to(getattr(dt, name))
        fa, fb = ampcore.from_numpy(a), ampcore.from_numpy(b)
        ours[name] = scaled_mm(fa, fb, _t(sa), _t(sb), getattr(dt, name), b_ours).float().numpy()
    a64, b64 = a.astype(np.float64) * sa, b.astype(np.float64) * sb
    magnitude = np.abs(a64) @ np.abs(b64) + (0 if bias_values is None else np.abs(bias_values.astype(np.float64)))
    assert np.all(np.abs(ours["float32"] - theirs["float32"]) <= 2 * k * 2.0**-24 * magnitude)
    differ = ours["bfloat16"] != theirs["bfloat16"]
    assert not np.any(differ & (ours["float32"] == theirs["float32"])), "bfloat16 differs from equal float32 sums"
    ulp = np.abs(theirs["bfloat16"]).astype(ml_dtypes.bfloat16).astype(np.float32) * 2.0**-7
    assert np.all(np.abs(ours["bfloat16"] - theirs["bfloat16"])[differ] <= ulp[differ])
    assert differ.mean() < 1e-3, f"{differ.sum()} of {differ.size} bfloat16 outputs differ"


# --------------------------------------------------------------------------- detect_overflow
def test_detect_overflow_names_a_float8_cast_and_an_unsaturated_quantize():
    x = _t([1.0, 1000.0])
    with ampcore.amp.detect_overflow() as watch:
        x.to(E4M3)
    assert watch.first is not None and watch.first.op == "cast" and "float8_e4m3fn[2]" in watch.first.outputs
    with ampcore.amp.detect_overflow() as watch:
        quantize_float8(x, _one(), E4M3, True)  # saturated: finite
    assert watch.first is None
    with ampcore.amp.detect_overflow() as watch:
        quantize_float8(x, _one(), E5M2, False)  # 1000 fits e5m2
        quantize_float8(x, _t(np.float32(100.0)), E5M2, False)  # 100000 does not: inf
    assert watch.first is not None and watch.first.op == "quantize_float8"
    assert watch.first.outputs == ("float8_e5m2[2]",)
