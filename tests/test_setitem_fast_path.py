"""``x[index] = value`` straight from the kernels when nothing is recorded (ampcore.ops.indexing.assigned_array):
the same values as the general, differentiable path, and the general path wherever something must be recorded."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ampcore
from ampcore.ops import indexing


def _slices(n: int) -> st.SearchStrategy[slice]:
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    return st.builds(slice, bound, bound, st.one_of(st.none(), st.integers(-3, 3).filter(bool)))


@settings(max_examples=150, deadline=None)
@given(
    index=st.tuples(st.one_of(st.integers(-4, 3), _slices(4)), st.one_of(st.integers(-5, 4), _slices(5))),
    value=st.one_of(st.integers(-9, 9), st.floats(-4, 4, width=32)),
    dtype=st.sampled_from(["float32", "int64", "bfloat16"]),
    as_tensor=st.booleans(),
)
def test_the_kernels_give_the_general_paths_values(index, value, dtype, as_tensor):
    x = ampcore.tensor(np.arange(20).reshape(4, 5) * 0.5, dtype=dtype)
    general = indexing.setitem(x, index, value).numpy()
    if as_tensor:
        selected = np.zeros((4, 5))[index].shape
        value = ampcore.full(selected, value, dtype="float32")
    fast = indexing.assigned_array(x, index, value)
    assert fast is not None
    np.testing.assert_array_equal(x._backend.to_numpy(fast), general)


def test_a_broadcast_tensor_value_and_a_whole_overwrite():
    x = ampcore.zeros(3, 4)
    x[1:] = ampcore.tensor([1.0, 2.0, 3.0, 4.0])
    assert x.tolist() == [[0] * 4, [1, 2, 3, 4], [1, 2, 3, 4]]
    x[:, 0] = 7
    assert x[:, 0].tolist() == [7, 7, 7]
    with pytest.raises(ValueError, match="cannot be expanded"):
        x[1:] = ampcore.ones(3)


def test_what_must_be_recorded_takes_the_general_path():
    leaf = ampcore.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        leaf[0] = 2.0
    with ampcore.no_grad():
        leaf[0] = 2.0  # under no_grad a parameter may be written, recording nothing
    assert leaf.tolist() == [2.0, 1.0, 1.0] and leaf.grad_fn is None and leaf.requires_grad
    x, v = ampcore.zeros(3), ampcore.tensor([5.0], requires_grad=True)
    x[1:2] = v  # the value needs a gradient: x joins the graph
    x.sum().backward()
    assert v.grad.tolist() == [1.0] and x.grad_fn is not None
    plain = ampcore.zeros(4)
    plain[1:3] = 1.0
    assert plain.grad_fn is None and not plain.requires_grad


def test_other_indices_are_left_to_the_general_path():
    x = ampcore.arange(6.0)
    assert indexing.assigned_array(x, x > 2, 0.0) is None
    assert indexing.assigned_array(x, ..., 0.0) is None
    assert indexing.assigned_array(x, (None, 1), 0.0) is None
    assert indexing.assigned_array(x, slice(1, 3), [1.0, 2.0]) is None
    x[x > 2] = 0.0
    assert x.tolist() == [0.0, 1.0, 2.0, 0.0, 0.0, 0.0]


def test_autocast_traces_still_see_the_assignment():
    x = ampcore.zeros(4)
    with ampcore.autocast("cpu", trace=True) as region:
        x[1:3] = 1.0
    assert "__setitem__" in region.trace.ops()
