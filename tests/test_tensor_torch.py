"""ampcore.tensor_torch: Tensor's torch attributes that are not ops (.data, .type(), is_cuda, new_zeros, detach_)."""

from __future__ import annotations

import copy
import pickle

import pytest

import ampcore
from ampcore import nn


def test_data_is_the_values_without_history_and_in_place_changes_reach_the_tensor():
    p = nn.Parameter(ampcore.ones(3))
    d = p.data
    assert isinstance(d, ampcore.Tensor) and not d.requires_grad and d.grad_fn is None and d.shape == (3,)
    p.data.mul_(0.5)  # outside no_grad, on a leaf that requires grad: allowed through .data, as in torch
    assert p.tolist() == [0.5, 0.5, 0.5] and p.requires_grad and p.grad_fn is None
    p.data.copy_(ampcore.tensor([1.0, 2.0, 3.0]))
    assert p.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad cannot be changed in place"):
        p.mul_(2.0)


def test_assigning_data_rebinds_values_shape_and_dtype():
    p = nn.Parameter(ampcore.ones(3))
    p.data = ampcore.zeros(2, 2, dtype=ampcore.float64)
    assert p.shape == (2, 2) and p.dtype is ampcore.float64 and p.requires_grad
    with pytest.raises(TypeError, match="t.data must be set to a tensor, got list"):
        p.data = [1.0]


def test_data_of_a_computed_tensor_carries_no_gradient():
    x = ampcore.ones(2, requires_grad=True)
    y = x * 2
    (y.data * 3).sum()  # no graph: nothing to backward through
    assert not (y.data * 3).requires_grad
    assert copy.deepcopy(y.data).tolist() == [2.0, 2.0] and pickle.loads(pickle.dumps(y.data)).tolist() == [2.0, 2.0]


def test_type_names_and_converts_as_torchs_legacy_form():
    x = ampcore.ones(2)
    assert x.type() == "ampcore.FloatTensor" and x.long().type() == "ampcore.LongTensor"
    assert x.type(ampcore.LongTensor).dtype is ampcore.int64
    assert x.type("torch.DoubleTensor").dtype is ampcore.float64  # the name as a renamed script still spells it
    assert x.type(ampcore.int32).dtype is ampcore.int32
    with pytest.raises(ValueError, match="unknown tensor type 'ampcore.ByteTensor'"):
        x.type("ampcore.ByteTensor")


def test_device_flags_and_new_tensors_like_this_one():
    x = ampcore.ones(2, dtype=ampcore.float64, device="cpu")
    assert x.is_cpu and not x.is_cuda and not x.is_xpu and not x.is_mps
    z = x.new_zeros(2, 3)
    assert z.shape == (2, 3) and z.dtype is ampcore.float64 and z.device == x.device
    assert x.new_zeros((4,)).shape == (4,) and x.new_ones(1).tolist() == [1.0]
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0] and x.new_empty(3).shape == (3,)
    assert x.new_tensor([1, 2]).dtype is ampcore.float64 and x.new_zeros(1, dtype=ampcore.int64).dtype is ampcore.int64


def test_detach_in_place_makes_a_leaf_that_needs_no_grad():
    y = ampcore.ones(2, requires_grad=True) * 2
    assert y.detach_() is y and y.grad_fn is None and not y.requires_grad


def test_resize_in_place_keeps_the_leading_elements_and_zero_fills():
    x = ampcore.arange(6.0)
    assert x.resize_(2, 2) is x and x.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    x.resize_((2, 4))
    assert x.tolist() == [[0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0]]
    x.resize_as_(ampcore.zeros(3))
    assert x.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(RuntimeError, match="requires grad"):
        ampcore.ones(3, requires_grad=True).resize_(2)


def test_deprecated_resize_warns_and_keeps_the_number_of_elements():
    x = ampcore.arange(6.0)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        assert x.resize(3, 2).shape == (3, 2)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="keeps the number of elements"):
        x.resize(4, 2)
