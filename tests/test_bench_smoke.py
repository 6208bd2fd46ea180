"""The benchmarks run end to end on a tiny problem (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_overhead.py"


def run(script: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=timeout)


def test_bench_overhead_prints_the_table_and_the_ratio_line(tmp_path):
    out = tmp_path / "bench.json"
    proc = run(SCRIPT, "--steps", "2", "--batch", "8", "--warmup", "1", "--no-torch", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "ampcore/numpy ratio:" in proc.stdout
    assert "median ms/step" in proc.stdout and "numpy" in proc.stdout
    result = json.loads(out.read_text())
    assert result["batch"] == 8 and result["steps"] == 2
    assert result["ratio_ampcore_numpy"] > 0 and result["initial_loss_abs_diff"] < 1e-4


def test_bench_overhead_rejects_bad_options():
    proc = run(SCRIPT, "--steps", "0")
    assert proc.returncode == 2 and "--steps must be at least 1" in proc.stderr


AUTOCAST_SCRIPT = SCRIPT.parent / "bench_autocast.py"


def test_bench_autocast_reports_time_and_saved_bytes_ratios(tmp_path):
    out = tmp_path / "autocast.json"
    proc = run(AUTOCAST_SCRIPT, "--steps", "2", "--batch", "8", "--warmup", "1", "--no-torch", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "autocast/fp32 step time:" in proc.stdout and "activation bytes saved for backward" in proc.stdout
    result = json.loads(out.read_text())
    assert result["dtype"] == "bfloat16" and result["batch"] == 8
    # bfloat16 activations are half the bytes of float32 ones: a property of the dtypes, not a timing.
    assert result["activation_ratio"] == pytest.approx(0.5, abs=0.05)
    assert result["saved_bytes"]["amp"]["weight_copies"] > 0 == result["saved_bytes"]["fp32"]["weight_copies"]
    assert abs(result["first_loss"]["amp"] - result["first_loss"]["fp32"]) < 0.05


UNSCALE_SCRIPT = SCRIPT.parent / "bench_unscale.py"


def test_bench_unscale_reports_the_ratio_to_the_copy_floor(tmp_path):
    out = tmp_path / "unscale.json"
    proc = run(UNSCALE_SCRIPT, "--elements", "20000", "--steps", "3", "--warmup", "1", "--no-torch", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "kernel/floor ratio:" in proc.stdout and ("PASS" in proc.stdout or "FAIL" in proc.stdout)
    result = json.loads(out.read_text())
    assert result["elements"] == 20000 == sum(result["sizes"]) and len(result["sizes"]) == 20
    assert result["steps"] == 3 and result["ratio_kernel_floor"] > 0 and result["ratio_kernel_flat_floor"] > 0


def test_bench_unscale_rejects_bad_sizes():
    proc = run(UNSCALE_SCRIPT, "--elements", "0")
    assert proc.returncode == 2 and "--elements must be at least 1" in proc.stderr


def test_bench_unscale_runs_on_another_device_against_its_copy_kernel(tmp_path):
    import ampcore

    if "opencl" not in {b.name for b in ampcore.available_backends()}:
        pytest.skip("the opencl backend is not available here (pip install -e 'backends/opencl[pocl]')")
    out = tmp_path / "unscale.json"
    proc = run(
        UNSCALE_SCRIPT,
        "--device",
        "opencl:0",
        "--elements",
        "20000",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--json",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert "cast to float32, a device copy (floor)" in proc.stdout
    assert "kernel bandwidth / copy bandwidth" in proc.stdout
    result = json.loads(out.read_text())
    assert result["device"] == "opencl:0" and "torch" not in result["median_s"]  # torch has no opencl device
    assert result["bandwidth_vs_copy"] == pytest.approx(1 / result["ratio_kernel_floor"])


def test_bench_unscale_rejects_an_unknown_device_in_one_line():
    proc = run(UNSCALE_SCRIPT, "--device", "nosuch:0")
    assert proc.returncode == 2 and "--device nosuch:0" in proc.stderr and "Traceback" not in proc.stderr


DISTRIBUTED_SCRIPT = SCRIPT.parent / "bench_distributed.py"


def test_bench_distributed_compares_1_and_2_ranks_and_zero_state(tmp_path):
    pytest.importorskip("mpi4py", reason="the mpi extra is not installed: pip install 'ampcore[mpi]'")
    out = tmp_path / "distributed.json"
    proc = run(
        DISTRIBUTED_SCRIPT,
        "--steps",
        "1",
        "--warmup",
        "1",
        "--rounds",
        "1",
        "--batch",
        "8",
        "--json",
        str(out),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert set(rows) == {"1 rank", "1 rank, 1 thread", "2 ranks DDP", "2 ranks ZeRO-1"}
    params = 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10
    assert rows["1 rank"]["allreduce_bytes_per_step"] == 0
    assert rows["2 ranks DDP"]["allreduce_bytes_per_step"] == 4 * params + 4  # gradients + found_inf
    assert rows["2 ranks ZeRO-1"]["allgather_bytes_per_step"] == 4 * -(-params // 2)  # this rank's slice
    assert rows["2 ranks DDP"]["optimizer_state_bytes_per_rank"] == 2 * 4 * params  # AdamW's two moments
    assert rows["2 ranks ZeRO-1"]["state_vs_ddp"] <= 0.55 and "(target <= 0.55x): met" in proc.stdout


def test_bench_distributed_rejects_an_odd_global_batch():
    proc = run(DISTRIBUTED_SCRIPT, "--batch", "7")
    assert proc.returncode == 2 and "--batch must be even" in proc.stderr


DISPATCH_SCRIPT = SCRIPT.parent / "bench_dispatch.py"


def test_bench_dispatch_prints_the_per_op_table(tmp_path):
    out = tmp_path / "dispatch.json"
    proc = run(DISPATCH_SCRIPT, "--number", "20", "--repeats", "2", "--no-torch", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "| case | ampcore µs | torch µs (issue 26) | ratio | target ratio |" in proc.stdout
    assert "torch skipped (--no-torch)" in proc.stdout
    for case in (
        "`a + b`",
        "`a.sum()`",
        "`a * 2.0`",
        "`a @ w`",
        "`(a @ w).relu().sum().backward()`",
        '`with autocast("cpu"): a @ w`',
    ):
        assert case in proc.stdout
    result = json.loads(out.read_text())
    assert set(result["ampcore_us"]) == set(result["torch_us"]) and all(v > 0 for v in result["ampcore_us"].values())
