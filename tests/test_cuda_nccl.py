"""The NCCL device path of ampcore.distributed (ampcore_cuda.nccl) on a real GPU, in a one-rank MPI job.

Needs CuPy with NCCL, a CUDA device and mpi4py; skips with the reason otherwise (CI has no GPU).  The
device-path interface itself is exercised without a GPU by tests/test_distributed.py (a counting path on cpu).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from ampcore_cuda.plugin import CUDABackend

_status = CUDABackend().availability()
pytestmark = pytest.mark.skipif(not _status.ok, reason=f"no usable CUDA device: {_status.reason}")

SCRIPT = r"""
import numpy as np, ampcore, ampcore.distributed as dist
from ampcore_cuda.nccl import use_nccl
group = dist.init(timeout=60)
use_nccl(group)
x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
for dtype in ("float32", "float16", "bfloat16"):
    t = ampcore.tensor(x, dtype=dtype, device="cuda")
    want = t.numpy().astype(np.float64)
    before = group.stats.calls
    for op in ("sum", "avg", "max", "min"):
        got = dist.all_reduce(t.clone(), op).numpy().astype(np.float64)
        assert np.array_equal(got, want), (dtype, op, got, want)   # one rank: every reduction is the identity
    assert np.array_equal(dist.broadcast(t.clone(), 0).numpy().astype(np.float64), want)
    [g] = dist.all_gather(None, t)
    assert np.array_equal(g.numpy().astype(np.float64), want) and g.device.type == "cuda"
    assert group.stats.calls == before + 6
print("nccl ok")
"""


def test_nccl_path_runs_every_collective_on_cuda_tensors() -> None:
    pytest.importorskip("mpi4py", reason="the mpi extra is not installed: pip install 'ampcore[mpi]'")
    probe = subprocess.run(
        [sys.executable, "-c", "from cupy.cuda import nccl; nccl.get_unique_id()"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0:
        pytest.skip(f"CuPy has no working NCCL here: {probe.stderr.strip().splitlines()[-1:]}")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "nccl ok" in done.stdout, done.stdout + done.stderr
