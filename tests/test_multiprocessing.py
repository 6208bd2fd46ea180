"""ampcore.multiprocessing.spawn: fn(i, *args) in new processes, a child's exception raised in the parent."""

from __future__ import annotations

import pytest

import ampcore.multiprocessing as mp


def _square_into(i, queue):
    queue.put((i, i * i))


def _fail_on_one(i):
    if i == 1:
        raise ValueError("deliberate failure in process 1")


def test_spawn_runs_fn_with_its_index_in_each_process():
    queue = mp.get_context("spawn").SimpleQueue()
    assert mp.spawn(_square_into, args=(queue,), nprocs=2) is None
    assert sorted([queue.get(), queue.get()]) == [(0, 0), (1, 1)]


def test_an_exception_in_a_process_is_raised_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException, match="deliberate failure in process 1") as err:
        mp.spawn(_fail_on_one, nprocs=2)
    assert err.value.error_index == 1 and "Traceback" in str(err.value)


def test_join_false_returns_the_context():
    context = mp.start_processes(_fail_on_one, nprocs=1, join=False)
    assert len(context.pids()) == 1 and context.join() is True
    with pytest.raises(ValueError, match="nprocs must be a positive int"):
        mp.spawn(_fail_on_one, nprocs=0)
