"""Float8 recipes (ampcore.float8.recipes) and their scale math (ampcore.float8.scaling)."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import ampcore as ac
from ampcore.float8 import (
    DelayedScaling,
    Format,
    MXFP8BlockScaling,
    RowwiseScaling,
    TensorwiseScaling,
    parse_recipe,
)
from ampcore.float8.device_scaling import AmaxHistory
from ampcore.float8.scaling import FP8_MAX, current_scale, delayed_scale, mx_scale

ALL = [
    TensorwiseScaling(),
    TensorwiseScaling(fp8_format=Format.E4M3, round_scales_to_power_of_2=True),
    RowwiseScaling(),
    RowwiseScaling(round_scales_to_power_of_2=False),
    DelayedScaling(),
    DelayedScaling(margin=2, amax_history_len=16, amax_compute_algo="most_recent", fp8_format=Format.E4M3),
    MXFP8BlockScaling(),
    MXFP8BlockScaling(fp8_format=Format.HYBRID),
]


def test_defaults_follow_torchao_and_transformer_engine() -> None:
    assert TensorwiseScaling().fp8_format is Format.HYBRID
    assert not TensorwiseScaling().round_scales_to_power_of_2
    assert RowwiseScaling().round_scales_to_power_of_2  # torchao's rowwise recipe
    d = DelayedScaling()
    assert (d.margin, d.amax_history_len, d.amax_compute_algo, d.fp8_format) == (0, 1024, "max", Format.HYBRID)
    assert MXFP8BlockScaling().fp8_format is Format.E4M3 and MXFP8BlockScaling.block_size == 32


def test_recipes_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DelayedScaling().margin = 1  # type: ignore[misc]


@pytest.mark.parametrize("recipe", ALL, ids=str)
def test_string_form_parses_back(recipe) -> None:
    assert parse_recipe(str(recipe)) == recipe


def test_string_form_names_only_changed_fields() -> None:
    assert str(TensorwiseScaling()) == "tensorwise"
    assert str(DelayedScaling(amax_history_len=16)) == "delayed,amax_history_len=16"
    assert parse_recipe("delayed, margin=1, fp8_format=E4M3") == DelayedScaling(margin=1, fp8_format=Format.E4M3)
    assert parse_recipe("rowwise,round_scales_to_power_of_2=false") == RowwiseScaling(round_scales_to_power_of_2=False)


def test_format_gives_e5m2_gradients_only_for_hybrid() -> None:
    assert Format.HYBRID.dtype_name("grad_output") == "float8_e5m2"
    assert Format.HYBRID.dtype_name("input") == "float8_e4m3fn"
    assert Format.E4M3.dtype_name("grad_output") == "float8_e4m3fn"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("blockwise", "unknown recipe 'blockwise'"),
        ("delayed,history=4", "has no field 'history'"),
        ("delayed,margin=x", "margin='x' must be an int"),
        ("delayed,amax_compute_algo=mean", "amax_compute_algo 'mean'"),
        ("delayed,amax_history_len=0", "amax_history_len must be an int >= 1"),
        ("tensorwise,fp8_format=e5m2", "fp8_format 'e5m2'"),
        ("tensorwise,margin", "is not key=value"),
        ("mxfp8,round_scales_to_power_of_2=false", "powers of two"),
    ],
)
def test_bad_recipes_raise_naming_the_value(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_recipe(spec)


# ---------------------------------------------------------------- scale math against a float64 reference


@pytest.mark.parametrize("name", sorted(FP8_MAX))
def test_current_scale_maps_amax_onto_the_format_max(name: str) -> None:
    amax = np.array([1e-3, 0.5, 3.0, 1e4, 7.77], dtype=np.float32)
    scale = current_scale(amax, name)
    assert scale.dtype == np.float32
    expected = FP8_MAX[name] / amax.astype(np.float64)
    np.testing.assert_allclose(scale, expected, rtol=2.0**-23)
    # the amax itself lands on the max (to float32 rounding), so current scaling does not saturate
    fmt = ml_dtypes.float8_e4m3fn if name == "float8_e4m3fn" else ml_dtypes.float8_e5m2
    assert np.all(np.abs((amax * scale).astype(fmt).astype(np.float32)) <= FP8_MAX[name])


def test_current_scale_of_zero_inf_and_nan_amax() -> None:
    scale = current_scale(np.array([0.0, np.inf, np.nan], dtype=np.float32), "float8_e4m3fn")
    assert scale[0] == np.float32(448.0) / np.float32(1e-12)  # torchao's EPS floor
    assert scale[1] == 1.0 and scale[2] == 1.0


def test_power_of_two_scales_round_down_exactly() -> None:
    amax = np.array([1.0, 3.0, 448.0, 449.0, 1e-3, 2.0**-20], dtype=np.float32)
    scale = current_scale(amax, "float8_e4m3fn", round_to_pow2=True)
    expected = 2.0 ** np.floor(np.log2(448.0 / amax.astype(np.float64)))
    np.testing.assert_array_equal(scale, expected.astype(np.float32))
    assert np.all(amax * scale <= 448.0)


def test_delayed_scale_uses_max_or_most_recent_and_margin() -> None:
    hist = [2.0, 8.0, 4.0]
    assert delayed_scale(hist, "float8_e4m3fn", 1.0) == np.float32(448.0 / 8.0)
    assert delayed_scale(hist, "float8_e4m3fn", 1.0, algo="most_recent") == np.float32(448.0 / 4.0)
    assert delayed_scale(hist, "float8_e4m3fn", 1.0, margin=2) == np.float32(448.0 / 8.0 / 4.0)
    assert delayed_scale(hist, "float8_e5m2", 1.0) == np.float32(57344.0 / 8.0)
    assert delayed_scale([3.0], "float8_e4m3fn", 1.0, round_to_pow2=True) == np.float32(128.0)


@pytest.mark.parametrize("bad", [[0.0], [np.inf], [1.0, np.nan], []])
def test_delayed_scale_keeps_the_previous_scale_on_zero_inf_nan_or_no_history(bad) -> None:
    assert delayed_scale(bad, "float8_e4m3fn", 0.25) == np.float32(0.25)


def test_amax_history_keeps_the_last_n_on_the_device() -> None:
    h = AmaxHistory(3)
    for v in [1.0, 5.0, 2.0, 3.0]:
        h.append(ac.tensor(np.float32(v)))
    assert h.values is not None and h.values.numpy().tolist() == [5.0, 2.0, 3.0] and len(h) == 3
    assert delayed_scale(h.values.numpy(), "float8_e4m3fn", 1.0) == np.float32(448.0 / 5.0)


@pytest.mark.parametrize(("name", "emax"), [("float8_e4m3fn", 8), ("float8_e5m2", 15)])
def test_mx_scale_is_ocp_mx_shared_exponent(name: str, emax: int) -> None:
    amax = np.array([1.0, 1.5, 448.0, 0.3, 2.0**-100, 0.0, np.inf], dtype=np.float32)
    scale = mx_scale(amax, name)
    ref = np.array([2.0 ** -(np.floor(np.log2(float(a))) - emax) for a in amax[:5]])
    np.testing.assert_array_equal(scale[:5], ref.astype(np.float32))
    assert scale[5] == 1.0 and scale[6] == 1.0
    # the block's largest element lands in [2**emax, 2**(emax+1))
    assert np.all((amax[:5] * scale[:5] >= 2.0**emax) & (amax[:5] * scale[:5] < 2.0 ** (emax + 1)))


def test_mx_scale_exponent_clamps_to_e8m0_range() -> None:
    tiny = np.array([np.finfo(np.float32).smallest_subnormal], dtype=np.float32)
    assert mx_scale(tiny, "float8_e4m3fn")[0] == np.float32(2.0**127)
