"""torch.distributed's names over ampcore's MPI layer, and a torchrun-style DDP script run under mpiexec.

examples/torch_ddp/train_ddp.py is written for torchrun against torch; here it runs with ``torch`` renamed to
``ampcore``, on 2 ranks under mpiexec (and through ``python -m ampcore.distributed.run``), and its final
parameters match one process on the concatenated batches, as tests/test_distributed.py checks for DDP.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ampcore.distributed import environment, run
from ampcore.distributed.launch import mpiexec_command, rank_environment

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "torch_ddp" / "train_ddp.py"
EPS32 = float(np.finfo(np.float32).eps)
TIMEOUT = 180


def test_torchrun_variables_are_filled_from_mpichs_and_open_mpis_not_overwritten():
    mpich = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    assert environment.fill_torchrun_variables(mpich) == {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
    }
    ompi = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "RANK": "9"}
    added = environment.fill_torchrun_variables(ompi)
    assert ompi["RANK"] == "9" and added == {"WORLD_SIZE": "4", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4"}
    plain: dict[str, str] = {}
    assert environment.fill_torchrun_variables(plain) == {} and plain == {}


def test_the_launcher_takes_torchruns_command_line(capsys):
    args = run.parse(["--standalone", "--nproc_per_node=3", "train.py", "--epochs", "2"])
    assert args.nproc == 3 and args.script == "train.py" and args.script_args == ["--epochs", "2"]
    assert run.parse(["--nproc-per-node", "2", "--nnodes", "1:1", "-m", "pkg.train"]).module
    for bad, message in [
        (["--nnodes", "2", "t.py"], "ampcore runs one node per launch"),
        (["--nproc-per-node", "auto", "t.py"], "must be a number of processes"),
        (["--max-restarts", "3", "t.py"], "does not restart failed ranks"),
    ]:
        with pytest.raises(SystemExit):
            run.parse(bad)
        assert message in capsys.readouterr().err


ONE_RANK = """
import ampcore, ampcore.distributed as dist
assert dist.is_available() and not dist.is_initialized()
dist.init_process_group(backend="nccl", init_method="env://")
assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1 and dist.get_backend() == "mpi"
t = ampcore.tensor([1.0, 2.0])
work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
assert work.wait() and work.is_completed() and work.result()[0] is t and t.tolist() == [1.0, 2.0]
assert dist.all_reduce(t, op=dist.ReduceOp.SUM) is t and dist.barrier() is None
objects = [None]
dist.all_gather_object(objects, {"rank": 0})
assert objects == [{"rank": 0}]
try:
    dist.init_process_group()
except RuntimeError as err:
    print(err)
dist.destroy_process_group()
assert not dist.is_initialized()
"""


def test_a_one_rank_job_answers_torchs_questions(run_python):
    pytest.importorskip("mpi4py", reason="the mpi extra is not installed: pip install 'ampcore[mpi]'")
    done = run_python(ONE_RANK)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "trying to initialize the default process group twice!"


def test_torchruns_world_size_without_mpiexec_is_refused_naming_the_launch(run_python):
    pytest.importorskip("mpi4py", reason="the mpi extra is not installed: pip install 'ampcore[mpi]'")
    done = run_python(
        "import ampcore.distributed as d; d.init_process_group('gloo')",
        env={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
    )
    assert done.returncode != 0
    assert "WORLD_SIZE=2 in the environment gives world size 2, but this MPI job gives 1" in done.stderr
    assert "mpiexec -n <world size> python script.py (not torchrun)" in done.stderr


# --------------------------------------------------------------------------- the example, renamed
@pytest.fixture(scope="module")
def renamed_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = EXAMPLE.read_text()
    assert "import torch" in text and "ampcore" not in text
    path = tmp_path_factory.mktemp("ddp") / "train_ddp.py"
    path.write_text(re.sub(r"\btorch\b", "ampcore", text))
    return path


def _launch(command: list[str], nproc: int, cwd: Path) -> subprocess.CompletedProcess:
    env = rank_environment(nproc)
    env.pop("RANK", None)  # the ranks take theirs from mpiexec
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)


def test_the_torchrun_script_on_two_ranks_matches_one_process_on_the_whole_batches(renamed_example: Path) -> None:
    pytest.importorskip("mpi4py", reason="the mpi extra is not installed: pip install 'ampcore[mpi]'")
    where = renamed_example.parent
    two = _launch(mpiexec_command(2, [sys.executable, str(renamed_example), "--out", "two.npz"]), 2, where)
    assert two.returncode == 0, two.stdout + two.stderr[-3000:]
    one = _launch(
        mpiexec_command(1, [sys.executable, str(renamed_example), "--batch-size", "16", "--out", "one.npz"]), 1, where
    )
    assert one.returncode == 0, one.stdout + one.stderr[-3000:]
    launcher = [sys.executable, "-m", "ampcore.distributed.run", "--nproc-per-node", "2", str(renamed_example)]
    via_run = _launch([*launcher, "--out", "run.npz"], 2, where)
    assert via_run.returncode == 0, via_run.stdout + via_run.stderr[-3000:]
    assert "world 2: 12 steps" in two.stdout and "world 1: 12 steps" in one.stdout

    ranks2, ranks1, ranks_run = (np.load(where / f"{name}.npz") for name in ("two", "one", "run"))
    assert all(np.array_equal(ranks2[k], ranks_run[k]) for k in ranks2.files)  # the launcher is mpiexec
    # float32 sums reordered (two per-rank means averaged vs one mean over the same 16 rows): per step an error
    # of at most n * eps relative, n the longest reduction (16 rows, 16 hidden units)
    n = 16 + 16
    for key in ranks2.files:
        want = ranks1[key]
        np.testing.assert_allclose(ranks2[key], want, rtol=0, atol=12 * n * EPS32 * max(np.abs(want).max(), 1.0))
    assert ranks2["losses"][-1] < ranks2["losses"][0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_script_is_a_working_torch_script(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    env["MASTER_PORT"] = str(_free_port())
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--batch-size", "16", "--out", str(tmp_path / "torch.npz")],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "world 1: 12 steps" in done.stdout
