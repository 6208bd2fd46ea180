"""multinomial, randint and randperm (ampcore/creation.py): torch's signatures, the generator, manual_seed."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore


@pytest.fixture(params=["cpu", "fake"])
def device(request, register_fake) -> str:
    """The cpu backend, and a third-party backend with only the primitive kernels (the reference compositions)."""
    return "cpu" if request.param == "cpu" else register_fake().name


def _within_sampling_error(counts: np.ndarray, probs: np.ndarray, draws: int) -> None:
    """Each category's frequency within 5 standard deviations of its probability (a false alarm ~1e-6)."""
    sigma = np.sqrt(probs * (1 - probs) / draws)
    np.testing.assert_array_less(np.abs(counts / draws - probs), 5 * sigma + 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_multinomial_with_replacement_follows_the_weights(device, dtype):
    if dtype == "float64" and device != "cpu":
        pytest.skip("the fake backend stores no float64")
    weights = np.array([[1.0, 0.0, 6.0, 3.0], [2.0, 2.0, 2.0, 2.0]])
    ampcore.manual_seed(1)
    draws = 20000
    out = ampcore.multinomial(ampcore.tensor(weights, dtype=dtype, device=device), draws, replacement=True)
    assert out.shape == (2, draws) and out.dtype is ampcore.int64
    for row, w in zip(out.numpy(), weights):
        _within_sampling_error(np.bincount(row, minlength=4), w / w.sum(), draws)


def test_multinomial_without_replacement_draws_distinct_categories_by_weight(device):
    weights = np.array([5.0, 0.0, 3.0, 1.0, 1.0], dtype=np.float32)
    w = ampcore.tensor(weights, device=device)
    ampcore.manual_seed(2)
    firsts, trials = [], 4000
    for _ in range(trials // 100):
        batch = ampcore.multinomial(w.expand(100, 5), 4)  # 4 of the 4 non-zero categories, in some order
        rows = batch.numpy()
        assert all(sorted(r) == [0, 2, 3, 4] for r in rows)
        firsts.extend(rows[:, 0])
    _within_sampling_error(np.bincount(firsts, minlength=5), weights / weights.sum(), trials)
    single = ampcore.multinomial(w, 1)
    assert single.shape == (1,) and single.item() != 1


def test_same_seed_same_draws_and_a_generator_of_its_own(device):
    p = ampcore.tensor([0.2, 0.3, 0.5], device=device)

    def draw(**kw):
        return (
            ampcore.multinomial(p, 8, replacement=True, **kw).tolist(),
            ampcore.multinomial(p, 2, **kw).tolist(),
            ampcore.randint(3, 17, (4,), device=device, **kw).tolist(),
            ampcore.randperm(9, device=device, **kw).tolist(),
        )

    ampcore.manual_seed(7)
    first = draw()
    ampcore.manual_seed(7)
    assert draw() == first
    assert draw(generator=ampcore.Generator(7)) == draw(generator=ampcore.Generator(7))
    assert draw() != first  # the stream moved on


def test_randint_takes_torchs_two_forms_and_covers_the_range(device):
    ampcore.manual_seed(3)
    a = ampcore.randint(5, (2000,), device=device)
    b = ampcore.randint(-3, 4, size=(10, 200), device=device, dtype=ampcore.int32)
    assert a.dtype is ampcore.int64 and b.dtype is ampcore.int32 and b.shape == (10, 200)
    assert set(a.tolist()) == {0, 1, 2, 3, 4}
    assert set(np.unique(b.numpy()).tolist()) == set(range(-3, 4))
    big = ampcore.randint(2**40, 2**40 + 3, (100,), device=device)  # exact beyond float precision
    assert set(big.tolist()) <= {2**40, 2**40 + 1, 2**40 + 2}
    ampcore.manual_seed(3)
    keywords = ampcore.randint(low=0, high=5, size=(2000,), device=device)
    assert keywords.tolist() == a.tolist()  # the same draws as randint(5, (2000,))
    assert (
        ampcore.randint(high=3, size=(4,)).shape == (4,) and ampcore.randint(2, high=3, size=(4,)).tolist() == [2] * 4
    )
    f = ampcore.randint(0, 2, (8,), dtype=ampcore.float32, device=device)
    assert f.dtype is ampcore.float32 and set(f.tolist()) <= {0.0, 1.0}


def test_randperm_is_a_permutation(device):
    ampcore.manual_seed(4)
    p = ampcore.randperm(50, device=device)
    assert p.dtype is ampcore.int64 and sorted(p.tolist()) == list(range(50))
    assert ampcore.randperm(0, device=device).shape == (0,)


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="low must be less than high, got low=4, high=4"):
        ampcore.randint(4, 4, (2,))
    with pytest.raises(TypeError, match=r"randint\(\) takes \(high, size\) or \(low, high, size\)"):
        ampcore.randint(4)
    with pytest.raises(ValueError, match="n must be a non-negative int, got -1"):
        ampcore.randperm(-1)
    p = ampcore.tensor([1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="cannot draw 4 samples without replacement from 3 categories"):
        ampcore.multinomial(p, 4)
    with pytest.raises(TypeError, match="1-D or 2-D floating tensor"):
        ampcore.multinomial(ampcore.tensor([1, 2]), 1)


def test_bad_weights_raise_at_the_next_read_as_device_asserts_do():
    for weights, message in [
        ([1.0, -1.0], "finite and non-negative"),
        ([1.0, float("nan")], "finite and non-negative"),
        ([0.0, 0.0], "sums to zero"),
    ]:
        out = ampcore.multinomial(ampcore.tensor(weights), 1, replacement=True)
        with pytest.raises(ValueError, match=message):
            out.tolist()
    with pytest.raises(ValueError, match="fewer non-zero weights than the 2 samples"):  # topk's read raises it
        ampcore.multinomial(ampcore.tensor([1.0, 0.0, 0.0]), 2).tolist()


def test_sampling_with_replacement_reads_nothing_from_the_device():
    p = ampcore.tensor([[0.1, 0.9]])
    with ampcore.count_host_syncs() as syncs:
        ampcore.multinomial(p, 3, replacement=True)
        ampcore.multinomial(p, 1)
    assert syncs.count == 0


def test_multinomial_is_also_a_tensor_method():
    ampcore.manual_seed(9)
    a = ampcore.tensor([0.0, 2.0, 0.0]).multinomial(3, replacement=True)
    assert a.tolist() == [1, 1, 1]
