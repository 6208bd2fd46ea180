"""ampcore.utils.data.DataLoader (dataloader.py, worker.py): torch's options and checks, and worker processes."""

from __future__ import annotations

import os

import numpy as np
import pytest

import ampcore
from ampcore.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
    default_convert,
    get_worker_info,
)


class Squares(Dataset):
    """Sample i is (i, i*i) as NumPy arrays; records which process made it."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        return np.array([i], dtype=np.int64), np.array([i * i, os.getpid()], dtype=np.int64)


class Stream(IterableDataset):
    """0..n-1, sharded between workers by get_worker_info(), as torch's docs show."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))

    def __len__(self):
        return self.n


class Failing(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise KeyError(f"no sample {i}")
        return i


def _firsts(loader):
    return [int(v) for x, _ in loader for v in x.numpy().ravel()]


def test_batch_sampler_and_sampler_options_as_torch():
    loader = DataLoader(Squares(), batch_sampler=BatchSampler(SequentialSampler(range(12)), 5, False))
    assert [x.shape[0] for x, _ in loader] == [5, 5, 2] and len(loader) == 3
    assert loader.batch_size is None and loader.drop_last is False
    sampled = DataLoader(Squares(), batch_size=4, sampler=RandomSampler(range(12), replacement=True, num_samples=8))
    assert len(sampled) == 2 and len(_firsts(sampled)) == 8
    unbatched = list(DataLoader(Squares(), batch_size=None))
    assert len(unbatched) == 12 and isinstance(unbatched[3], list) and unbatched[3][0].tolist() == [3]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option is mutually exclusive"),
        ({"sampler": [0], "shuffle": True}, "sampler option is mutually exclusive with shuffle"),
        ({"batch_size": None, "drop_last": True}, "mutually exclusive with drop_last"),
        ({"num_workers": -1}, "num_workers option should be non-negative"),
        ({"prefetch_factor": 2}, "prefetch_factor option could only be specified in multiprocessing"),
        ({"persistent_workers": True}, "persistent_workers option needs num_workers > 0"),
        ({"timeout": -1}, "timeout option should be non-negative"),
    ],
)
def test_contradicting_options_raise_torchs_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(Squares(), **kwargs)


def test_an_iterable_dataset_refuses_a_sampler_and_batches_in_order():
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified shuffle, sampler"):
        DataLoader(Stream(5), shuffle=True)
    batches = [b.tolist() for b in DataLoader(Stream(7), batch_size=3)]
    assert batches == [[0, 1, 2], [3, 4, 5], [6]] and len(DataLoader(Stream(7), batch_size=3)) == 3


def test_attributes_that_define_the_order_are_frozen_after_construction():
    loader = DataLoader(Squares(), batch_size=2)
    with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader is initialized"):
        loader.batch_size = 3
    loader.num_workers = 0  # the others may change, as in torch


def test_getitems_fetches_a_batch_in_one_call():
    class Batched(Squares):
        calls = 0

        def __getitems__(self, indices):
            Batched.calls += 1
            return [self[i] for i in indices]

    assert len(list(DataLoader(Batched(), batch_size=4))) == 3 and Batched.calls == 3


def test_concat_dataset_and_default_convert():
    both = ConcatDataset([Squares(), TensorDataset(ampcore.arange(3))])
    assert len(both) == 15 and both[12][0].item() == 0 and both[-1][0].item() == 2 and both[11][0].tolist() == [11]
    converted = default_convert((np.arange(3), "name", 4))
    assert isinstance(converted, list) and converted[0].tolist() == [0, 1, 2] and converted[1:] == ["name", 4]


# --------------------------------------------------------------------------- worker processes
def test_workers_are_other_processes_and_yield_the_in_process_order():
    ampcore.manual_seed(0)
    in_process = _firsts(DataLoader(Squares(), batch_size=4))
    loader = DataLoader(Squares(), batch_size=4, num_workers=2)
    batches = list(loader)
    assert [int(v) for x, _ in batches for v in x.numpy().ravel()] == in_process
    pids = {int(y.numpy()[i, 1]) for _, y in batches for i in range(y.shape[0])}
    assert os.getpid() not in pids and len(pids) == 2


