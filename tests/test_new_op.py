"""docs/architecture.md's promise for a new op, kept true: an elementwise op with a backward, an autocast
category of ampcore's own and a float64 reference is one declaration file in ampcore/ops/decls/ plus one test
file; with no other file touched it passes its own test, the cpu conformance suite, the opencl suite on every
OpenCL device that builds kernels here, the CUDA simulator's h100 profile, and the public-API and docs tests.

The checkout is copied with the two files added (``logaddexp``, which torch has and autocasts nowhere, declared
float32 by ampcore), and each suite runs on the copy in a fresh interpreter, its packages first on the path.
Every conformance run must check the new op itself (its cells in the report), not just pass around it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

DECLARATION = '''\
"""logaddexp: log(exp(a) + exp(b)) without overflow (torch.logaddexp); ampcore runs it in float32 under autocast."""

from __future__ import annotations

import math

import numpy as np

from ... import expr as E
from ..declare import Domain, binary

_LN2 = math.log(2.0)


def _logaddexp(a: E.Expr, b: E.Expr) -> E.Expr:
    """The larger operand plus log1p of exp of minus the gap: nothing overflows; equal operands (infinities
    included) give a + log 2, where the gap would be inf - inf."""
    larger = E.maximum(a, b)
    return E.select(E.eq(a, b), a + _LN2, larger + E.log1p(E.exp(-abs(a - b))))


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(exp(a) + exp(b)) in float64, shifted by the (real) maximum: safe for a complex step."""
    m = np.maximum(np.real(a), np.real(b))
    shift = np.where(np.isinf(m), 0.0, m)
    with np.errstate(all="ignore"):
        out = shift + np.log(np.exp(a - shift) + np.exp(b - shift))
    return np.where(np.isinf(m), m, out)


binary(
    "logaddexp",
    _logaddexp,
    grads=(
        lambda k, a, b, y, g: k.mul(g, k.exp(k.sub(a, y))),  # d/da = exp(a) / (exp(a) + exp(b)) = exp(a - y)
        lambda k, a, b, y, g: k.mul(g, k.exp(k.sub(b, y))),
    ),
    reads=("ay", "by"),
    category="fp32",  # torch's lists leave it to its inputs' types; ampcore keeps its exponentials in float32
    reference=_reference,
    # exp of a gap of up to 4 (2 ulps, and 4 from the gap's rounding), through log1p (1, condition <= 1), added
    # to a larger operand of the same sign (rounded once): 9 ulps in float32 and float64; the reference's 3
    ulps=(9, 9, 3),
    domains=(Domain(0, 4), Domain(0, 4)),
)
'''

TEST = '''\
"""logaddexp, declared in ampcore/ops/decls/logaddexp.py."""

import numpy as np

import ampcore
from ampcore import policy as P


def _operands():
    a = ampcore.tensor([[0.5, 3.0, -2.0], [2.0, 1.0, 30.0]], requires_grad=True)
    b = ampcore.tensor([[1.0, 3.0, -2.5], [0.25, 4.0, -30.0]], requires_grad=True)
    return a, b


def test_it_matches_numpy_and_so_does_its_gradient():
    a, b = _operands()
    y = ampcore.logaddexp(a, b)
    np.testing.assert_allclose(y.numpy(), np.logaddexp(a.numpy(), b.numpy()), rtol=4e-7)
    y.sum().backward()
    gap = b.numpy().astype(np.float64) - a.numpy()
    np.testing.assert_allclose(a.grad.numpy(), 1.0 / (1.0 + np.exp(gap)), rtol=4e-6, atol=1e-30)
    np.testing.assert_allclose(b.grad.numpy(), 1.0 / (1.0 + np.exp(-gap)), rtol=4e-6, atol=1e-30)


