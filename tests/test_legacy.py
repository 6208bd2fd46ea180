"""ampcore.legacy (LongTensor, FloatTensor, ...) and autograd.Variable: torch's legacy constructors."""

from __future__ import annotations

import pytest

import ampcore
from ampcore.autograd import Variable


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("DoubleTensor", ampcore.float64),
        ("FloatTensor", ampcore.float32),
        ("HalfTensor", ampcore.float16),
        ("BFloat16Tensor", ampcore.bfloat16),
        ("LongTensor", ampcore.int64),
        ("IntTensor", ampcore.int32),
        ("BoolTensor", ampcore.bool_),
    ],
)
def test_sizes_make_zeros_data_makes_values_and_isinstance_checks_the_dtype(name, dtype):
    legacy = getattr(ampcore, name)
    assert legacy.dtype is dtype and repr(legacy) == f"<class 'ampcore.{name}'>"
    shaped = legacy(2, 3)
    assert shaped.shape == (2, 3) and shaped.dtype is dtype and not shaped.numpy().any()
    assert legacy().shape == (0,)
    made = legacy([1, 0, 1])
    expected = [True, False, True] if dtype is ampcore.bool_ else [1, 0, 1]
    assert made.dtype is dtype and made.tolist() == expected
    other = ampcore.int64 if dtype is ampcore.int32 else ampcore.int32
    assert isinstance(made, legacy) and not isinstance(ampcore.zeros(1, dtype=other), legacy)


def test_a_tensor_argument_must_have_the_types_dtype():
    x = ampcore.ones(2)
    assert ampcore.FloatTensor(x).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="LongTensor\\(\\): expected a int64 tensor, got float32"):
        ampcore.LongTensor(x)
    with pytest.raises(TypeError, match="takes sizes as separate ints or one sequence of data"):
        ampcore.FloatTensor([1.0], 2)


def test_variable_is_a_detached_tensor_with_requires_grad_as_asked():
    w = ampcore.ones(2, requires_grad=True) * 3
    v = Variable(w)
    assert v.grad_fn is None and not v.requires_grad and v.tolist() == [3.0, 3.0]
    leaf = Variable(ampcore.ones(2), requires_grad=True)
    (leaf * leaf).sum().backward()
    assert leaf.grad.tolist() == [2.0, 2.0]
    assert isinstance(w, Variable) and not isinstance([1], Variable)
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1.0])
