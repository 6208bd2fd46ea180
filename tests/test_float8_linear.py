"""Float8Linear and convert_to_float8_training (ampcore.float8): numerics against a float64 NumPy emulation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ampcore as ac
from ampcore import nn
from ampcore.conformance.float8_recipes import cast as _cast
from ampcore.conformance.float8_recipes import gemm_tolerance
from ampcore.float8 import (
    DelayedScaling,
    Float8Linear,
    Float8LinearConfig,
    MXFP8BlockScaling,
    RowwiseScaling,
    TensorwiseScaling,
    convert_to_float8_training,
    float8_stats,
)

E4M3 = "float8_e4m3fn"


def _tol(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    assert a.shape[1] == k
    return gemm_tolerance(a, b)


def _layer(recipe, in_features=64, out_features=48, bias=False, seed=0) -> tuple[Float8Linear, nn.Linear]:
    ac.manual_seed(seed)
    ref = nn.Linear(in_features, out_features, bias=bias)
    f8 = convert_to_float8_training(nn.Sequential(ref), Float8LinearConfig(recipe=recipe))[0]
    return f8, ref


RECIPES = [TensorwiseScaling(), RowwiseScaling(), RowwiseScaling(round_scales_to_power_of_2=False), MXFP8BlockScaling()]


@pytest.mark.parametrize("recipe", RECIPES, ids=str)
def test_forward_is_the_float8_product_accumulated_in_float32(recipe) -> None:
    layer, _ = _layer(recipe)
    x = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32) * 3
    y = layer(ac.tensor(x)).numpy().astype(np.float64)
    a, b = _cast(x, recipe, E4M3), _cast(layer.weight.numpy(), recipe, E4M3)
    expected = a @ b.T
    assert np.all(np.abs(y - expected) <= _tol(a, b, 64))


@pytest.mark.parametrize("recipe", RECIPES, ids=str)
def test_backward_casts_grad_output_e5m2_and_runs_both_gemms_in_float8(recipe) -> None:
    layer, _ = _layer(recipe)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    g = rng.standard_normal((32, 48)).astype(np.float32) * 1e-3
    xt = ac.tensor(x, requires_grad=True)
    layer(xt).backward(ac.tensor(g))
    gfmt = recipe.fp8_format.dtype_name("grad_output")
    w = layer.weight.numpy()
    # grad_input = g @ w: A = g (reduces over N), B = w.T
    a, b = _cast(g, recipe, gfmt), _cast(np.ascontiguousarray(w.T), recipe, E4M3)
    assert np.all(np.abs(xt.grad.numpy() - a @ b.T) <= _tol(a, b, 48))
    # grad_weight = g.T @ x: A = g.T (reduces over M), B = x.T
    a, b = _cast(np.ascontiguousarray(g.T), recipe, gfmt), _cast(np.ascontiguousarray(x.T), recipe, E4M3)
    assert layer.weight.grad.dtype == ac.float32
    assert np.all(np.abs(layer.weight.grad.numpy() - a @ b.T) <= _tol(a, b, 32))


def test_master_weights_stay_float32_and_untouched() -> None:
    layer, ref = _layer(TensorwiseScaling(), bias=True)
    before = layer.weight.numpy().copy()
    assert layer.weight is ref.weight and layer.bias is ref.bias  # the same Parameters: optimizers keep working
    with ac.autocast("cpu", dtype=ac.bfloat16):
        out = layer(ac.randn(4, 64))
    out.float().sum().backward()
    assert layer.weight.dtype == ac.float32 and np.array_equal(layer.weight.numpy(), before)
    assert layer.weight.grad.dtype == ac.float32 and layer.bias.grad.dtype == ac.float32


def test_output_dtype_follows_autocast_and_the_trace_explains_each_float8_op() -> None:
    layer, _ = _layer(TensorwiseScaling(), bias=True)
    x = ac.randn(2, 5, 64)
    assert layer(x).dtype == ac.float32 and layer(x).shape == (2, 5, 48)
    with ac.autocast("cpu", dtype=ac.bfloat16, trace=True) as region:
        y = layer(x)
    assert y.dtype == ac.bfloat16
    rows = [r for r in region.trace if r.category == "float8"]
    assert [r.op for r in rows] == ["quantize_float8", "quantize_float8", "scaled_mm"]
    assert rows[0].cast_to == "float8_e4m3fn" and "input" in rows[0].reason and "scale=" in rows[0].reason
    assert "weight" in rows[1].reason and rows[2].output_dtypes == ("bfloat16",)
    assert "autocast dtype" in rows[2].reason


def test_convert_swaps_linears_in_place_keeping_order_and_filter() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 2)))
    params = [id(p) for p in model.parameters()]
    out = convert_to_float8_training(model, "rowwise", module_filter_fn=lambda mod, fqn: fqn != "2.1")
    assert out is model
    assert [type(m).__name__ for m in model] == ["Float8Linear", "ReLU", "Sequential"]
    assert type(model[2][0]) is Float8Linear and type(model[2][1]) is nn.Linear
    assert model[2][0].fqn == "2.0" and model[2][0].config.recipe == RowwiseScaling()
    assert [id(p) for p in model.parameters()] == params
    assert model(ac.randn(3, 8)).shape == (3, 2)


def test_convert_accepts_a_bare_linear_and_rejects_non_modules() -> None:
    layer = convert_to_float8_training(nn.Linear(4, 4))
    assert type(layer) is Float8Linear and layer.config == Float8LinearConfig()
    with pytest.raises(TypeError, match="needs an ampcore.nn.Module"):
        convert_to_float8_training("model")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown recipe 'fp8'"):
        convert_to_float8_training(nn.Linear(4, 4), "fp8")


def test_config_names_follow_torchao() -> None:
    cfg = Float8LinearConfig.from_recipe_name("rowwise")
    assert cfg.recipe == RowwiseScaling()
    assert Float8LinearConfig().gemm_config_output.use_fast_accum
    assert not Float8LinearConfig().gemm_config_grad_input.use_fast_accum


def test_bad_input_shape_names_in_features() -> None:
    layer, _ = _layer(TensorwiseScaling())
    with pytest.raises(ValueError, match="in_features=64"):
        layer(ac.randn(3, 7))


def test_stats_record_one_entry_per_role_and_step() -> None:
    model = convert_to_float8_training(nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 8)), "tensorwise")
    for _ in range(3):
        model(ac.randn(4, 64)).sum().backward()
    stats = model.float8_stats()
    assert stats == float8_stats(model)
    assert set(stats) == {"0", "1"} and set(stats["0"]) == {"input", "weight", "grad_output"}
    for role in stats["0"].values():
        assert len(role["amax"]) == len(role["scale"]) == len(role["saturated"]) == 3
    w = np.abs(model[0].weight.numpy()).max()
    assert stats["0"]["weight"]["amax"][-1] == pytest.approx(w, rel=2.0**-24)
    assert stats["0"]["weight"]["scale"][-1] == pytest.approx(448.0 / w, rel=2.0**-23)


def test_delayed_scaling_scales_by_the_history_and_counts_saturation() -> None:
    recipe = DelayedScaling(amax_history_len=2, amax_compute_algo="max")
    layer, _ = _layer(recipe)
    x = np.ones((4, 64), dtype=np.float32)
    with ac.no_grad():
        layer(ac.tensor(x))  # first cast: its own amax (1.0) -> scale 448
        layer(ac.tensor(x * 100))  # scale still 448 from the history: every value saturates
        layer(ac.tensor(x))  # history [1, 100] -> scale 4.48
    s = float8_stats(nn.Sequential(layer))["0"]["input"]
    assert s["amax"] == [1.0, 100.0, 1.0]
    assert s["scale"] == pytest.approx([448.0, 448.0, 4.48], rel=2.0**-23)
    assert s["saturated"] == [0, 4 * 64, 0]


def test_grad_scaler_warns_that_float8_with_bfloat16_needs_no_loss_scale() -> None:
    model = convert_to_float8_training(nn.Sequential(nn.Linear(8, 4)))
    scaler = ac.GradScaler("cpu")
    with ac.autocast("cpu", dtype=ac.bfloat16):
        loss = model(ac.randn(2, 8)).float().sum()
    with pytest.warns(UserWarning, match="float8 layers"):
        scaler.scale(loss)


def test_grad_scaler_stays_quiet_for_float8_under_float16_autocast() -> None:
    model = convert_to_float8_training(nn.Sequential(nn.Linear(8, 4)))
    scaler = ac.GradScaler("cpu")
    with ac.autocast("cpu", dtype=ac.float16):
        loss = model(ac.randn(2, 8)).float().sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaler.scale(loss)


def test_grad_scaler_does_not_warn_about_float8_for_a_later_model_without_it() -> None:
    model = convert_to_float8_training(nn.Sequential(nn.Linear(8, 4)))
    model(ac.randn(2, 8)).sum()  # a float8 forward that no scaler saw
    with pytest.warns(UserWarning, match="float8 layers"):
        ac.GradScaler("cpu").scale(model(ac.randn(2, 8)).sum())  # reads (and clears) the note
    plain = nn.Linear(8, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ac.GradScaler("cpu").scale(plain(ac.randn(2, 8)).sum())
