"""Concurrency: autocast state is per thread, the plugin registry and its caches survive a cold start from
several threads at once, and GradScalers used from different threads do not interfere."""

from __future__ import annotations

import json
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ampcore
from ampcore import nn
from ampcore.nn import functional as F
from ampcore.plugins.registry import Registry

N_THREADS = 8
TIMEOUT = 30.0


def run_threads(targets: list[Callable[[], Any]]) -> list[Any]:
    """Run each target in its own thread; return results, re-raising the first exception of any thread."""
    results: list[Any] = [None] * len(targets)
    errors: list[BaseException] = []

    def wrap(i: int, fn: Callable[[], Any]) -> None:
        try:
            results[i] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(i, fn), daemon=True) for i, fn in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a thread hung (deadlock?)"
    if errors:
        raise errors[0]
    return results


# --------------------------------------------------------------------------- autocast is per thread
# (autocast kwargs or None for no region, dtype expected of a lower-precision op, of a float32-list op)
AUTOCAST_THREADS = {
    "bfloat16": ({"dtype": "bfloat16"}, ampcore.bfloat16),
    "float16": ({"dtype": "float16"}, ampcore.float16),
    "disabled": ({"dtype": "float16", "enabled": False}, ampcore.float32),
    "no region": (None, ampcore.float32),
}
STEPS = 6


def test_autocast_state_is_per_thread_while_ops_interleave():
    rng = np.random.default_rng(0)
    shared_w = nn.Parameter(ampcore.tensor(rng.standard_normal((8, 8)).astype(np.float32)))  # same weight in all
    x = ampcore.tensor(rng.standard_normal((4, 8)).astype(np.float32))
    barrier = threading.Barrier(len(AUTOCAST_THREADS), timeout=TIMEOUT)

    def worker(kwargs: dict | None, low: ampcore.DType) -> list[tuple]:
        seen = []

        def steps() -> None:
            for _ in range(STEPS):
                barrier.wait()  # every thread does its step i between the same two barriers
                y = ampcore.matmul(x, shared_w)  # lower-precision list: the region's dtype
                barrier.wait()
                z = F.linear(x, shared_w)  # weight-cast cache in play
                s = F.mse_loss(y, y)  # float32 list on cpu: float32 even from y in low
                seen.append(
                    (
                        y.dtype,
                        z.dtype,
                        s.dtype,
                        ampcore.is_autocast_enabled("cpu"),
                        ampcore.get_autocast_dtype("cpu") if kwargs and kwargs.get("enabled", True) else None,
                    )
                )

        if kwargs is None:
            steps()
        else:
            with ampcore.autocast("cpu", **kwargs):
                steps()
        seen.append(ampcore.is_autocast_enabled("cpu"))  # closed again after the region
        return seen

    results = run_threads([lambda kw=kw, low=low: worker(kw, low) for kw, low in AUTOCAST_THREADS.values()])
    for (name, (kwargs, low)), seen in zip(AUTOCAST_THREADS.items(), results):
        enabled = kwargs is not None and kwargs.get("enabled", True)
        expected_dtype = ampcore.dtypes.as_dtype(kwargs["dtype"]) if enabled else None
        assert seen[:-1] == [(low, low, ampcore.float32, enabled, expected_dtype)] * STEPS, name
        assert seen[-1] is False, name
    assert not ampcore.is_autocast_enabled("cpu")  # the main thread never saw any of those regions


def test_autocast_region_in_main_thread_is_not_inherited_by_a_new_thread():
    x = ampcore.ones(2, 2)
    with ampcore.autocast("cpu", dtype="float16"):
        (inside,) = run_threads([lambda: (ampcore.is_autocast_enabled("cpu"), ampcore.matmul(x, x).dtype)])
        assert ampcore.matmul(x, x).dtype == ampcore.float16
    assert inside == (False, ampcore.float32)


# --------------------------------------------------------------------------- cold registry from N threads
def test_fresh_registry_first_used_from_many_threads_loads_each_plugin_once():
    reg = Registry()
    loads: dict[str, int] = {}
    original = reg._load_entry_point

    def slow_load(ep):  # widen the race window: a second loader would overlap this one
        loads[ep.name] = loads.get(ep.name, 0) + 1
        time.sleep(0.05)
        return original(ep)

    reg._load_entry_point = slow_load
    barrier = threading.Barrier(N_THREADS, timeout=TIMEOUT)
    ops = [
        lambda: reg.resolve("cpu"),
        lambda: reg.get_backend("cpu"),
        lambda: reg.default_device(),
        lambda: reg.available(),
    ]

    def worker(i: int) -> Any:
        barrier.wait()
        return ops[i % len(ops)]()

    results = run_threads([lambda i=i: worker(i) for i in range(N_THREADS)])
    assert loads and all(n == 1 for n in loads.values()), loads
    assert not reg.broken, reg.broken
    assert list(reg.records).count("cpu") == 1
    backend = reg.records["cpu"].backend
    assert all(r is backend for r in results[1::4])  # every thread got the one backend object
    assert all(r == ampcore.device("cpu") for r in results[0::4])
    assert all([b.name for b in r] == [b.name for b in results[3]] for r in results[3::4])


