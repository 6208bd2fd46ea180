"""Boolean-mask get and set, and assignment with gradients (ampcore/ops/indexing.py), against NumPy float64."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore.testing import gradcheck

EPS = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def f64(t: ampcore.Tensor) -> np.ndarray:
    return np.asarray(t.numpy(), dtype=np.float64)


def rnd(*shape: int, seed: int = 0) -> np.ndarray:
    """float32 normal samples (a NumPy array keeps its dtype in ampcore.tensor)."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(params=["cpu", "fake"])
def device(request, register_fake) -> str:
    """The cpu backend, and a third-party backend with only the primitive kernels (the reference compositions)."""
    return "cpu" if request.param == "cpu" else register_fake().name


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_mask_get_matches_numpy_and_the_gradient_lands_on_the_selected_elements(device, dtype):
    a = rnd(4, 5)
    x = ampcore.tensor(a, dtype=dtype, device=device, requires_grad=True)
    mask = x > 0.1
    out = x[mask]
    np.testing.assert_allclose(f64(out), a[f64(x) > 0.1], rtol=EPS[dtype])
    assert out.shape == (int((f64(x) > 0.1).sum()),) and out.dtype is x.dtype
    (out * 3.0).sum().backward()
    np.testing.assert_array_equal(f64(x.grad), np.where(f64(x) > 0.1, 3.0, 0.0))


def test_a_mask_over_the_leading_dims_selects_rows(device):
    a = rnd(4, 3)
    x = ampcore.tensor(a, device=device)
    rows = ampcore.tensor([True, False, True, True], device=device)
    np.testing.assert_array_equal(f64(x[rows]), a[[0, 2, 3]])


def test_mask_get_is_differentiable_in_float64():
    x = ampcore.tensor(rnd(3, 4), dtype="float64", requires_grad=True)
    mask = x.detach() > 0
    assert gradcheck(lambda t: t[mask] * t[mask], [x])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_masked_assignment_of_minus_inf_keeps_the_rest_and_their_gradient(device, dtype):
    """The issue's case: ``x[x < v] = -inf`` used to fail with "the truth value of a tensor ... is ambiguous"."""
    a = rnd(3, 6, seed=1)
    w = ampcore.tensor(a, dtype=dtype, device=device, requires_grad=True)
    logits = w * 2.0
    v = logits.detach()[:, 2:3]
    logits[logits < v] = -float("inf")
    ref = f64(w) * 2.0
    keep = ref >= ref[:, 2:3]
    np.testing.assert_array_equal(f64(logits), np.where(keep, ref, -np.inf))
    assert logits.dtype is w.dtype
    ampcore.where(keep_t := logits > -float("inf"), logits, 0.0).sum().backward()
    assert keep_t.numpy().tolist() == keep.tolist()
    np.testing.assert_array_equal(f64(w.grad), np.where(keep, 2.0, 0.0))


def test_masked_assignment_of_a_tensor_sends_gradients_to_both_sides(device):
    a, b = rnd(4, 3, seed=2), rnd(3, seed=3)
    x = ampcore.tensor(a, device=device, requires_grad=True)
    row = ampcore.tensor(b, device=device, requires_grad=True)
    y = x * 1.0
    mask = ampcore.tensor([True, False, False, True], device=device)
    y[mask] = row  # one row broadcast to every selected row: a where, no host read
    expect = a.astype(np.float64).copy()
    expect[[0, 3]] = b
    np.testing.assert_allclose(f64(y), expect, rtol=2.0**-23)
    (y * y).sum().backward()
    np.testing.assert_allclose(f64(row.grad), 2 * 2 * b, rtol=2.0**-22)
    np.testing.assert_allclose(f64(x.grad), np.where(mask.numpy()[:, None], 0.0, 2 * a), rtol=1e-6)


def test_masked_assignment_of_one_value_per_selected_element(device):
    a = rnd(3, 4, seed=4)
    x = ampcore.tensor(a, device=device)
    mask = x > 0
    k = int((a > 0).sum())
    vals = ampcore.tensor(np.arange(k, dtype=np.float32), device=device, requires_grad=True)
    y = x * 1.0
    y[mask] = vals
    expect = a.copy()
    expect[expect > 0] = np.arange(k)
    np.testing.assert_array_equal(y.numpy(), expect)
    (y * ampcore.tensor(np.arange(12.0).reshape(3, 4), device=device)).sum().backward()
    np.testing.assert_array_equal(vals.grad.numpy(), np.arange(12.0).reshape(3, 4)[a > 0])


def test_masked_assignment_is_differentiable_in_float64():
    x = ampcore.tensor(rnd(3, 4), dtype="float64", requires_grad=True)
    v = ampcore.tensor(rnd(4, seed=5), dtype="float64", requires_grad=True)
    mask = ampcore.tensor([True, False, True])

    def f(x, v):
        y = x * 1.0
        y[mask] = v * v
        return y * x

    assert gradcheck(f, [x, v])


def test_masked_get_and_set_under_autocast_keep_the_low_precision_dtype():
    x, w = ampcore.tensor(rnd(4, 4)), ampcore.tensor(rnd(4, 4, seed=6))
    with ampcore.autocast("cpu", dtype=ampcore.bfloat16):
        y = x @ w
        y[y < 0] = ampcore.tensor(0.5)  # a float32 value goes into the bfloat16 tensor
        picked = y[y > 0.25]
    assert y.dtype is ampcore.bfloat16 and picked.dtype is ampcore.bfloat16
    ref = f64(x.to(ampcore.bfloat16) @ w.to(ampcore.bfloat16))
    ref = np.where(ref < 0, 0.5, ref)
    np.testing.assert_array_equal(f64(y), ref)
    np.testing.assert_array_equal(f64(picked), ref[ref > 0.25])


def test_basic_assignment_is_differentiable_in_both_sides():
    x = ampcore.tensor(rnd(3, 4), dtype="float64", requires_grad=True)
    v = ampcore.tensor(rnd(2, seed=7), dtype="float64", requires_grad=True)

    def f(x, v):
        y = x * 1.0
        y[1:, ::2] = v * 2.0  # broadcast over the selected rows
        return y * y

    assert gradcheck(f, [x, v])


def test_assigning_to_a_leaf_that_requires_grad_raises_but_works_under_no_grad():
    x = ampcore.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x[x > -1] = 1.0
    with ampcore.no_grad():
        x[x > -1] = 1.0
    assert x.tolist() == [1.0, 1.0, 1.0] and x.requires_grad


def test_mask_errors_name_the_shapes():
    x = ampcore.zeros(3, 4)
    with pytest.raises(IndexError, match=r"mask of shape \(4,\) does not match .* shape \(3, 4\)"):
        x[ampcore.tensor([True, False, True, True])]
    with pytest.raises(IndexError, match="must be the only index"):
        x[ampcore.tensor([True, False, True]), 0]
    with pytest.raises(ValueError, match=r"shape \(3, 1, 3\) cannot be assigned to the 2 selected"):
        x[ampcore.tensor([True, False, True])] = ampcore.ones(3, 1, 3)
    with pytest.raises(IndexError, match="integer-tensor index"):
        x[ampcore.tensor([0, 1])] = 1.0


def test_mask_get_reads_the_mask_once_and_scalar_set_reads_nothing():
    x = ampcore.tensor(rnd(5))
    mask = x > 0
    with ampcore.count_host_syncs() as syncs:
        x[mask]
    assert syncs.by_reason == {"boolean mask": 1}
    with ampcore.count_host_syncs() as syncs:
        x[mask] = 0.0
    assert syncs.count == 0
