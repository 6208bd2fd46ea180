"""detect_overflow(): the opt-in debug mode that names the first op whose output went non-finite, forward or
backward, and makes a skipped GradScaler step say where its inf/NaN came from."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import ampcore
from ampcore import nn, optim
from ampcore.amp import OverflowRecord, detect_overflow
from ampcore.nn import functional as F


def model_and_data(scale: float, seed: int = 0):
    ampcore.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = ampcore.tensor(np.random.default_rng(seed).standard_normal((4, 8)) * scale, dtype=ampcore.float32)
    return model, x, ampcore.tensor([0, 1, 2, 3])


def skipped_step_warnings(model, x, y, watch_on: bool = True) -> tuple[bool, list[str], detect_overflow]:
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = ampcore.GradScaler("cpu")
    watch = detect_overflow()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if watch_on:
            watch.__enter__()
        try:
            with ampcore.autocast("cpu", dtype="float16"):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            stepped = scaler.step(opt)
        finally:
            if watch_on:
                watch.__exit__(None, None, None)
    return stepped, [str(w.message) for w in caught if "GradScaler skipped" in str(w.message)], watch


def test_forward_overflow_names_the_primitive_and_the_layer_it_ran_in():
    model, x, _ = model_and_data(scale=1e5)  # beyond float16's 65504 once cast: the cast itself overflows
    with detect_overflow() as watch, ampcore.autocast("cpu", dtype="float16"):
        model(x)
    first = watch.first
    assert isinstance(first, OverflowRecord) and first.phase == "forward"
    assert first.op == "cast" and first.within == ("linear",)
    assert first.inputs == ("float32[4, 8]",) and first.outputs == ("float16[4, 8]",)
    assert "'cast' inside 'linear', forward, on cpu: float32[4, 8] -> float16[4, 8]" in str(first)


def test_backward_overflow_from_the_loss_scale_is_named_by_the_skipped_step():
    model, x, y = model_and_data(scale=3000.0)  # the forward fits in float16; the scaled gradients do not
    stepped, messages, watch = skipped_step_warnings(model, x, y)
    assert stepped is False
    assert len(messages) == 1 and "'matmul' inside 'linear', backward" in messages[0]
    assert watch.first is None, "the report resets the watch, so the next skip is reported afresh"


def test_a_step_skipped_because_the_input_was_already_non_finite_says_so():
    model, x, y = model_and_data(scale=1.0)
    x = ampcore.tensor(np.where(np.arange(32).reshape(4, 8) == 5, np.inf, x.numpy()), dtype=ampcore.float32)
    stepped, messages, _ = skipped_step_warnings(model, x, y)
    assert stepped is False and len(messages) == 1 and "already non-finite" in messages[0]


def test_off_by_default_no_warning_and_no_extra_host_syncs():
    model, x, y = model_and_data(scale=3000.0)
    with ampcore.count_host_syncs() as syncs:
        stepped, messages, _ = skipped_step_warnings(model, x, y, watch_on=False)
    assert stepped is False and messages == []
    assert "overflow-debug" not in syncs.by_reason


def test_clean_step_records_nothing_and_checks_are_counted_as_host_syncs():
    model, x, y = model_and_data(scale=1.0)
    with ampcore.count_host_syncs() as syncs:
        stepped, messages, watch = skipped_step_warnings(model, x, y)
    assert stepped is True and messages == [] and watch.records == []
    assert syncs.by_reason["overflow-debug"] > 10


def test_the_watch_is_per_thread():
    model, x, _ = model_and_data(scale=1e5)
    seen: dict[str, object] = {}
    ready = threading.Barrier(2)

    def watcher() -> None:
        with detect_overflow() as watch:
            ready.wait()
            ready.wait()  # the other thread overflows in between
            seen["watch"] = watch.first

    def overflower() -> None:
        ready.wait()
        with ampcore.autocast("cpu", dtype="float16"):
            model(x)
        ready.wait()

    threads = [threading.Thread(target=watcher), threading.Thread(target=overflower)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["watch"] is None


def test_limit_must_be_a_positive_int():
    with pytest.raises(ValueError, match="limit must be a positive int, got 0"):
        detect_overflow(limit=0)


def test_boundaries_pop_what_they_pushed_when_another_thread_toggles_watching_mid_op():
    """_watching is global: another thread can close and reopen its watch while this thread is inside ops."""
    from ampcore import dispatch

    def inner_body():
        dispatch.watching_changed(+1)  # another thread opens a watch while 'inner' runs
        return "done"

    def outer_body():
        dispatch.watching_changed(-1)  # ... after closing one while 'outer' ran
        result = dispatch.route("inner", inner_body, (), {})
        assert dispatch.boundary_stack() == ("outer",), "'inner' pushed nothing, so it must pop nothing"
        return result

    dispatch.watching_changed(+1)
    try:
        assert dispatch.route("outer", outer_body, (), {}) == "done"
        assert dispatch.boundary_stack() == ()
    finally:
        dispatch.watching_changed(-1)