def test_shuffled_order_with_workers_is_the_samplers_order():
    ampcore.manual_seed(5)
    plain = _firsts(DataLoader(Squares(), batch_size=3, shuffle=True, generator=ampcore.Generator(1)))
    workers = _firsts(DataLoader(Squares(), batch_size=3, shuffle=True, generator=ampcore.Generator(1), num_workers=2))
    assert sorted(plain) == list(range(12))
    # one base-seed draw per pass with or without workers, as torch: the sampler's order does not change
    assert workers == plain


def _record_worker(worker_id):
    info = get_worker_info()
    assert info is not None and info.id == worker_id and info.num_workers == 2
    np.save(os.path.join(os.environ["AMPCORE_TEST_WORKER_DIR"], f"w{worker_id}.npy"), np.random.randint(0, 2**31, 4))


def test_worker_init_fn_runs_in_each_worker_seeded_differently(tmp_path, monkeypatch):
    monkeypatch.setenv("AMPCORE_TEST_WORKER_DIR", str(tmp_path))
    list(DataLoader(Squares(), batch_size=4, num_workers=2, worker_init_fn=_record_worker))
    first, second = np.load(tmp_path / "w0.npy"), np.load(tmp_path / "w1.npy")
    assert not np.array_equal(first, second)  # NumPy's global generator is seeded per worker, as in torch


def test_an_iterable_dataset_is_read_by_every_worker_and_sharded_by_worker_info():
    loader = DataLoader(Stream(10), batch_size=2, num_workers=2)
    values = sorted(v for b in loader for v in b.tolist())
    assert values == list(range(10))


def test_persistent_workers_serve_several_epochs_and_an_abandoned_epoch_does_not_leak():
    loader = DataLoader(Squares(), batch_size=2, num_workers=2, persistent_workers=True, prefetch_factor=3)
    first = iter(loader)
    next(first)  # abandon this epoch early: its prefetched batches must not reach the next one
    pids = set()
    for _ in range(2):
        batches = list(loader)
        assert [int(v) for x, _ in batches for v in x.numpy().ravel()] == list(range(12))
        pids |= {int(y.numpy()[i, 1]) for _, y in batches for i in range(y.shape[0])}
    assert len(pids) == 2  # the same two processes both epochs
    loader._pool.shutdown()


def test_an_error_in_a_worker_is_raised_in_the_main_process_naming_the_worker():
    with pytest.raises(KeyError, match=r"(?s)Caught KeyError in DataLoader worker process \d.*no sample 5"):
        list(DataLoader(Failing(), batch_size=2, num_workers=2))


def test_a_worker_that_dies_is_reported_not_waited_for():
    class Dies(Squares):
        def __getitem__(self, i):
            if i == 6:
                os._exit(3)
            return super().__getitem__(i)

    with pytest.raises(RuntimeError, match=r"DataLoader worker\(s\) pid \d+ \(exit code 3\) exited unexpectedly"):
        list(DataLoader(Dies(), batch_size=2, num_workers=2))


def test_tensors_made_in_a_worker_are_cpu_tensors():
    class Made(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return ampcore.full((2,), float(i))

    batch = next(iter(DataLoader(Made(), batch_size=4, num_workers=1)))
    assert batch.device.type == "cpu" and batch[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_spawned_worker_gets_the_data_set_by_pickling_and_out_of_order_mode_yields_everything():
    loader = DataLoader(Squares(), batch_size=3, num_workers=1, multiprocessing_context="spawn", in_order=False)
    assert sorted(_firsts(loader)) == list(range(12))
    tensors = DataLoader(TensorDataset(ampcore.arange(6)), batch_size=4, num_workers=1, multiprocessing_context="spawn")
    assert [b[0].tolist() for b in tensors] == [[0, 1, 2, 3], [4, 5]]
