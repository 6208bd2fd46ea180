"""split/chunk, tril/triu and sort/argsort/topk (ampcore/ops/shape.py, ampcore/ops/sorting.py) against NumPy float64."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore.testing import gradcheck

EPS = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def f64(t: ampcore.Tensor) -> np.ndarray:
    return np.asarray(t.numpy(), dtype=np.float64)


def rnd(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(params=["cpu", "fake"])
def device(request, register_fake) -> str:
    """The cpu backend, and a third-party backend with only the primitive kernels (the reference compositions)."""
    return "cpu" if request.param == "cpu" else register_fake().name


# --------------------------------------------------------------------------- split / chunk
@pytest.mark.parametrize(
    "n,size,dim", [(7, 3, 0), (6, 2, 1), (5, 5, 0), (4, 9, 1), (6, [1, 0, 5], 1), (7, [7], 0)], ids=str
)
def test_split_matches_numpy_pieces(device, n, size, dim):
    a = rnd(n, 6) if dim == 0 else rnd(3, n)
    a = a if dim == 0 or isinstance(size, int) else rnd(3, 6)
    x = ampcore.tensor(a, device=device)
    length = a.shape[dim]
    sizes = size if isinstance(size, list) else [min(size, length - s) for s in range(0, length, size)]
    bounds = np.cumsum(sizes)[:-1]
    expect = np.split(a, bounds, axis=dim)
    pieces = ampcore.split(x, size, dim)
    assert isinstance(pieces, tuple) and len(pieces) == len(expect)
    for got, want in zip(pieces, expect):
        np.testing.assert_array_equal(got.numpy(), want)
    assert [p.shape for p in x.split(size, dim)] == [p.shape for p in pieces]


@pytest.mark.parametrize("n,chunks", [(6, 3), (7, 3), (5, 2), (2, 4), (3, 6)])
def test_chunk_gives_torchs_piece_sizes(device, n, chunks):
    x = ampcore.tensor(rnd(n, 2), device=device)
    size = -(-n // chunks)
    expect = [min(size, n - s) for s in range(0, n, size)]  # torch.chunk: ceil-sized, possibly fewer pieces
    pieces = x.chunk(chunks)
    assert [p.shape[0] for p in pieces] == expect
    np.testing.assert_array_equal(np.concatenate([p.numpy() for p in pieces]), x.numpy())


def test_split_pieces_carry_gradients_back():
    x = ampcore.tensor(rnd(3, 7).astype(np.float64), requires_grad=True)
    assert gradcheck(lambda t: ampcore.cat([p * float(i + 1) for i, p in enumerate(t.split(3, 1))], 1), [x])
    x.grad = None
    q, k, v = x.chunk(3, 1)
    (q.sum() + 2 * v.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat([[1.0] * 3 + [0.0] * 3 + [2.0]], 3, 0))


def test_split_and_chunk_reject_bad_sizes():
    x = ampcore.zeros(4, 3)
    with pytest.raises(ValueError, match=r"sections \(1, 2\) must be non-negative and add up to 4"):
        x.split([1, 2])
    with pytest.raises(ValueError, match="split_size must be a positive int, got 0"):
        x.split(0)
    with pytest.raises(ValueError, match="chunks must be a positive int, got 0"):
        x.chunk(0)


# --------------------------------------------------------------------------- tril / triu
@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "bool"])
def test_tril_and_triu_match_numpy(device, dtype, diagonal):
    a = rnd(2, 4, 5, seed=diagonal + 5)
    base = a > 0 if dtype == "bool" else (a * 10).astype(np.int64) if dtype == "int64" else a
    x = ampcore.tensor(base, dtype=dtype, device=device)
    ref = x.numpy()
    np.testing.assert_array_equal(ampcore.tril(x, diagonal).numpy(), np.tril(ref, diagonal))
    np.testing.assert_array_equal(x.triu(diagonal).numpy(), np.triu(ref, diagonal))
    assert x.tril(diagonal).dtype is x.dtype


def test_a_causal_mask_from_tril_and_its_gradient():
    x = ampcore.tensor(rnd(4, 4).astype(np.float64), requires_grad=True)
    assert gradcheck(lambda t: ampcore.tril(t) * t, [x])
    assert gradcheck(lambda t: t.triu(1) * 3.0, [x])
    causal = ampcore.tril(ampcore.ones(4, 4)) == 0
    np.testing.assert_array_equal(causal.numpy(), np.triu(np.ones((4, 4), bool), 1))


def test_tril_needs_two_dimensions():
    with pytest.raises(ValueError, match=r"at least 2 dimensions, got shape \(3,\)"):
        ampcore.tril(ampcore.zeros(3))


# --------------------------------------------------------------------------- sort / argsort / topk
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_numpys_stable_sort(device, dtype, dim, descending):
    a = rnd(5, 6, seed=3)
    a = (a * 3).astype(np.int64) if dtype == "int64" else a  # int64: many ties
    x = ampcore.tensor(a, dtype=dtype, device=device)
    ref = f64(x)
    order = np.argsort(-ref if descending else ref, axis=dim, kind="stable")
    values, indices = ampcore.sort(x, dim=dim, descending=descending, stable=True)
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(f64(values), np.take_along_axis(ref, order, dim))
    assert values.dtype is x.dtype and indices.dtype is ampcore.int64
    np.testing.assert_array_equal(x.argsort(dim, descending=descending).numpy(), order)


def test_sort_keeps_equal_elements_in_their_original_order_both_ways():
    x = ampcore.tensor([2.0, 1.0, 2.0, 1.0, 2.0])
    assert x.sort(stable=True).indices.tolist() == [1, 3, 0, 2, 4]
    assert x.sort(descending=True, stable=True).indices.tolist() == [0, 2, 4, 1, 3]
    nan = ampcore.tensor([1.0, float("nan"), -1.0])
    assert nan.sort().indices.tolist() == [2, 0, 1] and nan.sort(descending=True).indices.tolist() == [1, 0, 2]


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_topk_matches_numpy_and_the_gradient_lands_on_the_picked_elements(device, dtype, largest):
    a = rnd(3, 8, seed=4)
    x = ampcore.tensor(a, dtype=dtype, device=device, requires_grad=True)
    ref = f64(x)
    order = np.argsort(-ref if largest else ref, axis=1, kind="stable")[:, :3]
    values, indices = x.topk(3, largest=largest)
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_allclose(f64(values), np.take_along_axis(ref, order, 1), rtol=EPS[dtype])
    (values * 2.0).sum().backward()
    expect = np.zeros_like(ref)
    np.put_along_axis(expect, order, 2.0, 1)
    np.testing.assert_array_equal(f64(x.grad), expect)


def test_sort_and_topk_are_differentiable_in_float64():
    x = ampcore.tensor(rnd(3, 5, seed=8).astype(np.float64), requires_grad=True)
    assert gradcheck(lambda t: t.sort(dim=0).values * t, [x])
    assert gradcheck(lambda t: ampcore.topk(t, 2, dim=1).values ** 2, [x])


def test_topk_picks_the_lower_index_among_ties_and_checks_k():
    x = ampcore.tensor([[1.0, 3.0, 3.0, 0.0, 3.0]])
    assert x.topk(2).indices.tolist() == [[1, 2]]
    assert x.topk(2, largest=False).indices.tolist() == [[3, 0]]
    with pytest.raises(ValueError, match=r"k must be an int in \[0, 5\]"):
        x.topk(6)


def test_sort_reads_the_values_once():
    x = ampcore.tensor(rnd(4, 4))
    with ampcore.count_host_syncs() as syncs:
        x.topk(2)
    assert syncs.by_reason == {"sort": 1}