COLD_START = textwrap.dedent("""
    import json, sys, threading, time
    import ampcore.plugins.registry
    regmod = sys.modules["ampcore.plugins.registry"]  # the module (the package's ``registry`` is the instance)
    tensormod = sys.modules["ampcore.tensor"]

    N = {n}
    loads, caps_calls = {{}}, []
    original = regmod.Registry._load_entry_point
    def slow_load(self, ep):
        loads[ep.name] = loads.get(ep.name, 0) + 1
        time.sleep(0.05)
        return original(self, ep)
    regmod.Registry._load_entry_point = slow_load

    import ampcore
    import numpy as np
    from ampcore.nn import functional as F
    barrier = threading.Barrier(N, timeout=30)
    out, errors = [None] * N, []
    def work(i):
        try:
            barrier.wait()
            dev = ampcore.get_default_device() if i % 2 else ampcore.plugins.resolve_device("cpu")
            x = ampcore.arange(12, dtype="float32", device="cpu").reshape(3, 4) / 7.0
            dtypes = []
            for d in ("float16", "bfloat16", "float32", "float64"):
                y = x.to(dtype=d)
                with ampcore.autocast("cpu", dtype="float16" if i % 2 else "bfloat16"):
                    z = F.softmax(ampcore.matmul(y.float(), y.float().t()), dim=-1)
                dtypes.append((y.dtype.name, z.dtype.name, float(z.sum().item())))
            out[i] = [str(dev), dtypes]
        except BaseException as exc:
            errors.append(repr(exc))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(N)]
    for t in threads: t.start()
    for t in threads: t.join(60)
    reg = regmod.registry
    print(json.dumps({{"errors": errors, "alive": sum(t.is_alive() for t in threads), "loads": loads,
                      "broken": [b.name for b in reg.broken], "backends": list(reg.records),
                      "caps": sorted(map(list, tensormod._caps_cache)), "out": out}}))
""")


def test_cold_interpreter_first_use_from_many_threads_is_consistent(run_python):
    proc = run_python(COLD_START.format(n=N_THREADS))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["errors"] == [] and report["alive"] == 0, report
    assert report["loads"] and all(n == 1 for n in report["loads"].values()), report["loads"]
    assert report["broken"] == []
    assert report["backends"].count("cpu") == 1
    assert ["cpu", 0] in report["caps"] and len(report["caps"]) == len({tuple(c) for c in report["caps"]})
    devices = {got[0] for got in report["out"]}
    assert devices in ({"cpu"}, {"cpu:0"}), devices
    for i, got in enumerate(report["out"]):
        region = "float16" if i % 2 else "bfloat16"  # softmax is unlisted on cpu: it runs in matmul's dtype
        assert [d[:2] for d in got[1]] == [[d, region] for d in ("float16", "bfloat16", "float32", "float64")], i
        same_region = report["out"][i % 2]
        assert [d[2] for d in got[1]] == [d[2] for d in same_region[1]], i  # bit-identical values
        assert [d[2] for d in got[1]] == pytest.approx([3.0] * 4, rel=1e-2)  # softmax rows sum to 1


def test_capabilities_lookup_from_many_threads_gives_one_consistent_answer(register_fake):
    fake = register_fake()
    barrier = threading.Barrier(N_THREADS, timeout=TIMEOUT)

    def worker() -> Any:
        barrier.wait()
        t = ampcore.ones(3, device=fake.name)
        return (t * 2.0).numpy().tolist(), ampcore.tensor([1.0], device=fake.name).to(dtype="float16").dtype

    results = run_threads([worker] * N_THREADS)
    assert results == [([2.0, 2.0, 2.0], ampcore.float16)] * N_THREADS


# --------------------------------------------------------------------------- GradScaler from two threads
def _scaler_run(seed: int, poison_every: int, barrier: threading.Barrier | None) -> dict:
    """A few float16 training steps with a scaler of its own; every ``poison_every``-th loss is inf."""
    rng = np.random.default_rng(seed)
    model = nn.Linear(4, 2)
    with ampcore.no_grad():
        model.weight.copy_(ampcore.tensor(rng.standard_normal((2, 4)).astype(np.float32)))
        model.bias.copy_(ampcore.tensor(rng.standard_normal(2).astype(np.float32)))
    opt = ampcore.optim.SGD(model.parameters(), lr=0.1)
    scaler = ampcore.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    x = ampcore.tensor(rng.standard_normal((8, 4)).astype(np.float32))
    stepped, scales = [], []
    for step in range(10):
        if barrier is not None:
            barrier.wait()
        opt.zero_grad()
        with ampcore.autocast("cpu", dtype="float16"):
            loss = model(x).float().pow(2).mean()
        if poison_every and step % poison_every == poison_every - 1:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        if barrier is not None:
            barrier.wait()
        stepped.append(scaler.step(opt))
        scaler.update()
        scales.append(scaler.get_scale())
    return {
        "stepped": stepped,
        "scales": scales,
        "skips": [not s for s in stepped],
        "params": [p.detach().numpy().tobytes() for p in model.parameters()],
    }


def test_grad_scalers_in_two_threads_follow_their_own_trajectories():
    alone = [_scaler_run(1, 3, None), _scaler_run(2, 0, None)]
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    together = run_threads([lambda: _scaler_run(1, 3, barrier), lambda: _scaler_run(2, 0, barrier)])
    assert alone[0]["scales"] != alone[1]["scales"]  # the two runs are distinguishable
    assert sum(alone[0]["skips"]) == 3 and not any(alone[1]["skips"])
    for a, b in zip(alone, together):
        assert b["scales"] == a["scales"]
        assert b["skips"] == a["skips"]
        assert b["params"] == a["params"]  # bit-identical to running alone
