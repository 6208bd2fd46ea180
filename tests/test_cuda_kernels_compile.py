"""Every CUDA C source of the cuda backend compiles to PTX for sm_80 (Ampere) and sm_90 (Hopper).

CI has no GPU: this, and the CUDA simulator running every kernel
(tests/test_cuda_simulator.py), is what checks the kernels there.  They are
standalone ``extern "C"`` sources (what ``cupy.RawKernel`` compiles: CuPy
prepends nothing to a RawKernel), given to ``nvcc --ptx`` with the backend's
own options.  nvcc spends ~0.5 s per file parsing its implicit headers, so all
sources go into one file per architecture, each in its own namespace (extern
"C" names are unchanged) behind a ``#line`` directive, so an error still names
the source and its line; one source per family is also compiled on its own,
exactly as CuPy would.  nvcc is the one on PATH, else the one NVIDIA ships on
PyPI (``pip install nvidia-cuda-nvcc``, which .ci/run installs); without
either these tests skip with the reason.
Where CuPy and its NVRTC are installed (no GPU needed), every source is also
compiled by NVRTC itself, the compiler ``cupy.RawKernel`` really uses, which
has no implicit headers.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ampcore_cuda.launch import OPTIONS
from ampcore_cuda.sources import SOURCE_FAMILIES, all_sources


def _find_nvcc() -> str | None:
    """nvcc on PATH, else the nvidia-cuda-nvcc wheel's (nvidia/cu13/bin/nvcc; cu12's wheels: cuda_nvcc/bin)."""
    found = shutil.which("nvcc")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations if spec and spec.submodule_search_locations else ():
        for candidate in sorted(Path(root).glob("*/bin/nvcc")):
            if os.access(candidate, os.X_OK):
                return str(candidate)
    return None


NVCC = _find_nvcc()
needs_nvcc = pytest.mark.skipif(
    NVCC is None, reason="no nvcc: not on PATH, and no nvidia-cuda-nvcc wheel (pip install nvidia-cuda-nvcc)"
)
SOURCES = all_sources()
ARCHS = ("sm_80", "sm_90")


def _kernel_names(source: str) -> list[str]:
    return re.findall(r'extern "C" __global__ void(?: __launch_bounds__\(\d+\))?\s+(\w+)\(', source)


def _nvcc_ptx(arch: str, path, tmp_path) -> tuple[subprocess.CompletedProcess, str]:
    ptx = tmp_path / (path.stem + f".{arch}.ptx")
    proc = subprocess.run(
        [NVCC, "--ptx", f"-arch={arch}", *OPTIONS, "-o", str(ptx), str(path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc, ptx.read_text() if proc.returncode == 0 else ""


def _entries(ptx: str) -> set[str]:
    return set(re.findall(r"\.entry (\w+)\(", ptx))


def test_every_family_contributes_sources():
    assert {name.split("/")[0] for name in SOURCES} == set(SOURCE_FAMILIES)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_source_defines_the_one_kernel_it_is_listed_under(name):
    assert _kernel_names(SOURCES[name]) == [name.split("/", 1)[1]]


@needs_nvcc
@pytest.mark.parametrize("arch", ARCHS)
def test_every_kernel_source_compiles_to_ptx(arch, tmp_path):
    parts = []
    for i, (name, source) in enumerate(SOURCES.items()):
        macros = sorted(set(re.findall(r"^\s*#define\s+(\w+)", source, flags=re.M)))
        parts.append(
            f'namespace src{i} {{\n#line 1 "{name}.cu"\n{source}\n}}\n' + "".join(f"#undef {m}\n" for m in macros)
        )
    path = tmp_path / "all_sources.cu"
    path.write_text("".join(parts))
    proc, ptx = _nvcc_ptx(arch, path, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _entries(ptx) == {name.split("/", 1)[1] for name in SOURCES}
    assert "warning" not in proc.stderr, proc.stderr


@needs_nvcc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("family", SOURCE_FAMILIES)
def test_a_source_of_each_family_compiles_alone_as_cupy_would_compile_it(family, arch, tmp_path):
    name = next(n for n in SOURCES if n.startswith(family + "/"))
    path = tmp_path / (name.replace("/", "__") + ".cu")
    path.write_text(SOURCES[name])
    proc, ptx = _nvcc_ptx(arch, path, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _entries(ptx) == {name.split("/", 1)[1]}


def _nvrtc() -> tuple[object | None, str]:
    try:
        from cupy.cuda import nvrtc

        return nvrtc, "NVRTC {}.{}".format(*nvrtc.getVersion())
    except Exception as exc:  # noqa: BLE001 - no CuPy, or CuPy without NVRTC: the reason is the skip message
        return None, f"{type(exc).__name__}: {exc}"


NVRTC, NVRTC_STATUS = _nvrtc()


@pytest.mark.skipif(NVRTC is None, reason=f"CuPy's NVRTC is not loadable ({NVRTC_STATUS})")
@pytest.mark.parametrize("arch", ARCHS)
def test_every_kernel_source_compiles_with_nvrtc_as_rawkernel_compiles_it(arch):
    failures = []
    for name, source in SOURCES.items():
        prog = NVRTC.createProgram(source, name.replace("/", "__") + ".cu", [], [])
        try:
            NVRTC.compileProgram(prog, (*OPTIONS, f"-arch={arch}"))
            log = NVRTC.getProgramLog(prog).strip()
            if log:
                failures.append(f"{name}: {log}")
        except Exception as exc:  # noqa: BLE001 - NVRTCError: the log says why
            failures.append(f"{name}: {exc}\n{NVRTC.getProgramLog(prog)}")
        finally:
            NVRTC.destroyProgram(prog)
    assert not failures, "\n".join(failures)
