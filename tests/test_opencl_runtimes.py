"""ampcore_opencl.runtimes: Intel's CPU runtime from PyPI registered with pyopencl's ICD loader.

The ICD folder is rebuilt in tmp_path and the runtime's files are faked, so
nothing here needs the runtime itself, and nothing touches this process's
loader (it has enumerated its platforms long before).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

runtimes = pytest.importorskip(
    "ampcore_opencl.runtimes", reason="ampcore-opencl is not installed: pip install -e 'backends/opencl[intel]'"
)

LIBRARY = Path("/opt/venv/site-packages/lib/libintelocl.so")


@pytest.fixture
def vendors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An OCL_ICD_VENDORS folder holding PoCL's and another vendor's ICD files."""
    folder = tmp_path / "vendors"
    folder.mkdir()
    (folder / "pocl.icd").write_text("/usr/lib/libpocl.so.2\n")
    (folder / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    (folder / "README").write_text("not an ICD file\n")
    monkeypatch.setenv("OCL_ICD_VENDORS", str(folder))
    return folder


def _listed(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir()}


def test_add_icd_copies_the_folder_and_adds_the_runtime_with_its_real_path(vendors):
    runtimes._add_icd("intel-cpu.icd", LIBRARY)
    folder = Path(os.environ["OCL_ICD_VENDORS"])
    assert folder != vendors and folder.is_dir()
    assert _listed(folder) == {
        "pocl.icd": "/usr/lib/libpocl.so.2\n",
        "nvidia.icd": "libnvidia-opencl.so.1\n",
        "intel-cpu.icd": f"{LIBRARY}\n",
    }
    assert _listed(vendors) == {
        "pocl.icd": "/usr/lib/libpocl.so.2\n",
        "nvidia.icd": "libnvidia-opencl.so.1\n",
        "README": "not an ICD file\n",
    }, "the original folder was changed"


def test_add_icd_accepts_a_single_icd_file_as_the_vendors_setting(vendors, monkeypatch):
    monkeypatch.setenv("OCL_ICD_VENDORS", str(vendors / "pocl.icd"))
    runtimes._add_icd("intel-cpu.icd", LIBRARY)
    assert _listed(Path(os.environ["OCL_ICD_VENDORS"])) == {
        "pocl.icd": "/usr/lib/libpocl.so.2\n",
        "intel-cpu.icd": f"{LIBRARY}\n",
    }


def test_add_icd_adds_nothing_where_a_system_icd_already_names_the_runtime(vendors):
    (vendors / "intel.icd").write_text("/opt/intel/oneapi/lib/libintelocl.so\n")
    runtimes._add_icd("intel-cpu.icd", LIBRARY)
    assert os.environ["OCL_ICD_VENDORS"] == str(vendors)  # listed twice, its device would show up twice


def test_add_icd_without_a_vendors_folder_lists_only_the_runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("OCL_ICD_VENDORS", str(tmp_path / "missing"))
    runtimes._add_icd("intel-cpu.icd", LIBRARY)
    assert _listed(Path(os.environ["OCL_ICD_VENDORS"])) == {"intel-cpu.icd": f"{LIBRARY}\n"}


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """prepare() not yet run in this process, with no problems recorded (both restored afterwards)."""
    monkeypatch.setattr(runtimes, "_done", False)
    monkeypatch.setattr(runtimes, "_problems", [])


def test_a_missing_compiler_runtime_library_is_a_problem_with_the_fix(fresh, vendors, monkeypatch):
    monkeypatch.setattr(
        runtimes, "_installed_file", lambda distribution, name: LIBRARY if distribution == "intel-opencl-rt" else None
    )
    runtimes.prepare()  # never raises
    assert runtimes.problems() == [
        "Intel's OpenCL CPU runtime is installed but libintlc.so.5 (from intel-cmplr-lib-rt) is not; "
        f"{runtimes.INTEL_HINT}"
    ]
    assert os.environ["OCL_ICD_VENDORS"] == str(vendors), "registered a runtime that cannot load"


def test_a_runtime_that_does_not_load_is_a_problem_not_a_crash(fresh, vendors, monkeypatch, tmp_path):
    def installed(distribution: str, name: str) -> Path:
        return LIBRARY if name == "libintelocl.so" else tmp_path / name

    def load(path: str, mode: int = 0) -> None:
        if path == str(LIBRARY):
            raise OSError(f"{path}: undefined symbol: __intel_cpu_feature_indicator")

    monkeypatch.setattr(runtimes, "_installed_file", installed)
    monkeypatch.setattr(runtimes.ctypes, "CDLL", load)
    runtimes.prepare()
    assert len(runtimes.problems()) == 1
    assert runtimes.problems()[0].startswith(f"Intel's OpenCL CPU runtime {LIBRARY} does not load (")
    assert "undefined symbol" in runtimes.problems()[0] and runtimes.INTEL_HINT in runtimes.problems()[0]
    assert os.environ["OCL_ICD_VENDORS"] == str(vendors)


def test_nothing_is_done_where_the_runtime_is_not_installed(fresh, vendors, monkeypatch):
    monkeypatch.setattr(runtimes, "_installed_file", lambda distribution, name: None)
    runtimes.prepare()
    assert runtimes.problems() == [] and os.environ["OCL_ICD_VENDORS"] == str(vendors)


def test_prepare_runs_once(fresh, vendors, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(runtimes, "_register_intel", lambda: calls.append("intel"))
    runtimes.prepare()
    runtimes.prepare()
    assert calls == ["intel"]


def test_a_failure_inside_prepare_is_recorded_not_raised(fresh, monkeypatch):
    def broken() -> None:
        raise PermissionError("cannot create a temporary folder")

    monkeypatch.setattr(runtimes, "_register_intel", broken)
    runtimes.prepare()
    assert runtimes.problems() == [
        "Intel's OpenCL CPU runtime could not be set up (PermissionError: cannot create a temporary folder)"
    ]
