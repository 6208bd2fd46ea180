"""Planted wrong kernels (:mod:`ampcore.testing.planted`) fail the conformance suite's tolerance-based checks, on
every backend: the FakeBackend, cpu (compiled and NumPy paths), opencl (its first usable device) and cuda on the
CUDA simulator (h100), or on the GPU where there is one (benchmarks/gpu_checks.sh runs them there).

Each defect runs only against the checks that judge its kernel by a tolerance rule (the exact checks that
would also catch it, such as ``test_low_precision_accumulates_in_float32``, are left out), and the run must
fail in the cells that name the defect.  On real backends the defect is planted in a fresh interpreter
(``pytest -p ampcore.testing.planted --ampcore-plant NAME``), as a kernel override on the backend's own
KernelTable, so the backend's other kernels stay its own.  The same checks pass without the defect
(the backends' own conformance runs show that; the fake is checked here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ampcore.testing.planted import FUSION_DEFECTS, PLANTED

pytest_plugins = ["pytester"]

FLOATS = ("float64", "float32", "float16", "bfloat16")
LOW = ("float16", "bfloat16")


@dataclass(frozen=True)
class Case:
    """Which checks a defect runs against (modules and a -k expression) and the cells that must fail."""

    modules: tuple[str, ...]
    select: str
    must_fail: frozenset[tuple[str, str, str]]


def _cells(check: str, ops: tuple[str, ...], dtypes: tuple[str, ...]) -> frozenset[tuple[str, str, str]]:
    return frozenset((check, op, d) for op in ops for d in dtypes)


CASES: dict[str, Case] = {
    # the kernel check of matmul (long k, random and one-signed), and the ops built on a 16-bit matmul
    "gemm_16bit_accumulator": Case(
        ("kernels_reductions", "ops"),
        "test_matmul or (test_forward and (matmul or linear))",
        _cells("kernels", ("matmul",), LOW),
    ),
    "gemm_zeros_for_long_k": Case(("kernels_reductions",), "test_matmul", _cells("kernels", ("matmul",), FLOATS)),
    "flushes_small_results": Case(
        ("kernels", "ops"),
        "(test_unary and (exp or sigmoid)) or (test_forward and (exp or sigmoid))",
        _cells("kernels", ("exp", "sigmoid"), FLOATS) | _cells("ops", ("exp", "sigmoid"), FLOATS),
    ),
    "flushes_subnormal_results": Case(
        ("kernels",),
        "test_unary_small_results or test_unary_edge_values or test_binary_edge_values",
        _cells("kernels", ("exp", "sigmoid", "tanh", "sin", "erf", "neg", "abs", "add", "mul", "maximum"), FLOATS),
    ),
    # float32 is not required: 2 ulps off a correctly rounded expf is within the 2 ulps CUDA documents
    # (tolerance.ELEMENTWISE_ULPS); it fails only where the backend's own expf was already off
    "exp_2ulps_off": Case(
        ("kernels", "ops"),
        "(test_unary and exp) or (test_forward and exp)",
        _cells("kernels", ("exp",), ("float64", "float16", "bfloat16")) | _cells("ops", ("exp",), LOW),
    ),
    "sum_16bit_naive": Case(("kernels_reductions",), "test_sum and not integer", _cells("kernels", ("sum",), LOW)),
    # a captured step's fusion that keeps a 16-bit chain's intermediates in float32: the captured mode's fused
    # chains must catch it in both 16-bit dtypes (chains whose every intermediate eager rounds, the chains
    # over mixed dtypes with a bias row, and a GEMM's epilogue on a backend that fuses one: its 16-bit
    # product too stays in float32)
    "fusion_drops_rounding": Case(
        ("capture",),
        "test_fused_chain or test_fused_mixed_chain or test_fused_epilogue",
        _cells("capture", ("chain.arith", "chain.sqrt_abs", "chain.casts"), LOW)
        | _cells("capture", ("mixed.bias_residual", "mixed.promote", "mixed.select"), LOW),
    ),
}


def test_every_planted_defect_has_a_case():
    assert set(CASES) == set(PLANTED)


def _outcomes(report: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    return {(c["check"], c["op"], c["dtype"]): c["outcome"] for c in report["cells"]}


# The GEMM epilogues a backend that fuses them (overrides Backend.fused_gemm_kernel) must fail the fusion defect
# in: their 16-bit product kept in float32.
EPILOGUE_CELLS = _cells(
    "capture", ("epilogue.linear_relu", "epilogue.widened_bias", "epilogue.mask_cast", "epilogue.scaled_mm"), LOW
)


def _judge(defect: str, report: dict[str, Any], log: str, extra: frozenset[tuple[str, str, str]] = frozenset()) -> None:
    """The run failed in every must-fail cell the backend computes (``extra``: more cells this backend must)."""
    case, cells = CASES[defect], _outcomes(report)
    ran = {cell: outcome for cell, outcome in cells.items() if outcome != "not supported"}
    expected = (case.must_fail | extra) & set(ran)
    assert expected, f"{defect}: none of the cells {sorted(case.must_fail)} ran: {sorted(cells.items())}\n{log}"
    passed = sorted(cell for cell in expected if ran[cell] != "fail")
    assert not passed, f"{defect} slipped through {passed} (outcomes {[ran[c] for c in passed]})\n{log}"


def _args(defect: str, target: str, report: Path) -> list[str]:
    case = CASES[defect]
    modules = [f"ampcore.conformance.checks.test_{m}" for m in case.modules]
    return [
        "-p", "no:cacheprovider", "-q", "--pyargs", *modules, "-k", case.select,
        "--ampcore-backend", target, "--ampcore-json", str(report), "--ampcore-report", "none",
    ]  # fmt: skip


# --------------------------------------------------------------------------- the fake backend
@pytest.mark.parametrize("defect", sorted(PLANTED))
def test_a_planted_defect_fails_the_suite_on_the_fake_backend(defect, pytester, register_fake):
    backend = register_fake(defects=(defect,))
    path = pytester.path / "report.json"
    run = pytester.runpytest_inprocess(*_args(defect, backend.name, path))
    assert run.ret == 1, f"the suite passed a fake backend with {defect}"
    (report,) = json.loads(path.read_text())["backends"]
    _judge(defect, report, run.stdout.str()[-3000:])
    honest = register_fake()
    run = pytester.runpytest_inprocess(*_args(defect, honest.name, path))
    assert run.ret == 0, "the same checks pass on the fake without the defect:\n" + run.stdout.str()[-3000:]


# --------------------------------------------------------------------------- real backends
def _opencl_target() -> str | None:
    try:
        from ampcore_opencl.plugin import OpenCLBackend

        backend = OpenCLBackend()
        if not backend.availability().ok:
            return None
        usable = [i for i in range(backend.device_count()) if backend.device_status(i).ok]
    except Exception:  # noqa: BLE001 - no pyopencl, no platform: the target is absent
        return None
    return f"opencl:{usable[0]}" if usable else None


_OPENCL = _opencl_target()
TARGETS = {
    "cpu": ("cpu", {}),
    "cpu-numpy": ("cpu", {"AMPCORE_CPU_NO_NUMBA": "1"}),
    "opencl": (_OPENCL, {}),
    # the simulator's h100 profile; where CuPy sees a GPU the variable is ignored and the defect is planted there
    "cuda": ("cuda", {"AMPCORE_CUDA_SIMULATOR": "h100"}),
}


def _fuses(target: str, method: str = "fused_kernel") -> bool:
    """Whether the target's backend fuses a captured step's elementwise chains (overrides Backend.fused_kernel),
    or with ``method="fused_gemm_kernel"`` its GEMM epilogues."""
    import ampcore

    classes = {"cpu": "ampcore_cpu.plugin:CPUBackend", "cpu-numpy": "ampcore_cpu.plugin:CPUBackend"}
    classes |= {"opencl": "ampcore_opencl.plugin:OpenCLBackend", "cuda": "ampcore_cuda.plugin:CUDABackend"}
    module, _, name = classes[target].partition(":")
    try:
        cls = getattr(__import__(module, fromlist=[name]), name)
    except ImportError:
        return False
    return getattr(cls, method) is not getattr(ampcore.Backend, method)


def _skip_reason(target: str, defect: str = "") -> str | None:
    if defect in FUSION_DEFECTS and not _fuses(target):
        return f"{target} does not fuse a captured step's chains (the core replays them one by one): nothing to plant"
    if target == "opencl" and _OPENCL is None:
        return "no usable OpenCL device here (tests/test_opencl_backend.py fails the run if none is)"
    if target == "cuda" and shutil.which("g++") is None and not _real_cuda_device():
        return "the CUDA simulator needs g++ (tests/test_cuda_simulator.py fails the run where CI installed it)"
    return None


def _real_cuda_device() -> bool:
    try:
        from ampcore_cuda.plugin import CUDABackend
    except ImportError:
        return False
    return bool(CUDABackend().availability().ok)


@pytest.mark.slow
@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("defect", sorted(PLANTED))
def test_a_planted_defect_fails_the_suite_on_a_real_backend(defect, target, tmp_path):
    reason = _skip_reason(target, defect)
    if reason:
        pytest.skip(reason)
    device, extra = TARGETS[target]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMPCORE_")} | extra
    path = tmp_path / "report.json"
    command = [sys.executable, "-m", "pytest", "-p", "ampcore.testing.planted", "--ampcore-plant", defect]
    proc = subprocess.run(
        command + _args(defect, str(device), path), capture_output=True, text=True, env=env, timeout=900
    )
    log = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 1, f"the suite passed {target} with {defect} planted (exit {proc.returncode})\n{log}"
    (report,) = json.loads(path.read_text())["backends"]
    epilogues = defect in FUSION_DEFECTS and _fuses(target, "fused_gemm_kernel")
    _judge(defect, report, log, EPILOGUE_CELLS if epilogues else frozenset())
