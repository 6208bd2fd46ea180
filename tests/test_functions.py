"""torch's function forms (ampcore/functions.py), inference_mode, the float32 matmul precision knob, rand_like."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore import functions
from ampcore.ops import declare

A = np.array([[0.5, -2.0, 3.0], [1.5, 4.0, -0.25]], dtype=np.float32)


def test_every_name_in_the_table_is_a_function_on_ampcore():
    assert set(functions.TORCH_FUNCTIONS) == set(functions.function_names())
    for name in functions.TORCH_FUNCTIONS:
        assert getattr(ampcore, name) is getattr(functions, name) and getattr(ampcore, name).__name__ == name
        assert name in ampcore.__all__


def test_every_declared_function_is_a_function_form_and_the_rest_call_a_method():
    declared = {n for n, d in declare.declarations().items() if "function" in d.variants}
    assert declared <= set(functions.TORCH_FUNCTIONS)
    for name in set(functions.TORCH_FUNCTIONS) - declared:
        assert name in functions.METHOD_FUNCTIONS and hasattr(ampcore.Tensor, name)


@pytest.mark.parametrize(
    "name,args,ref",
    [
        ("exp", (), np.exp),
        ("log", (), lambda a: np.log(np.abs(a))),
        ("sqrt", (), lambda a: np.sqrt(np.abs(a))),
        ("tanh", (), np.tanh),
        ("sigmoid", (), lambda a: 1 / (1 + np.exp(-a))),
        ("abs", (), np.abs),
        ("sum", (1,), lambda a: a.sum(1)),
        ("mean", (0,), lambda a: a.mean(0)),
        ("amax", (), np.max),
        ("softmax", (-1,), lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
    ],
)
def test_function_forms_match_numpy(name, args, ref):
    a = np.abs(A) if name in ("log", "sqrt") else A
    out = getattr(ampcore, name)(ampcore.tensor(a), *args)
    np.testing.assert_allclose(out.numpy(), ref(a.astype(np.float64)), rtol=4 * 2.0**-23, atol=1e-7)


def test_max_and_min_take_torchs_three_forms():
    x, y = ampcore.tensor(A), ampcore.tensor(np.zeros_like(A))
    assert ampcore.max(x).item() == 4.0 and ampcore.min(x).item() == -2.0
    values, indices = ampcore.max(x, 1)
    assert values.tolist() == [3.0, 4.0] and indices.tolist() == [2, 1]
    assert ampcore.min(x, dim=0, keepdim=True).values.shape == (1, 3)
    np.testing.assert_array_equal(ampcore.max(x, y).numpy(), np.maximum(A, 0))
    np.testing.assert_array_equal(ampcore.min(x, y).numpy(), np.minimum(A, 0))


def test_a_function_form_needs_a_tensor():
    with pytest.raises(TypeError, match=r"exp\(\): input must be a Tensor, got list"):
        ampcore.exp([1.0])


def test_function_forms_are_differentiable():
    x = ampcore.tensor(A, requires_grad=True)
    ampcore.sum(ampcore.exp(x)).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(A), rtol=2.0**-22)


# --------------------------------------------------------------------------- inference_mode
def test_inference_mode_records_no_graph_as_context_and_decorator():
    w = ampcore.ones(2, requires_grad=True)
    with ampcore.inference_mode():
        assert not ampcore.is_grad_enabled() and not (w * 2).requires_grad
    assert ampcore.is_grad_enabled()

    @ampcore.inference_mode()
    def called():
        return ampcore.is_grad_enabled()

    @ampcore.inference_mode
    def bare():
        return ampcore.is_grad_enabled()

    assert called() is False and bare() is False and ampcore.is_grad_enabled()


def test_inference_mode_false_leaves_grad_mode_alone():
    with ampcore.inference_mode(False):
        assert ampcore.is_grad_enabled()
    with ampcore.no_grad(), ampcore.inference_mode(False):
        assert not ampcore.is_grad_enabled()


# --------------------------------------------------------------------------- float32 matmul precision
def test_float32_matmul_precision_is_stored_and_validated():
    assert ampcore.get_float32_matmul_precision() == "highest"
    try:
        for p in ("high", "medium", "highest"):
            ampcore.set_float32_matmul_precision(p)
            assert ampcore.get_float32_matmul_precision() == p
        ampcore.set_float32_matmul_precision("medium")
        a = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
        out = (ampcore.tensor(a) @ ampcore.tensor(a)).numpy()  # cpu: float32 whatever the knob says
        np.testing.assert_allclose(out, a.astype(np.float64) @ a, rtol=1e-5, atol=1e-5)
        with pytest.raises(ValueError, match="unknown float32 matmul precision 'low'; use one of 'highest', 'high'"):
            ampcore.set_float32_matmul_precision("low")
    finally:
        ampcore.set_float32_matmul_precision("highest")


# --------------------------------------------------------------------------- rand_like / randn_like
@pytest.mark.parametrize("fn", [ampcore.rand_like, ampcore.randn_like])
def test_random_like_keeps_shape_dtype_and_device_and_honours_the_seed(fn):
    t = ampcore.zeros(3, 4, dtype=ampcore.float16)
    ampcore.manual_seed(5)
    a = fn(t)
    ampcore.manual_seed(5)
    b = fn(t)
    assert a.shape == (3, 4) and a.dtype is ampcore.float16 and a.device == t.device
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert fn(t, dtype=ampcore.float32, requires_grad=True).requires_grad