def test_it_is_a_method_and_takes_infinities():
    a, b = _operands()
    np.testing.assert_array_equal(a.logaddexp(b).numpy(), ampcore.logaddexp(a, b).numpy())
    inf = ampcore.tensor([np.inf, -np.inf, np.inf])
    assert ampcore.logaddexp(inf, ampcore.tensor([np.inf, -np.inf, -np.inf])).tolist() == [np.inf, -np.inf, np.inf]


def test_autocast_runs_it_in_float32_by_ampcores_own_decision():
    a, b = _operands()
    with ampcore.autocast("cpu", dtype=ampcore.bfloat16):
        y = ampcore.logaddexp(a.bfloat16(), b.bfloat16())
    assert y.dtype == ampcore.float32
    entry = P.get("cpu").decision("logaddexp")
    assert entry.category is P.FP32 and entry.source.startswith("ampcore's own decision")
'''


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout (what git tracks, and what it would add) plus the declaration and its test."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    dest = tmp_path_factory.mktemp("new-op") / "ampcore-checkout"
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    assert not (dest / "ampcore" / "ops" / "decls" / "logaddexp.py").exists(), "logaddexp is declared already"
    (dest / "ampcore" / "ops" / "decls" / "logaddexp.py").write_text(DECLARATION)
    (dest / "tests" / "test_logaddexp.py").write_text(TEST)
    return dest


def _run(tree: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m <args>`` in ``tree`` with its packages before the installed ones."""
    paths = [tree, tree / "backends" / "cpu", tree / "backends" / "opencl", tree / "backends" / "cuda"]
    environ = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(map(str, paths))}
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=tree, env=environ, capture_output=True, text=True, timeout=1500
    )


def test_the_copy_runs_its_own_code(tree: Path) -> None:
    proc = _run(tree, "ampcore", "policy", "--op", "logaddexp", "--device", "cpu", "--json")
    assert proc.returncode == 0, proc.stderr
    [row] = json.loads(proc.stdout)["ops"]
    assert row["category"] == "fp32" and "ampcore.ops.decls.logaddexp" in row["source"]


def test_its_own_test_and_the_public_api_and_docs_tests_pass(tree: Path) -> None:
    tests = [
        "tests/test_logaddexp.py",
        "tests/test_public_api.py",
        "tests/test_functions.py",
        "tests/test_docs_examples.py",
        "tests/test_architecture_doc.py",
        "tests/test_backend_guide.py",
        "tests/test_autocast_lists.py",
        "tests/test_policy_torch_audit.py",
        "tests/test_torch_coverage.py",
    ]
    proc = _run(tree, "pytest", "-q", "-p", "no:cacheprovider", *tests)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "passed" in proc.stdout and " failed" not in proc.stdout


def _conformance(tree: Path, backend: str, tmp_path: Path, **env: str) -> None:
    """The whole conformance suite on ``backend`` in the copy, which must pass and check logaddexp."""
    report = tmp_path / f"{backend.replace(':', '-')}.json"
    proc = _run(tree, "ampcore", "conformance", "--backend", backend, "--json", str(report), **env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    cells = json.loads(report.read_text())["backends"][0]["cells"]
    checked = {(c["check"], c["dtype"]) for c in cells if c["op"].startswith("logaddexp") and c["outcome"] == "pass"}
    assert {("kernels", "float32"), ("ops", "float32"), ("autocast", "float16")} <= checked, sorted(checked)
    assert not [c for c in cells if c["op"].startswith("logaddexp") and c["outcome"] not in ("pass", "not supported")]


def test_the_cpu_conformance_suite_passes_and_checks_it(tree: Path, tmp_path: Path) -> None:
    _conformance(tree, "cpu", tmp_path)


def test_the_opencl_suite_passes_and_checks_it(tree: Path, tmp_path: Path, opencl_device: int) -> None:
    _conformance(tree, f"opencl:{opencl_device}", tmp_path)


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator builds its kernels with g++")
def test_the_simulated_cuda_suite_passes_and_checks_it(tree: Path, tmp_path: Path) -> None:
    _conformance(tree, "cuda", tmp_path, AMPCORE_CUDA_SIMULATOR="h100")
