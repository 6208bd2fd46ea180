"""ampcore.utils.data: Dataset, TensorDataset, Subset, random_split, DataLoader and default_collate."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import ampcore
from ampcore.utils.data import (
    DataLoader,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)


def _xy(n=10):
    x = ampcore.arange(n * 3, dtype=ampcore.float32).reshape(n, 3)
    return x, ampcore.arange(n)


def test_tensor_dataset_rows_and_size_check():
    x, y = _xy()
    ds = TensorDataset(x, y)
    assert len(ds) == 10
    xi, yi = ds[4]
    assert xi.tolist() == [12.0, 13.0, 14.0] and yi.item() == 4
    with pytest.raises(ValueError, match=r"Size mismatch between tensors: first dimensions \[10, 9\]"):
        TensorDataset(x, y[:9])


@pytest.mark.parametrize(("drop_last", "sizes"), [(False, [4, 4, 2]), (True, [4, 4])])
def test_batches_in_order_with_and_without_drop_last(drop_last, sizes):
    x, y = _xy()
    loader = DataLoader(TensorDataset(x, y), batch_size=4, drop_last=drop_last)
    batches = list(loader)
    assert len(loader) == len(sizes) and [b[1].shape[0] for b in batches] == sizes
    assert [v for _, yb in batches for v in yb.tolist()] == list(range(sum(sizes)))
    assert batches[0][0].numpy().tobytes() == x[:4].numpy().tobytes() and batches[0][1].dtype == ampcore.int64


def test_shuffle_is_a_permutation_reproducible_with_manual_seed_and_new_each_epoch():
    x, y = _xy(20)
    loader = DataLoader(TensorDataset(x, y), batch_size=6, shuffle=True)

    def epoch():
        return [v for _, yb in loader for v in yb.tolist()]

    ampcore.manual_seed(0)
    first, second = epoch(), epoch()
    ampcore.manual_seed(0)
    assert epoch() == first and epoch() == second
    assert sorted(first) == list(range(20)) and first != list(range(20)) and first != second
    gen = ampcore.Generator(5)
    a = [v for _, yb in DataLoader(TensorDataset(x, y), batch_size=6, shuffle=True, generator=gen) for v in yb.tolist()]
    gen.manual_seed(5)
    b = [v for _, yb in DataLoader(TensorDataset(x, y), batch_size=6, shuffle=True, generator=gen) for v in yb.tolist()]
    assert a == b


def test_the_tensor_dataset_fast_path_equals_stacking_rows():
    x, y = _xy(7)
    fast = list(DataLoader(TensorDataset(x, y), batch_size=3))
    slow = list(DataLoader(TensorDataset(x, y), batch_size=3, collate_fn=default_collate))
    for (fx, fy), (sx, sy) in zip(fast, slow):
        assert fx.numpy().tobytes() == sx.numpy().tobytes() and fy.numpy().tobytes() == sy.numpy().tobytes()


class Pairs(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"x": np.full(2, i, np.float32), "n": i, "w": i / 2, "name": f"s{i}", "flag": i % 2 == 0}


def test_default_collate_numbers_arrays_strings_and_dicts():
    batch = next(iter(DataLoader(Pairs(), batch_size=3)))
    assert batch["x"].shape == (3, 2) and batch["x"].dtype == ampcore.float32
    assert batch["n"].dtype == ampcore.int64 and batch["n"].tolist() == [0, 1, 2]
    assert batch["w"].dtype == ampcore.float64 and batch["w"].tolist() == [0.0, 0.5, 1.0]
    assert batch["name"] == ["s0", "s1", "s2"] and batch["flag"].dtype == ampcore.bool_


def test_default_collate_tuples_become_lists_and_namedtuples_stay():
    point = namedtuple("Point", "a b")
    out = default_collate([point(ampcore.ones(2), 1), point(ampcore.zeros(2), 2)])
    assert type(out) is point and out.a.shape == (2, 2) and out.b.tolist() == [1, 2]
    out = default_collate([(ampcore.ones(1), 3), (ampcore.ones(1), 4)])
    assert isinstance(out, list) and out[1].tolist() == [3, 4]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="found object"):
        default_collate([object()])


def test_batch_size_none_yields_samples_and_custom_collate_is_used():
    assert [s["n"] for s in DataLoader(Pairs(), batch_size=None)] == [0, 1, 2, 3, 4]
    assert list(DataLoader(Pairs(), batch_size=2, collate_fn=len)) == [2, 2, 1]


def test_iterable_dataset_and_sampler():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(5))

    assert [b.tolist() for b in DataLoader(Stream(), batch_size=2)] == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Stream(), shuffle=True)
    assert [b.tolist() for b in DataLoader(list(range(10)), batch_size=2, sampler=[9, 1, 4])] == [[9, 1], [4]]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Pairs(), sampler=[0], shuffle=True)


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="batch_size=0"):
        DataLoader(Pairs(), batch_size=0)
    with pytest.raises(ValueError, match="num_workers=-1"):
        DataLoader(Pairs(), num_workers=-1)
    DataLoader(Pairs(), num_workers=4, pin_memory=True)  # accepted for torch code; loading stays in this process


def test_random_split_and_subset():
    x, y = _xy(10)
    ampcore.manual_seed(1)
    a, b = random_split(TensorDataset(x, y), [0.7, 0.3])
    assert (len(a), len(b)) == (7, 3) and isinstance(a, Subset)
    assert sorted(a.indices + b.indices) == list(range(10))
    ampcore.manual_seed(1)
    again, _ = random_split(TensorDataset(x, y), [7, 3])
    assert again.indices == a.indices and a[0][1].item() == a.indices[0]
    with pytest.raises(ValueError, match="does not equal the length"):
        random_split(TensorDataset(x, y), [5, 4])


def test_a_training_loop_over_a_data_loader():
    ampcore.manual_seed(0)
    x = ampcore.randn(32, 4)
    y = (x.sum(dim=1) > 0).long()
    model = ampcore.nn.Linear(4, 2)
    opt = ampcore.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(5):
        for xb, yb in DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True):
            opt.zero_grad()
            loss = ampcore.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
