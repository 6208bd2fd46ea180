"""ampcore.distributed on 2 and 3 MPI ranks on one machine: DDP, ZeRO-1, the scaler's agreed skip, checkpoints, faults.

Each world size is launched once (``mpiexec``, every scenario of
tests/distributed_worker.py in one job); the tests below compare what the ranks
saved with each other and with one process on the concatenated batch.  Every
launch has a timeout, and the fault tests bound how long a broken job may take.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import distributed_worker as worker
import numpy as np
import pytest

from ampcore.distributed.ddp import _plan_buckets
from ampcore.distributed.launch import mpiexec_command, rank_environment
from ampcore.distributed.zero import shard_range

pytest.importorskip("mpi4py", reason="the mpi extra is not installed: pip install 'ampcore[mpi]'")

WORKER = Path(__file__).with_name("distributed_worker.py")
SCENARIOS = [
    "train_sgd_ddp",
    "train_sgd_zero",
    "inf_ddp",
    "inf_zero",
    "no_sync",
    "checkpoint",
    "mismatch",
    "device_path",
    "errors",
    "reshard",
    "backends",
]
EPS32 = float(np.finfo(np.float32).eps)
LAUNCH_TIMEOUT = 120  # seconds: the 2- and 3-rank jobs take 2-4 s on the 2-core CI machine


def launch(world: int, out: Path, *scenarios: str, timeout: float = LAUNCH_TIMEOUT) -> subprocess.CompletedProcess:
    env = rank_environment(world)
    env["PYTHONPATH"] = os.pathsep.join([str(WORKER.parent), env.get("PYTHONPATH", "")])
    command = mpiexec_command(world, [sys.executable, str(WORKER), str(out), *scenarios])
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module", params=[2, 3], ids=["2ranks", "3ranks"])
def job(request: Any, tmp_path_factory: Any) -> tuple[int, Any]:
    world = request.param
    out = tmp_path_factory.mktemp(f"ranks{world}")
    done = launch(world, out, *SCENARIOS)
    assert done.returncode == 0, done.stdout + done.stderr

    def results(scenario: str) -> list[dict]:
        return [pickle.loads((out / f"{scenario}.rank{r}.pkl").read_bytes()) for r in range(world)]

    return world, results


def assert_same_on_every_rank(per_rank: list[list[np.ndarray]]) -> None:
    for rank, arrays in enumerate(per_rank[1:], start=1):
        for i, (a, b) in enumerate(zip(per_rank[0], arrays)):
            assert np.array_equal(a, b), f"parameter {i} differs between rank 0 and rank {rank}"


@pytest.mark.parametrize("scenario", ["train_sgd_ddp", "train_sgd_zero"])
def test_parameters_bit_identical_on_every_rank_and_equal_one_process_on_the_whole_batch(
    job: Any, scenario: str
) -> None:
    world, results = job
    ranks = results(scenario)
    assert ranks[0]["buckets"] > 1  # a small bucket cap: the fixed bucket order is exercised
    assert_same_on_every_rank([r["params"] for r in ranks])
    reference = worker.reference_sgd(world, steps=4)
    # float32 sums reordered (per-rank means averaged vs one mean): error <= n * eps * |value|, with n the
    # longest reduction in a gradient (global batch + hidden width).
    n = worker.PER_RANK * world + worker.HIDDEN
    for got, want in zip(ranks[0]["params"], reference):
        np.testing.assert_allclose(got, want, rtol=0, atol=n * EPS32 * np.abs(want).max())


@pytest.mark.parametrize("scenario", ["inf_ddp", "inf_zero"])
def test_inf_on_one_rank_skips_the_same_steps_everywhere_and_touches_nothing(job: Any, scenario: str) -> None:
    world, results = job
    ranks = results(scenario)
    skipped = sorted(worker.INF_STEPS.values())
    for rank, r in enumerate(ranks):
        assert [s for s in range(worker.STEPS) if not r["stepped"][s]] == skipped, f"rank {rank}"
        assert r["host_reads"] == [1] * worker.STEPS  # the agreed skip decision is still one host read
        for s in skipped:  # record index s + 1 is after step s
            for before, after in zip(r["params"][s], r["params"][s + 1]):
                assert np.array_equal(before, after), f"rank {rank} changed a parameter in skipped step {s}"
            assert pickle.dumps(r["state"][s]) == pickle.dumps(r["state"][s + 1]), f"rank {rank} state at step {s}"
    scales = [r["scale"] for r in ranks]
    assert all(s == scales[0] for s in scales)  # bit-identical scale on every rank
    assert scales[0][1] == scales[0][0] / 2 and scales[0][4] == scales[0][3] / 2  # backed off where skipped
    for step in range(worker.STEPS + 1):
        assert_same_on_every_rank([r["params"][step] for r in ranks])


def test_zero_keeps_an_even_slice_of_the_optimizer_state_per_rank(job: Any) -> None:
    world, results = job
    total = sum(p.size for p in results("inf_zero")[0]["params"][0])
    sizes = []
    for r in results("inf_zero"):
        [state] = r["state"][-1].values()  # one flat slice: one group, one dtype
        assert state["exp_avg"].shape == state["exp_avg_sq"].shape
        sizes.append(state["exp_avg"].size)
    assert sum(sizes) == total and max(sizes) == -(-total // world)


def test_no_sync_accumulation_equals_one_big_batch(job: Any) -> None:
    world, results = job
    ranks = results("no_sync")
    for r in ranks:
        assert r["calls_inside_no_sync"] == 0 and r["calls_last"] == r["buckets"]
    assert_same_on_every_rank([r["grads"] for r in ranks])
    reference = worker.reference_grads(world, worker.MICRO)
    n = worker.PER_RANK * world * worker.MICRO + worker.HIDDEN
    for got, want in zip(ranks[0]["grads"], reference):
        np.testing.assert_allclose(got, want, rtol=0, atol=n * EPS32 * np.abs(want).max())


def test_resume_from_checkpoint_is_bit_identical_to_an_uninterrupted_run(job: Any) -> None:
    world, results = job
    for rank, r in enumerate(results("checkpoint")):
        for i, (a, b) in enumerate(zip(r["straight"], r["resumed"])):
            assert np.array_equal(a, b), f"rank {rank}: parameter {i} differs after resuming"
        straight, resumed = r["scaler"]
        assert straight == resumed and straight["skipped_steps"] == 1


def test_a_zero_checkpoint_loads_into_a_job_of_another_size(job: Any) -> None:
    world, results = job
    r = results("reshard")[0]
    assert r["sizes"] == (world, world - 1)
    assert r["same"] and r["state_keys"] == ["exp_avg", "exp_avg_sq", "step"]


def test_mismatched_configurations_raise_on_every_rank_at_wrap_time(job: Any) -> None:
    world, results = job
    for rank, r in enumerate(results("mismatch")):
        errors = r["errors"]
        assert set(errors) == {"model", "bucket", "scaler", "optimizer", "dtype"}, f"rank {rank}: {errors}"
        assert f"rank {world - 1} has 'shape (17, 8)" in errors["model"]
        assert "'growth_interval': rank 0 has 2000, rank 1 has 2001" in errors["scaler"]
        assert "'dtype': rank 0 has 'float16', rank 1 has 'bfloat16'" in errors["dtype"]
        assert "bucket_cap_mb" in errors["bucket"] and "lr" in errors["optimizer"]


def test_a_registered_device_path_carries_the_tensor_collectives(job: Any) -> None:
    world, results = job
    for r in results("device_path"):
        # per step 2 bucket all-reduces + 1 ZeRO all-gather, 4 steps; plus the 4 parameter broadcasts at wrap
        assert r["calls"] == 4 * 3 + 4 and r["same"]


def test_bad_collective_calls_raise_naming_the_value_and_the_fix(job: Any) -> None:
    world, results = job
    for found in results("errors"):
        assert found["avg of ints"] == (
            "TypeError: all_reduce(op='avg') needs a floating tensor, got int64; use op='sum'"
        )
        assert found["unknown op"].startswith("ValueError: unknown reduce op 'prod'; use one of 'sum'")
        assert found["bad src"] == (
            f"ValueError: rank {world} is not in this communicator of {world} rank(s); use 0..{world - 1}"
        )
        assert f"must hold {world} tensor(s) of shape (2,)" in found["short list"]
        assert "call consolidate_state_dict(to=rank) on every rank first" in found["state before consolidate"]
        assert found["foreign state dict"].startswith("StateDictError: the state dict was saved for flat parameter")
        assert "optimizer_class must be an ampcore.optim.Optimizer subclass" in found["not an optimizer"]
        assert found["sum of ints"] == [world, 2 * world, 3 * world]


def test_collectives_and_training_on_the_other_backends_through_the_host(job: Any) -> None:
    world, results = job
    ranks = results("backends")
    if not ranks[0]:
        pytest.skip("no backend other than cpu is available here (the test command installs opencl)")
    every = [np.arange(6, dtype=np.float64) * (r + 1) - 2.5 for r in range(world)]  # what rank r holds
    for device in ranks[0]:
        for dtype, eps in [("float32", 2.0**-23), ("float16", 2.0**-10), ("bfloat16", 2.0**-7)]:
            for r in ranks:
                c = r[device]["checks"][dtype]
                assert c["device"].startswith(device)
                # each rank's input is rounded to dtype once; the sum is exact in float32, then rounded once
                np.testing.assert_allclose(c["sum"], np.sum(every, axis=0), rtol=2 * eps, atol=2 * eps * world)
                np.testing.assert_allclose(c["max"], np.max(every, axis=0), rtol=eps, atol=0)
                np.testing.assert_allclose(c["bcast"], every[-1], rtol=eps, atol=0)
                for got, want in zip(c["gather"], every):
                    np.testing.assert_allclose(got, want, rtol=eps, atol=0)
        assert_same_on_every_rank([r[device]["params"] for r in ranks])


def test_a_rank_that_raises_ends_the_job_promptly_naming_it(tmp_path: Path) -> None:
    start = time.monotonic()
    done = launch(2, tmp_path, "fail", timeout=60)
    elapsed = time.monotonic() - start
    assert done.returncode != 0
    assert "rank 1 of 2 raised RuntimeError: deliberate failure on rank 1" in done.stderr
    assert elapsed < 30


def test_a_stuck_rank_is_aborted_by_the_others_watchdog(tmp_path: Path) -> None:
    start = time.monotonic()
    done = launch(2, tmp_path, "hang", timeout=60)  # the worker sets a 3 s collective timeout
    elapsed = time.monotonic() - start
    assert done.returncode != 0
    assert "rank 0 of 2 waited" in done.stderr and "all_reduce" in done.stderr
    assert elapsed < 30


def test_import_ampcore_and_ampcore_distributed_do_not_import_mpi4py() -> None:
    code = "import sys, ampcore, ampcore.distributed; print('mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_buckets_follow_reverse_parameter_order_and_the_cap() -> None:
    import ampcore

    named = [(f"p{i}", ampcore.zeros(n)) for i, n in enumerate([10, 20, 30, 40])]  # float32: 4 bytes each
    buckets = _plan_buckets(named, cap_bytes=200)
    assert [b.names for b in buckets] == [("p3",), ("p2", "p1"), ("p0",)]
    assert [b.nbytes for b in buckets] == [160, 200, 40]


def test_zero_slices_cover_the_flat_parameters_once() -> None:
    for total, size in [(10, 3), (2, 3), (7, 1), (1_863_690, 2)]:
        ranges = [shard_range(total, size, r) for r in range(size)]
        assert ranges[0][0] == 0 and ranges[-1][1] == total
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert max(e - s for s, e in ranges) == -(-total // size)


def test_bad_launch_and_setup_arguments_name_the_fix() -> None:
    import ampcore
    import ampcore.distributed as dist
    from ampcore import nn

    with pytest.raises(ValueError, match="positive integer, got 0"):
        mpiexec_command(0, ["x"])
    with pytest.raises(ValueError, match="bucket_cap_mb must be a positive number of megabytes, got -1"):
        dist.DistributedDataParallel(nn.Linear(2, 2), bucket_cap_mb=-1)
    with pytest.raises(TypeError, match="wraps an ampcore.nn.Module, got int"):
        dist.DistributedDataParallel(3)
    if not dist.is_initialized():
        with pytest.raises(RuntimeError, match=r"call ampcore.distributed.init\(\) first"):
            dist.rank()
    with pytest.raises(TypeError, match="an ampcore Tensor, got list"):
        dist.all_reduce([1.0])
    with pytest.raises(
        TypeError,
        match=r"process_group must be an ampcore.distributed communicator \(what "
        r"ampcore.distributed.init\(\) returns\), got int",
    ):
        ampcore.GradScaler("cpu", process_group=3)
    assert ampcore.distributed is dist


def _cli_env(tmp_path: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if tmp_path is not None:  # an mpi4py that cannot be imported, as when the mpi extra is missing
        (tmp_path / "mpi4py").mkdir()
        (tmp_path / "mpi4py" / "__init__.py").write_text("raise ImportError('No module named mpi4py (test)')\n")
        env["PYTHONPATH"] = str(tmp_path)
    return env


def test_train_nproc_launches_mpiexec_and_rank0_reports_collectives() -> None:
    from ampcore import training
    from ampcore.data import load_digits, train_test_split

    command = [
        sys.executable,
        "-m",
        "ampcore",
        "train",
        "--nproc",
        "2",
        "--epochs",
        "1",
        "--dtype",
        "float16",
        "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT, env=_cli_env())
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # one JSON document: only rank 0 prints
    x, y = load_digits()
    train_rows = len(train_test_split(x, y, training.TrainConfig().test_fraction, seed=0)[1])
    assert result["world_size"] == 2 and result["steps"] == train_rows // (2 * training.TrainConfig().batch_size)
    params = 64 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10
    assert result["allreduce_bytes_per_step"] == 4 * params + 4  # float32 gradients + the scaler's found_inf
    assert 0 < result["collective_seconds"] < result["seconds"]
    assert result["host_syncs_by_reason"]["values and checks"] == result["steps"]  # one skip decision per step


def test_train_nproc_without_the_mpi_extra_names_the_fix(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "ampcore", "train", "--nproc", "2", "--epochs", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=_cli_env(tmp_path))
    assert done.returncode == 2
    assert "--nproc needs mpi4py and mpiexec" in done.stderr and "pip install 'ampcore[mpi]'" in done.stderr


def test_the_distributed_guide_examples_run_on_2_ranks(tmp_path: Path) -> None:
    guide = (Path(__file__).resolve().parents[1] / "docs" / "distributed.md").read_text()
    blocks = [b.split("\n", 1)[1] for b in guide.split("```")[1::2] if b.startswith("python\n")]
    script = tmp_path / "guide.py"
    script.write_text("\n".join(blocks))
    done = subprocess.run(
        mpiexec_command(2, [sys.executable, str(script)]),
        env=rank_environment(2),
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["65536.0 0", "['flat_sizes', 'param_groups', 'state']"]
