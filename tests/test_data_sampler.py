"""ampcore.utils.data's samplers (sampler.py, distributed.py): torch's signatures, defaults, checks and orders."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore.utils.data import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

DATA = list(range(10))


def test_sequential_is_every_index_in_order():
    assert list(SequentialSampler(DATA)) == DATA and len(SequentialSampler(DATA)) == 10


def test_random_without_replacement_is_a_new_permutation_each_pass_reproducible_by_seed():
    sampler = RandomSampler(DATA)
    ampcore.manual_seed(3)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == DATA and sorted(second) == DATA and first != second
    ampcore.manual_seed(3)
    assert list(sampler) == first and list(sampler) == second
    gen = ampcore.Generator(9)
    a = list(RandomSampler(DATA, generator=gen))
    gen.manual_seed(9)
    assert list(RandomSampler(DATA, generator=gen)) == a


def test_random_num_samples_beyond_the_data_chains_whole_permutations():
    drawn = list(RandomSampler(DATA, num_samples=25))
    assert len(drawn) == 25 and len(RandomSampler(DATA, num_samples=25)) == 25
    assert sorted(drawn[:10]) == DATA and sorted(drawn[10:20]) == DATA and len(set(drawn[20:])) == 5


def test_random_with_replacement_draws_uniform_indices_lazily():
    ampcore.manual_seed(0)
    drawn = list(RandomSampler(DATA, replacement=True, num_samples=20000))
    counts = np.bincount(drawn, minlength=10)
    assert counts.sum() == 20000 and min(drawn) >= 0 and max(drawn) <= 9
    # 10 categories, 2000 expected each: a binomial sd of ~42; 6 sd is a generous bound
    assert np.all(np.abs(counts - 2000) < 6 * np.sqrt(20000 * 0.1 * 0.9))
    endless = iter(RandomSampler(DATA, replacement=True, num_samples=10**10))  # makemore's "infinite" loader
    assert all(0 <= next(endless) < 10 for _ in range(3000))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"replacement": 1}, TypeError, "replacement should be a boolean value, but got replacement=1"),
        ({"num_samples": 0}, ValueError, "num_samples should be a positive integer value, but got num_samples=0"),
        ({"num_samples": 2.5}, ValueError, "num_samples=2.5"),
    ],
)
def test_random_sampler_refuses_torchs_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        RandomSampler(DATA, **kwargs)


def test_subset_random_is_a_permutation_of_the_given_indices():
    indices = [3, 5, 7, 9]
    drawn = list(SubsetRandomSampler(indices))
    assert sorted(drawn) == indices and len(SubsetRandomSampler(indices)) == 4


def test_weighted_random_follows_the_weights_and_never_draws_a_zero_weight():
    ampcore.manual_seed(1)
    weights = ampcore.tensor([0.0, 1.0, 3.0])
    drawn = list(WeightedRandomSampler(weights, 8000))
    counts = np.bincount(drawn, minlength=3)
    assert counts[0] == 0 and abs(counts[2] / 8000 - 0.75) < 0.03
    without = list(WeightedRandomSampler([1.0, 1.0, 1.0, 0.0], 3, replacement=False))
    assert sorted(without) == [0, 1, 2]
    with pytest.raises(RuntimeError, match="cannot draw 4 samples without replacement from 3"):
        WeightedRandomSampler([1.0, 1.0, 1.0, 0.0], 4, replacement=False)
    with pytest.raises(ValueError, match=r"weights should be a 1d sequence but given weights have shape \(2, 2\)"):
        WeightedRandomSampler([[1.0, 1.0], [1.0, 1.0]], 2)


@pytest.mark.parametrize(("drop_last", "sizes"), [(False, [4, 4, 2]), (True, [4, 4])])
def test_batch_sampler_groups_and_drops_the_short_last_batch(drop_last, sizes):
    batches = list(BatchSampler(SequentialSampler(DATA), 4, drop_last))
    assert [len(b) for b in batches] == sizes and len(BatchSampler(DATA, 4, drop_last)) == len(sizes)
    assert [i for b in batches for i in b] == DATA[: sum(sizes)]
    with pytest.raises(ValueError, match="batch_size should be a positive integer value, but got batch_size=0"):
        BatchSampler(DATA, 0, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        BatchSampler(DATA, 2, None)


@pytest.mark.parametrize(("n", "world", "drop_last"), [(10, 3, False), (10, 3, True), (12, 4, False), (2, 3, False)])
def test_distributed_shares_are_disjoint_equal_and_cover_the_data(n, world, drop_last):
    data = list(range(n))
    shares = [list(DistributedSampler(data, num_replicas=world, rank=r, drop_last=drop_last)) for r in range(world)]
    sizes = {len(s) for s in shares}
    assert len(sizes) == 1 and len(DistributedSampler(data, num_replicas=world, rank=0, drop_last=drop_last)) in sizes
    union = [i for s in shares for i in s]
    if drop_last:
        assert len(set(union)) == len(union) == (n // world) * world
    else:  # padded with the first indices again, as torch does
        assert set(union) == set(data) and len(union) == -(-n // world) * world


def test_distributed_set_epoch_reshuffles_the_same_way_on_every_rank():
    def order(rank, epoch):
        sampler = DistributedSampler(DATA, num_replicas=2, rank=rank, seed=7)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert order(0, 0) == order(0, 0) and order(0, 0) != order(0, 1)
    assert sorted(order(0, 1) + order(1, 1)) == DATA  # the ranks split one permutation
    plain = DistributedSampler(DATA, num_replicas=2, rank=1, shuffle=False)
    assert list(plain) == [1, 3, 5, 7, 9]


def test_distributed_without_a_process_group_or_with_a_bad_rank_says_so():
    if not ampcore.distributed.is_initialized():
        with pytest.raises(RuntimeError, match="not initialized"):
            DistributedSampler(DATA)
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(DATA, num_replicas=2, rank=2)


def test_torchs_submodule_paths_hold_the_same_classes():
    from ampcore.utils.data.distributed import DistributedSampler as FromDistributed
    from ampcore.utils.data.sampler import RandomSampler as FromSampler

    assert FromDistributed is DistributedSampler and FromSampler is RandomSampler
    assert ampcore.utils.data.dataloader.DataLoader is ampcore.utils.data.DataLoader
    assert ampcore.utils.data.dataset.TensorDataset is ampcore.utils.data.TensorDataset
