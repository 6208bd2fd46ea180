"""Building a kernel's own CUDA C source into a shared library with the host C++ compiler, against ``shim.h``.

The library is cached by the SHA-256 of everything that goes into it (shim, source, kernel name, compiler
and flags), so each kernel compiles once per machine.  A construct the shim does not define fails the build
with :class:`SimulatorBuildError` naming it, before the compiler runs or from the compiler's own error.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SimulatorBuildError", "Signature", "Param", "signature", "build", "cache_dir", "compiler", "SUPPORTED"]

SHIM = Path(__file__).with_name("shim.h")
FLAGS = ("-std=c++17", "-O1", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-U_FORTIFY_SOURCE", "-w")

# Every double-underscore name the shim defines (or g++ knows); any other one in a kernel is refused by name.
SUPPORTED = frozenset(
    {
        "__global__",
        "__device__",
        "__host__",
        "__forceinline__",
        "__noinline__",
        "__shared__",
        "__launch_bounds__",
        "__restrict__",
        "__syncthreads",
        "__syncthreads_or",
        "__syncthreads_and",
        "__syncthreads_count",
        "__shfl_down_sync",
        "__shfl_up_sync",
        "__shfl_xor_sync",
        "__shfl_sync",
        "__float_as_uint",
        "__float_as_int",
        "__uint_as_float",
        "__int_as_float",
        "__double_as_longlong",
        "__longlong_as_double",
        "__fadd_rn",
        "__fmul_rn",
        "__double2float_rn",
        "__double2float_rz",
        "__half",
        "__nv_bfloat16",
        "__half_as_ushort",
        "__ushort_as_half",
        "__bfloat16_as_ushort",
        "__ushort_as_bfloat16",
        "__half2float",
        "__float2half_rn",
        "__bfloat162float",
        "__float2bfloat16_rn",
    }
)
# Headers whose part the kernels may use the shim defines itself: their #include is dropped, any other refused.
PROVIDED_HEADERS = ("cuda_fp16.h", "cuda_bf16.h")
_PROVIDED_INCLUDE = re.compile(
    r'^\s*#\s*include\s*[<"](?:' + "|".join(map(re.escape, PROVIDED_HEADERS)) + r')[>"]\s*$', re.M
)
# Constructs outside the double-underscore names that the shim cannot honour.
_REFUSED = (
    (re.compile(r"^\s*#\s*include\b.*$", re.M), "#include of a header other than " + " and ".join(PROVIDED_HEADERS)),
    (re.compile(r"\bextern\s+__shared__\b"), "extern __shared__ (dynamic shared memory)"),
    (re.compile(r"\basm\s*(volatile\s*)?\("), "inline PTX asm"),
    (re.compile(r"\b(texture|surface)\s*<"), "texture/surface references"),
    (re.compile(r"\bcooperative_groups\b"), "cooperative_groups"),
)
_SIGNATURE = re.compile(
    r'extern\s+"C"\s+__global__\s+void\s+'
    r"(?:__launch_bounds__\((\d+)[^)]*\)\s*)?(\w+)\s*\(([^)]*)\)"
)
_UNDECLARED = re.compile(
    r"['\u2018](\w+)['\u2019] "
    r"(?:was not declared in this scope|has not been declared|does not name a type)"
)


class SimulatorBuildError(RuntimeError):
    """A kernel source the simulator cannot build; the message names the construct or the compiler's error."""


@dataclass(frozen=True)
class Param:
    """One kernel parameter: its C base type (``float``, ``long long``, ...) and whether it is a pointer."""

    name: str
    ctype: str
    pointer: bool


@dataclass(frozen=True)
class Signature:
    """A kernel's name, parameters and ``__launch_bounds__`` (None when it has none)."""

    name: str
    params: tuple[Param, ...]
    max_threads: int | None


