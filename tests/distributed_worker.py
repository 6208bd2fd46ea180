"""What each rank runs in tests/test_distributed.py: ``mpiexec -n N python distributed_worker.py OUT SCENARIO...``.

Each scenario saves its results per rank to ``OUT/<scenario>.rank<R>.pkl``; the
test compares ranks with each other and with a single process.  The model,
data and single-process reference live here so both sides share them.
"""

from __future__ import annotations

import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import ampcore
from ampcore import nn, optim
from ampcore.nn import functional as F

IN, HIDDEN, OUT_FEATURES, PER_RANK = 8, 16, 4, 4
LR = 0.05
MODEL_SEED = 100


def build_model(seed: int = MODEL_SEED) -> nn.Module:
    ampcore.manual_seed(seed)
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT_FEATURES))


def global_batch(step: int, world: int, micro: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The batch of every rank at ``step`` (rank r's rows are r*PER_RANK ...): the same on every rank."""
    rng = np.random.default_rng(1000 * step + micro)
    x = rng.standard_normal((PER_RANK * world, IN)).astype(np.float32)
    y = rng.integers(0, OUT_FEATURES, PER_RANK * world)
    return x, y


def local_batch(step: int, world: int, rank: int, micro: int = 0) -> tuple[ampcore.Tensor, ampcore.Tensor]:
    x, y = global_batch(step, world, micro)
    rows = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
    return ampcore.tensor(x[rows]), ampcore.tensor(y[rows])


def params_of(model: nn.Module) -> list[np.ndarray]:
    return [p.numpy().copy() for p in model.parameters()]


def state_of(opt: Any) -> dict:
    return {
        i: {k: (v.numpy().copy() if isinstance(v, ampcore.Tensor) else v) for k, v in st.items()}
        for i, st in enumerate(opt.state.values())
    }


def reference_sgd(world: int, steps: int) -> list[np.ndarray]:
    """One process, the concatenated batch of every rank, float32: what DDP must match."""
    model = build_model()
    opt = optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    for step in range(steps):
        x, y = global_batch(step, world)
        opt.zero_grad()
        F.cross_entropy(model(ampcore.tensor(x)), ampcore.tensor(y)).backward()
        opt.step()
    return params_of(model)


def reference_grads(world: int, micro_batches: int) -> list[np.ndarray]:
    """The mean-loss gradient of one big batch: every rank's micro-batches together."""
    model = build_model()
    xs, ys = zip(*(global_batch(0, world, m) for m in range(micro_batches)))
    F.cross_entropy(model(ampcore.tensor(np.concatenate(xs))), ampcore.tensor(np.concatenate(ys))).backward()
    return [p.grad.numpy().copy() for p in model.parameters()]


# ---------------------------------------------------------------------------------------------- scenarios
def train_sgd(dist: Any, rank: int, world: int, zero: bool) -> dict:
    model = build_model(MODEL_SEED + rank)  # each rank starts elsewhere: the wrap must broadcast rank 0's
    ddp = dist.DistributedDataParallel(model, bucket_cap_mb=0.0005)  # ~500 bytes: several buckets
    opt = (
        dist.ZeroRedundancyOptimizer(ddp.parameters(), optim.SGD, lr=LR, momentum=0.9)
        if zero
        else optim.SGD(ddp.parameters(), lr=LR, momentum=0.9)
    )
    for step in range(4):
        x, y = local_batch(step, world, rank)
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
    return {"params": params_of(model), "buckets": len(ddp.buckets)}


def train_sgd_ddp(dist: Any, rank: int, world: int) -> dict:
    return train_sgd(dist, rank, world, zero=False)


def train_sgd_zero(dist: Any, rank: int, world: int) -> dict:
    return train_sgd(dist, rank, world, zero=True)


INF_STEPS = {"loss": 1, "grad": 4}
STEPS = 6


def inject_inf(dist: Any, rank: int, world: int, zero: bool) -> dict:
    """float16 AMP with inf on the last rank only: in its loss at step 1, in one gradient after the reduce at 4."""
    model = build_model()
    ddp = dist.DistributedDataParallel(model)
    if zero:
        opt: Any = dist.ZeroRedundancyOptimizer(ddp.parameters(), optim.AdamW, lr=1e-2)
        scaler = ampcore.GradScaler("cpu", growth_interval=2)  # the sharded optimizer brings its group
    else:
        opt = optim.AdamW(ddp.parameters(), lr=1e-2)
        scaler = ampcore.GradScaler("cpu", growth_interval=2, process_group=dist.get_communicator())
    sick = world - 1
    record: dict[str, list] = {
        "stepped": [],
        "scale": [],
        "params": [params_of(model)],
        "state": [state_of(opt)],
        "host_reads": [],
    }
    for step in range(STEPS):
        x, y = local_batch(step, world, rank)
        opt.zero_grad()
        with ampcore.autocast("cpu", dtype="float16"):
            loss = F.cross_entropy(ddp(x), y)
        if rank == sick and step == INF_STEPS["loss"]:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        if rank == sick and step == INF_STEPS["grad"]:
            p = opt.param_groups[0]["params"][0]  # under ZeRO, this rank's shard: no other rank checks it
            p.grad = p.grad * float("inf")
        with ampcore.count_host_syncs() as syncs:
            stepped = scaler.step(opt)
        scaler.update()
        record["host_reads"].append(syncs.by_reason.get("values and checks", 0))
        record["stepped"].append(stepped)
        record["scale"].append(scaler.get_scale())
        record["params"].append(params_of(model))
        record["state"].append(state_of(opt))
    return record


def inf_ddp(dist: Any, rank: int, world: int) -> dict:
    return inject_inf(dist, rank, world, zero=False)


def inf_zero(dist: Any, rank: int, world: int) -> dict:
    return inject_inf(dist, rank, world, zero=True)


MICRO = 3


def no_sync(dist: Any, rank: int, world: int) -> dict:
    """Gradient accumulation: micro-batches 0..MICRO-2 under no_sync, the last one reduces everything."""
    model = build_model()
    ddp = dist.DistributedDataParallel(model)
    stats = dist.get_communicator().stats
    calls_before = stats.calls
    for m in range(MICRO):
        x, y = local_batch(0, world, rank, micro=m)
        if m < MICRO - 1:
            with ddp.no_sync():
                F.cross_entropy(ddp(x), y).backward()
        else:
            reduces_before = stats.calls
            F.cross_entropy(ddp(x), y).backward()
            last_calls = stats.calls - reduces_before
    return {
        "grads": [p.grad.numpy() / MICRO for p in model.parameters()],
        "calls_inside_no_sync": reduces_before - calls_before,
        "calls_last": last_calls,
        "buckets": len(ddp.buckets),
    }


def _amp_run(dist: Any, rank: int, world: int, steps: range, state: dict | None, seed: int) -> tuple:
    model = build_model(seed)
    if state is not None:
        model.load_state_dict(state["model"])
    ddp = dist.DistributedDataParallel(model)
    opt = dist.ZeroRedundancyOptimizer(ddp.parameters(), optim.AdamW, lr=1e-2)
    scaler = ampcore.GradScaler("cpu", init_scale=2.0**14, growth_interval=2)
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
    for step in steps:
        x, y = local_batch(step, world, rank)
        opt.zero_grad()
        with ampcore.autocast("cpu", dtype="float16"):
            loss = F.cross_entropy(ddp(x), y)
        if step == 4 and rank == 0:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return model, opt, scaler


def checkpoint(dist: Any, rank: int, world: int) -> dict:
    """Six steps straight, versus three, a checkpoint (rank 0 saves, pickled), fresh objects, three more."""
    straight, _, s1 = _amp_run(dist, rank, world, range(6), None, MODEL_SEED)
    model, opt, scaler = _amp_run(dist, rank, world, range(3), None, MODEL_SEED)
    opt.consolidate_state_dict(to=0)
    blob = (
        pickle.dumps({"model": model.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict()})
        if rank == 0
        else None
    )
    blob = dist.get_communicator().broadcast_object(blob, 0)
    resumed, _, s2 = _amp_run(dist, rank, world, range(3, 6), pickle.loads(blob), MODEL_SEED + 7)
    return {
        "straight": params_of(straight),
        "resumed": params_of(resumed),
        "scaler": (s1.state_dict(), s2.state_dict()),
    }


def reshard(dist: Any, rank: int, world: int) -> dict:
    """A ZeRO checkpoint of this job, loaded by a job of another size (the ranks 0..world-2 of a split)."""
    _, opt, _ = _amp_run(dist, rank, world, range(2), None, MODEL_SEED)
    opt.consolidate_state_dict(to=0)
    blob = dist.get_communicator().broadcast_object(pickle.dumps(opt.state_dict()) if rank == 0 else None, 0)
    smaller = dist.get_communicator().split(0 if rank < world - 1 else 1)
    model = build_model()
    other = dist.ZeroRedundancyOptimizer(model.parameters(), optim.AdamW, lr=1e-2, process_group=smaller)
    other.load_state_dict(pickle.loads(blob))
    other.consolidate_state_dict(to=0)
    if smaller.rank != 0 or rank == world - 1:
        return {}
    original, again = pickle.loads(blob), other.state_dict()
    same = all(
        np.array_equal(original["state"][k][key].numpy(), again["state"][k][key].numpy())
        if isinstance(original["state"][k][key], ampcore.Tensor)
        else original["state"][k][key] == v
        for k in original["state"]
        for key, v in again["state"][k].items()
    )
    return {
        "sizes": (world, smaller.size),
        "same": same and original["state"].keys() == again["state"].keys(),
        "state_keys": sorted(again["state"][0]),
    }


def mismatch(dist: Any, rank: int, world: int) -> dict:
    """Ranks that disagree: every rank must raise at wrap time (none may hang)."""
    errors = {}
    hidden = HIDDEN + (rank == world - 1)
    ampcore.manual_seed(0)
    odd = nn.Sequential(nn.Linear(IN, hidden), nn.ReLU(), nn.Linear(hidden, OUT_FEATURES))
    for name, make in [
        ("model", lambda: dist.DistributedDataParallel(odd)),
        ("bucket", lambda: dist.DistributedDataParallel(build_model(), bucket_cap_mb=25 + rank)),
        (
            "scaler",
            lambda: ampcore.GradScaler("cpu", growth_interval=2000 + rank, process_group=dist.get_communicator()),
        ),
        (
            "optimizer",
            lambda: dist.ZeroRedundancyOptimizer(build_model().parameters(), optim.AdamW, lr=1e-3 * (1 + (rank == 1))),
        ),
        (
            "dtype",
            lambda: dist.get_communicator().check_consistent(
                "autocast", {"dtype": "float16" if rank == 0 else "bfloat16"}
            ),
        ),
    ]:
        try:
            make()
        except ValueError as err:
            errors[name] = str(err)
    return {"errors": errors}


def errors(dist: Any, rank: int, world: int) -> dict:
    """Bad calls raise on every rank alike, before any collective, so none is left waiting."""
    found = {}
    ints = ampcore.tensor([1, 2, 3])
    zero = dist.ZeroRedundancyOptimizer(build_model().parameters(), optim.SGD, lr=0.1)
    for name, call in [
        ("avg of ints", lambda: dist.all_reduce(ints, "avg")),
        ("unknown op", lambda: dist.all_reduce(ampcore.ones(2), "prod")),
        ("bad src", lambda: dist.broadcast(ampcore.ones(2), src=world)),
        ("short list", lambda: dist.all_gather([ampcore.ones(2)], ampcore.ones(2))),
        ("state before consolidate", lambda: zero.state_dict()),
        ("foreign state dict", lambda: zero.load_state_dict({"state": {}, "param_groups": [], "flat_sizes": []})),
        ("not an optimizer", lambda: dist.ZeroRedundancyOptimizer(build_model().parameters(), object)),
    ]:
        try:
            call()
        except (TypeError, ValueError, RuntimeError) as err:
            found[name] = f"{type(err).__name__}: {err}"
    found["sum of ints"] = dist.all_reduce(ints, "sum").numpy().tolist()
    return found


def backends(dist: Any, rank: int, world: int) -> dict:
    """Collectives and a DDP + ZeRO float16 AMP run on every available backend other than cpu (host-staged)."""
    found: dict[str, Any] = {}
    for backend in ampcore.available_backends():
        if backend.name == "cpu":
            continue
        device = backend.name
        checks = {}
        for dtype in ("float32", "float16", "bfloat16"):
            mine = ampcore.tensor(np.arange(6, dtype=np.float32) * (rank + 1) - 2.5, dtype=dtype, device=device)
            checks[dtype] = {
                "sum": dist.all_reduce(mine.clone(), "sum").numpy().astype(np.float64),
                "max": dist.all_reduce(mine.clone(), "max").numpy().astype(np.float64),
                "bcast": dist.broadcast(mine.clone(), src=world - 1).numpy().astype(np.float64),
                "gather": [g.numpy().astype(np.float64) for g in dist.all_gather(None, mine)],
                "device": str(dist.all_reduce(mine.clone(), "sum").device),
            }
        model = build_model(MODEL_SEED + rank).to(device)
        ddp = dist.DistributedDataParallel(model)
        opt = dist.ZeroRedundancyOptimizer(ddp.parameters(), optim.AdamW, lr=1e-2)
        scaler = ampcore.GradScaler(device)
        for step in range(3):
            x, y = local_batch(step, world, rank)
            opt.zero_grad()
            with ampcore.autocast(device, dtype="float16"):
                loss = F.cross_entropy(ddp(x.to(device)), y.to(device))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        found[device] = {"checks": checks, "params": params_of(model)}
    return found


def fail(dist: Any, rank: int, world: int) -> dict:
    """Rank 1 raises at step 2 while the others wait in the gradient all-reduce."""
    model = build_model()
    ddp = dist.DistributedDataParallel(model)
    for step in range(50):
        if rank == 1 and step == 2:
            raise RuntimeError("deliberate failure on rank 1")
        x, y = local_batch(step, world, rank)
        F.cross_entropy(ddp(x), y).backward()
    return {}


def hang(dist: Any, rank: int, world: int) -> dict:
    """Rank 1 stops calling collectives (stuck); the others' watchdog must abort the job."""
    model = build_model()
    ddp = dist.DistributedDataParallel(model)
    if rank == 1:
        time.sleep(600)
    x, y = local_batch(0, world, rank)
    F.cross_entropy(ddp(x), y).backward()
    return {}


def main(argv: list[str]) -> None:
    import ampcore.distributed as dist

    out, scenarios = Path(argv[0]), argv[1:]
    timeout = 3.0 if "hang" in scenarios else 60.0
    dist.init(timeout=timeout)
    rank, world = dist.rank(), dist.world_size()
    for name in scenarios:
        result = globals()[name](dist, rank, world)
        (out / f"{name}.rank{rank}.pkl").write_bytes(pickle.dumps(result))


class CountingPath:
    """A DevicePath for cpu tensors that reduces through the host-value collective and counts its calls."""

    def __init__(self, group: Any) -> None:
        self.group, self.calls = group, 0

    def all_reduce(self, array: np.ndarray, dtype: Any, op: str) -> np.ndarray:
        self.calls += 1
        return self.group.all_reduce_host(np.asarray(array), op).astype(array.dtype)

    def broadcast(self, array: np.ndarray, dtype: Any, src: int) -> np.ndarray:
        self.calls += 1
        return self.group.broadcast_object(np.asarray(array), src)

    def all_gather(self, array: np.ndarray, dtype: Any) -> list[np.ndarray]:
        self.calls += 1
        return self.group.all_gather_object(np.asarray(array))


def device_path(dist: Any, rank: int, world: int) -> dict:
    """The DevicePath hook: with a path registered for cpu, DDP's traffic takes it and trains the same."""
    group = dist.get_communicator()
    path = type("Path", (CountingPath, dist.DevicePath), {})(group)
    group.set_device_path("cpu", path)
    try:
        through_path = train_sgd(dist, rank, world, zero=True)["params"]
    finally:
        group.set_device_path("cpu", None)
    staged = train_sgd(dist, rank, world, zero=True)["params"]
    return {"calls": path.calls, "same": all(np.array_equal(a, b) for a, b in zip(through_path, staged))}


if __name__ == "__main__":
    main(sys.argv[1:])
