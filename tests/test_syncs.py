"""ampcore.syncs: counting host reads (per reason, nested blocks) and device-side checks deferred to the next
read on their device, to run_deferred_checks, read_with_checks, or an optimizer step."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore import nn, optim, syncs
from ampcore.syncs import MAX_PENDING_CHECKS, count_host_syncs, defer_check, read_with_checks, run_deferred_checks


class CheckFailedError(Exception):
    pass


@pytest.fixture(autouse=True)
def _seed_and_empty_queues():
    ampcore.manual_seed(0)
    syncs._state.pending.clear()
    yield
    syncs._state.pending.clear()  # a test that failed half-way must not leave checks or counters behind
    syncs._state.counters.clear()


def flag(value, device="cpu"):
    return ampcore.tensor(bool(value), device=device)


def failing(message="bad batch"):
    return lambda: CheckFailedError(message)


# --------------------------------------------------------------------------- counting
@pytest.mark.parametrize(
    "read",
    [
        lambda t: t.numpy(),
        lambda t: t.sum().item(),
        lambda t: bool(t.sum() > 0),
        lambda t: t.tolist(),
        lambda t: float(t.sum()),
        lambda t: np.asarray(t),
    ],
    ids=["numpy", "item", "bool", "tolist", "float", "asarray"],
)
def test_each_host_read_counts_once(read):
    t = ampcore.ones(3)
    with count_host_syncs() as counted:
        read(t)
    assert counted.count == 1 and counted.by_reason == {"read": 1}


def test_device_side_ops_are_not_host_syncs():
    a, b = ampcore.randn(4, 3), ampcore.randn(3, 2)
    with count_host_syncs() as counted:
        c = (a @ b).exp().sum(0) * 2.0
        c.to(dtype=ampcore.float64)
    assert counted.count == 0


def test_moves_between_devices_count_with_their_own_reason(register_fake):
    fake = register_fake()
    t = ampcore.ones(2)
    with count_host_syncs() as counted:
        moved = t.to(fake.name)
        moved.numpy()
    assert counted.count == 2 and counted.by_reason == {"move between devices": 1, "read": 1}


def test_nested_blocks_each_count_their_own_reads():
    t = ampcore.ones(2)
    with count_host_syncs() as outer:
        t.numpy()
        with count_host_syncs() as inner:
            t.numpy()
        t.numpy()
    assert (outer.count, inner.count) == (3, 1)


def test_nested_block_with_the_same_count_as_the_outer_one_leaves_the_outer_one_counting():
    """The inner block ends when both counters read 0: it must remove itself, not an equal-looking outer counter."""
    t = ampcore.ones(2)
    with count_host_syncs() as outer:
        with count_host_syncs() as inner:
            pass
        t.numpy()
    assert (outer.count, inner.count) == (1, 0)


def test_counting_stops_after_the_block():
    with count_host_syncs() as counted:
        pass
    ampcore.ones(1).item()
    assert counted.count == 0 and all(c is not counted for c in syncs._state.counters)


# --------------------------------------------------------------------------- deferred checks
def test_a_passing_check_raises_nothing_and_is_read_with_the_next_read():
    defer_check(flag(False), failing())
    t = ampcore.ones(2)
    with count_host_syncs() as counted:
        assert t.numpy().tolist() == [1.0, 1.0]
    assert counted.by_reason == {"checks": 1, "read": 1}
    assert not syncs._state.pending.get(t.device)


def test_defer_check_itself_makes_no_host_sync_and_calls_nothing():
    built = []
    with count_host_syncs() as counted:
        defer_check(flag(True), lambda: built.append(1) or CheckFailedError("x"))
    assert counted.count == 0 and built == []


def test_a_failed_check_raises_at_the_next_read_on_its_device_then_is_cleared():
    defer_check(flag(True), failing("target 7 out of range"))
    t = ampcore.ones(2)
    with pytest.raises(CheckFailedError, match="target 7 out of range"):
        t.numpy()
    assert t.numpy().tolist() == [1.0, 1.0]  # reported once


def test_all_queued_checks_are_read_in_one_transfer_and_the_first_failure_raises():
    for i in range(5):
        defer_check(flag(i in (2, 4)), failing(f"check {i}"))
    with count_host_syncs() as counted:
        with pytest.raises(CheckFailedError, match="check 2"):
            ampcore.ones(1).item()
    assert counted.by_reason == {"checks": 1}
    ampcore.ones(1).item()  # the whole queue was cleared, check 4 included


def test_a_check_on_one_device_waits_for_a_read_on_that_device(register_fake):
    fake = register_fake()
    defer_check(flag(True, device=fake.name), failing("on the fake device"))
    assert ampcore.ones(2).numpy().tolist() == [1.0, 1.0]  # a cpu read does not look at it
    with pytest.raises(CheckFailedError, match="on the fake device"):
        ampcore.ones(2, device=fake.name).numpy()


def test_run_deferred_checks_raises_a_failure_and_clears_the_queue():
    defer_check(flag(True), failing("found by run_deferred_checks"))
    with pytest.raises(CheckFailedError, match="found by run_deferred_checks"):
        run_deferred_checks()
    run_deferred_checks()


def test_run_deferred_checks_with_nothing_queued_makes_no_host_sync():
    with count_host_syncs() as counted:
        run_deferred_checks()
        run_deferred_checks(ampcore.device("cpu"))
    assert counted.count == 0


def test_run_deferred_checks_for_all_devices(register_fake):
    fake = register_fake()
    defer_check(flag(False), failing("cpu"))
    defer_check(flag(True, device=fake.name), failing("fake"))
    with count_host_syncs() as counted:
        with pytest.raises(CheckFailedError, match="fake"):
            run_deferred_checks()
    assert counted.count == 2


def test_read_with_checks_returns_the_values_in_one_transfer():
    defer_check(flag(False), failing())
    values = ampcore.tensor([1.5, -2.0, 0.25])
    with count_host_syncs() as counted:
        host = read_with_checks(values)
    assert host.tolist() == [1.5, -2.0, 0.25] and host.dtype == np.float32
    assert counted.count == 1 and counted.by_reason == {"values and checks": 1}


def test_read_with_checks_raises_a_failed_check_and_clears_it():
    defer_check(flag(True), failing("raised with the values"))
    with pytest.raises(CheckFailedError, match="raised with the values"):
        read_with_checks(ampcore.tensor([1.0]))
    assert read_with_checks(ampcore.tensor([2.0])).tolist() == [2.0]


def test_read_with_checks_of_nothing_returns_none():
    assert read_with_checks(None, ampcore.device("cpu")) is None


def test_the_queue_is_read_eagerly_when_it_reaches_max_pending_checks():
    with count_host_syncs() as counted:
        for _ in range(MAX_PENDING_CHECKS - 1):
            defer_check(flag(False), failing())
        assert counted.count == 0
        defer_check(flag(False), failing())
        assert counted.by_reason == {"checks": 1}
    assert not syncs._state.pending.get(ampcore.device("cpu"))


def test_a_failure_in_a_full_queue_raises_from_defer_check():
    for _ in range(MAX_PENDING_CHECKS - 1):
        defer_check(flag(False), failing())
    with pytest.raises(CheckFailedError, match="the last one"):
        defer_check(flag(True), failing("the last one"))


def test_optimizer_step_raises_a_deferred_failure_before_changing_parameters():
    model = nn.Linear(3, 2)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    (model(ampcore.randn(4, 3)) ** 2).sum().backward()
    before = [p.numpy().copy() for p in model.parameters()]
    defer_check(flag(True), failing("bad batch"))
    with pytest.raises(CheckFailedError, match="bad batch"):
        opt.step()
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)
    assert not opt.state or all(not s for s in opt.state.values())
    opt.step()  # cleared: the next step runs
    assert not np.array_equal(model.weight.numpy(), before[0])


def test_the_queue_is_per_thread():
    import threading

    defer_check(flag(True), failing("main thread"))
    seen = []
    worker = threading.Thread(target=lambda: seen.append(ampcore.ones(1).item()))
    worker.start()
    worker.join()
    assert seen == [1.0]
    with pytest.raises(CheckFailedError, match="main thread"):
        run_deferred_checks()
