"""Make the OpenCL runtimes installed from PyPI visible to pyopencl's ICD loader, before it first looks.

pyopencl's wheels carry their own ICD loader (ocl-icd).  It reads the ``.icd``
files of one folder, ``OCL_ICD_VENDORS`` (default ``/etc/OpenCL/vendors``), and
those in pyopencl's own folder, where ``pocl-binary-distribution`` puts PoCL's.

Intel's CPU runtime (``intel-opencl-rt``, the ``[intel]`` extra) needs two
things the loader cannot do for it in a virtual environment:

* its wheel's ``etc/OpenCL/vendors/intel-cpu.icd`` names a path on the machine
  the wheel was built on, so we write an ``.icd`` file with the library's real
  path into a folder of our own, beside copies of the folder's files the loader
  would have read, and point ``OCL_ICD_VENDORS`` there;
* ``libintelocl.so`` needs ``libimf.so``, ``libsvml.so``, ``libirng.so`` and
  ``libintlc.so.5`` from ``intel-cmplr-lib-rt``.  Its RUNPATH finds them only
  where both wheels installed into one folder, so we load them first, by full
  path: the dynamic loader then matches them by name.  Everything is loaded
  ``RTLD_LOCAL``: a runtime's ``clGetPlatformIDs`` (or libimf's ``sin``) in the
  global scope would bypass the ICD loader (or libm) for everything after.

:func:`prepare` does both, once, and never raises: what went wrong is kept in
:func:`problems`, and shows up as the backend's reason or note.  It must run
before the process's first ``clGetPlatformIDs``; ``devices.cl()`` calls it.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import tempfile
import threading
from importlib import metadata
from pathlib import Path

__all__ = ["INTEL_HINT", "prepare", "problems"]

INTEL_HINT = "pip install 'ampcore-opencl[intel]' (Intel's OpenCL CPU runtime: builds on any x86-64 CPU, AMD's too)"

# What libintelocl.so links against, each after the ones it needs itself.
_COMPILER_RUNTIME = ("libintlc.so.5", "libsvml.so", "libirng.so", "libimf.so")
_DEFAULT_VENDORS = "/etc/OpenCL/vendors"

_lock = threading.Lock()
_done = False
_problems: list[str] = []


def problems() -> list[str]:
    """What :func:`prepare` could not do, one sentence each with the fix (empty when all went well)."""
    return list(_problems)


def prepare() -> None:
    """Register Intel's CPU runtime with the ICD loader if it is installed (once per process; never raises)."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
        try:
            _register_intel()
        except Exception as exc:  # noqa: BLE001 - nothing here may stop the other runtimes from working
            _problems.append(f"Intel's OpenCL CPU runtime could not be set up ({type(exc).__name__}: {exc})")


def _installed_file(distribution: str, name: str) -> Path | None:
    """Where distribution ``distribution`` installed the file called ``name`` (None if it is not installed)."""
    try:
        files = metadata.distribution(distribution).files or []
    except metadata.PackageNotFoundError:
        return None
    for entry in files:
        if entry.name == name:
            path = Path(entry.locate()).resolve()
            if path.is_file():
                return path
    return None


def _register_intel() -> None:
    library = _installed_file("intel-opencl-rt", "libintelocl.so")
    if library is None:
        return  # not installed: nothing to do
    for name in _COMPILER_RUNTIME:
        found = _installed_file("intel-cmplr-lib-rt", name)
        if found is None:
            _problems.append(
                f"Intel's OpenCL CPU runtime is installed but {name} (from intel-cmplr-lib-rt) is not; {INTEL_HINT}"
            )
            return
        ctypes.CDLL(str(found), mode=ctypes.RTLD_LOCAL)
    try:
        ctypes.CDLL(str(library), mode=ctypes.RTLD_LOCAL)  # the ICD loader would skip it without saying why
    except OSError as exc:
        _problems.append(f"Intel's OpenCL CPU runtime {library} does not load ({exc}); {INTEL_HINT}")
        return
    _add_icd("intel-cpu.icd", library)


def _add_icd(icd_name: str, library: Path) -> None:
    """Point ``OCL_ICD_VENDORS`` at a folder holding the ICD files it named before, plus one for ``library``."""
    current = os.environ.get("OCL_ICD_VENDORS") or _DEFAULT_VENDORS
    source = Path(current)
    existing = sorted(source.glob("*.icd")) if source.is_dir() else [source] if source.is_file() else []
    if any("libintelocl" in _read(icd) for icd in existing):
        return  # the system already lists this runtime: listing it twice would show its device twice
    folder = Path(tempfile.mkdtemp(prefix="ampcore-opencl-icd-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for icd in existing:
        (folder / icd.name).write_text(_read(icd))
    (folder / icd_name).write_text(f"{library}\n")
    os.environ["OCL_ICD_VENDORS"] = str(folder)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