def signature(source: str, name: str) -> Signature:
    """The signature of ``extern "C" __global__`` kernel ``name`` in ``source``; SimulatorBuildError if absent."""
    typedefs = {alias: base for base, alias in re.findall(r"typedef\s+([\w ]+?)\s+(\w+)\s*;", source)}
    for bounds, kernel, params in _SIGNATURE.findall(source):
        if kernel != name:
            continue
        out = []
        for raw in (p.strip() for p in params.split(",") if p.strip()):
            words = raw.replace("*", " * ").replace("__restrict__", " ").split()
            pointer, pname = "*" in words, words[-1]
            base = " ".join(w for w in words[:-1] if w not in ("const", "*", "volatile"))
            out.append(Param(pname, typedefs.get(base, base), pointer))
        return Signature(name, tuple(out), int(bounds) if bounds else None)
    raise SimulatorBuildError(f'no extern "C" __global__ kernel {name!r} in the source given to RawKernel')


def check_constructs(source: str) -> None:
    """SimulatorBuildError naming the first construct of ``source`` the shim does not support."""
    source = _PROVIDED_INCLUDE.sub("", source)
    defined = set(re.findall(r"#\s*define\s+(__\w+)", source))
    for name in sorted(set(re.findall(r"\b__\w+", source)) - SUPPORTED - defined):
        raise SimulatorBuildError(
            f"the CUDA simulator does not support {name!r} (used in the kernel source); "
            f"it supports {', '.join(sorted(SUPPORTED))}"
        )
    for pattern, what in _REFUSED:
        if pattern.search(source):
            raise SimulatorBuildError(f"the CUDA simulator does not support {what}")


def compiler() -> str:
    """The host C++ compiler: $CXX, else g++ on PATH; SimulatorBuildError saying how to get one."""
    cxx = os.environ.get("CXX") or shutil.which("g++")
    if not cxx:
        raise SimulatorBuildError(
            "the CUDA simulator needs a host C++ compiler: install g++ (apt-get install g++) or set CXX"
        )
    return cxx


def cache_dir() -> Path:
    """Where built kernels are kept: $AMPCORE_CUDA_SIM_CACHE, else $XDG_CACHE_HOME/ampcore/cuda-sim."""
    explicit = os.environ.get("AMPCORE_CUDA_SIM_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ampcore" / "cuda-sim"


def _translation_unit(source: str, name: str) -> str:
    source = _PROVIDED_INCLUDE.sub("// (provided by the simulator's shim)", source)
    return (
        f'#include "{SHIM}"\n#line 1 "{name}.cu"\n{source}\n#line 1 "ampsim-launch.cpp"\n'
        f'extern "C" int ampsim_launch(void **args, const unsigned *grid, const unsigned *block, int fibered, '
        f"char *err, int err_len) {{\n"
        f"    return ampsim::launch({name}, args, grid, block, fibered, err, err_len);\n}}\n"
    )


def build(source: str, name: str) -> Path:
    """The path of the shared library running kernel ``name`` of ``source``, compiled on first use."""
    check_constructs(source)
    cxx = compiler()
    unit = _translation_unit(source, name)
    key = hashlib.sha256("\0".join((SHIM.read_text(), unit, cxx, *FLAGS)).encode()).hexdigest()[:24]
    directory = cache_dir()
    lib = directory / f"{name}-{key}.so"
    if lib.exists():
        return lib
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        cpp, out = Path(tmp) / f"{name}.cpp", Path(tmp) / f"{name}.so"
        cpp.write_text(unit)
        env = {**os.environ, "LC_ALL": "C"}  # plain quotes in the compiler's messages
        proc = subprocess.run([cxx, *FLAGS, "-o", str(out), str(cpp)], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SimulatorBuildError(_explain(proc.stderr, name))
        os.replace(out, lib)  # atomic: a concurrent build of the same kernel writes the same bytes
    return lib


def _explain(stderr: str, name: str) -> str:
    undeclared = _UNDECLARED.findall(stderr)
    errors = [line for line in stderr.splitlines() if "error" in line][:5]
    if undeclared:
        return (
            f"the CUDA simulator does not support {undeclared[0]!r} (kernel {name!r}): the shim does not "
            f"define it\n" + "\n".join(errors)
        )
    return f"the CUDA simulator could not build kernel {name!r}:\n" + "\n".join(errors or stderr.splitlines()[-5:])
