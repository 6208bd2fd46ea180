"""The elementwise ops issue 37 declared (ampcore/ops/decls/classify.py, logical.py, activation.py): values and
gradients against torch's, the special values, integer inputs and the in-place forms."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
import ampcore.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

SPECIALS = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 3.4e38, 1e-45])


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite", "isposinf", "isneginf"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_classifications_match_torch_on_special_values(name, dtype):
    x = ampcore.tensor(SPECIALS, dtype=dtype)
    expected = getattr(torch, name)(torch.tensor(SPECIALS).to(getattr(torch, dtype)))
    for got in (getattr(ampcore, name)(x), getattr(x, name)()):
        assert got.dtype is ampcore.bool_ and got.tolist() == expected.tolist()


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite"])
def test_classifications_of_integers_are_constant_as_torchs(name):
    x = ampcore.tensor([0, -3, 2**40])
    assert getattr(ampcore, name)(x).tolist() == getattr(torch, name)(torch.tensor([0, -3, 2**40])).tolist()


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_ops_take_any_dtype_with_nonzero_true(name):
    a = np.array([0.0, 1.0, -2.0, np.nan, 0.0])
    b = np.array([0, 0, 3, 1, 5])
    got = getattr(ampcore, name)(ampcore.tensor(a), ampcore.tensor(b))
    assert got.dtype is ampcore.bool_
    assert got.tolist() == getattr(torch, name)(torch.tensor(a), torch.tensor(b)).tolist()
    assert getattr(ampcore.tensor(a), name)(ampcore.tensor(b)).tolist() == got.tolist()
    assert ampcore.logical_not(ampcore.tensor(a)).tolist() == torch.logical_not(torch.tensor(a)).tolist()


ACTIVATIONS = [
    ("leaky_relu", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("elu", {}),
    ("elu", {"alpha": 0.5}),
    ("selu", {}),
    ("hardtanh", {}),
    ("hardtanh", {"min_val": -2.0, "max_val": 0.5}),
    ("relu6", {}),
    ("hardsigmoid", {}),
    ("hardswish", {}),
]


@pytest.mark.parametrize(("name", "kwargs"), ACTIVATIONS)
def test_activations_match_torch_forward_and_backward(name, kwargs):
    a = np.linspace(-7, 7, 57) + 0.01  # off the kinks, where torch's and the declared gradients may differ
    x, t = ampcore.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = getattr(F, name)(x, **kwargs), getattr(TF, name)(t, **kwargs)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=2**-52, atol=0)
    y.sum().backward()
    ty.sum().backward()
    # torch's float64 hardsigmoid gradient uses a float32 1/6: compare at float32 precision there
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=2**-23 if name == "hardsigmoid" else 2**-52)


@pytest.mark.parametrize(("name", "kwargs"), ACTIVATIONS)
def test_activations_in_place_and_in_low_precision(name, kwargs):
    a = np.linspace(-7, 7, 57) + 0.01
    x = ampcore.tensor(a, dtype="bfloat16")
    expected = getattr(TF, name)(torch.tensor(a, dtype=torch.bfloat16), **kwargs)
    np.testing.assert_array_equal(getattr(F, name)(x, **kwargs).float().numpy(), expected.float().numpy())
    y = x.clone()
    assert getattr(F, name)(y, inplace=True, **kwargs) is y
    np.testing.assert_array_equal(y.float().numpy(), expected.float().numpy())


def test_hardswish_does_not_overflow_near_the_maximum():
    top = float(np.finfo(np.float32).max)
    assert F.hardswish(ampcore.tensor([top])).tolist() == [top]
