"""The opencl kernels under Oclgrind: no out-of-bounds access, no data race, no API misuse.

``oclgrind python tests/oclgrind_workload.py`` replaces the OpenCL platform
with Oclgrind's simulator, which checks every memory access of every work-item.
The workload runs each kernel family on small odd shapes.  Oclgrind is a
Debian package (``apt-get install oclgrind``, which .ci/run does); without it
these tests skip with that reason, and where CI tried to install it that
fails the run (:mod:`ci_requirements`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ci_requirements import fail_if_required_and_missing

pytest.importorskip("pyopencl", reason="pyopencl is not installed (pip install 'ampcore-opencl[pocl]')")

WORKLOAD = Path(__file__).with_name("oclgrind_workload.py")
# Reports that are not about our kernels: pyopencl asks clGetDeviceInfo for parameters Oclgrind does not know
# (while building programs), and Oclgrind cannot simulate half arithmetic, so the float16 probe kernel
# fails there -- which is the probe's job: the device then gets the float16 storage tier.
NOT_OURS = ("Function: clGetDeviceInfo", "Unsupported float size: 2 bytes")
# An out-of-bounds write, to show that a real problem is reported (and this test can fail).
OUT_OF_BOUNDS = """
import numpy as np
from ampcore_opencl.devices import device_state
state = device_state(0)
buf = state.allocate(16)
k = state.kernel("oob", lambda: "__kernel void oob(__global float *a) { a[get_global_id(0) + 1] = 1.0f; }", "oob")
state.launch(k, (4,), (4,), buf)
state.synchronize()
print("workload done")
"""


def oclgrind(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run python ``args`` under oclgrind; the reports (blank-line separated blocks) that are about us."""
    env = dict(os.environ, AMPCORE_STRICT_PLUGINS="1")
    proc = subprocess.run(
        ["oclgrind", "--data-races", "--check-api", sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=tmp_path,
    )
    blocks = [b.strip() for b in proc.stderr.split("\n\n") if b.strip()]
    return proc, [b for b in blocks if not any(n in b for n in NOT_OURS)]


needs_oclgrind = pytest.mark.skipif(
    shutil.which("oclgrind") is None, reason="oclgrind is not installed: apt-get install oclgrind"
)


def test_oclgrind_is_here_where_ci_installed_it():
    """Fail-if-skipped: where .ci/run tried to install oclgrind (AMPCORE_REQUIRED_TOOLS), the tests below must
    run, not skip."""
    fail_if_required_and_missing("oclgrind", "the oclgrind checks of every kernel family")


@pytest.mark.slow
@needs_oclgrind
def test_every_kernel_family_is_clean_under_oclgrind(tmp_path):
    proc, reports = oclgrind(tmp_path, str(WORKLOAD), "opencl:0")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "workload done" in proc.stdout
    assert not reports, "\n\n".join(reports[:10])


@needs_oclgrind
def test_oclgrind_reports_an_out_of_bounds_write(tmp_path):
    proc, reports = oclgrind(tmp_path, "-c", OUT_OF_BOUNDS)
    assert "workload done" in proc.stdout, proc.stderr[-4000:]
    assert any("Invalid write of size 4" in r and "Kernel: oob" in r for r in reports), proc.stderr[-4000:]
