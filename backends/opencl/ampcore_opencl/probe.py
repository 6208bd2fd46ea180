"""Can a device build and run a kernel at all, and does it really do half arithmetic?  Ask it.

:func:`run_smoke_kernel` builds and runs the smallest kernel there is: a device
that fails it is unusable (its compiler may not know this CPU).

Half arithmetic: don't trust the extension string.

Some drivers omit ``cl_khr_fp16`` though they support it, some claim it and
miscompile.  The probe compiles a kernel that uses ``half`` arithmetic and
compares its results, bit for bit, with correctly rounded float16 values
(NumPy's): rounding of sums, products and quotients, subnormals, overflow to
inf and NaN.  Native half is used only when the probe passes; otherwise
float16 is stored in 2 bytes and computed in float32, converted on load and
store in integer arithmetic (see codegen), which every OpenCL device can do.

``AMPCORE_OPENCL_HALF=storage`` forces the storage tier (to compare the two).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

_SOURCE = """
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
__kernel void probe(__global const half *a, __global const half *b, __global half *out, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    half x = a[i], y = b[i];
    out[4 * i + 0] = x + y;
    out[4 * i + 1] = x * y;
    out[4 * i + 2] = x / y;
    out[4 * i + 3] = x - y;
}
"""


_SMOKE = "__kernel void smoke(__global int *a) { a[get_global_id(0)] += (int)get_global_id(0) + 1; }"


def run_smoke_kernel(context: Any, queue: Any) -> None:
    """Build and run a 4-item kernel on ``queue``'s device and check its result; raises whatever fails."""
    import pyopencl as cl

    with _stderr_silenced(), quiet_compiler():  # PoCL's clang prints a failed build's diagnostics itself
        program = cl.Program(context, _SMOKE).build()
    host = np.zeros(4, dtype=np.int32)
    buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    cl.Kernel(program, "smoke")(queue, (4,), None, buffer)
    cl.enqueue_copy(queue, host, buffer, is_blocking=True)
    if host.tolist() != [1, 2, 3, 4]:
        raise RuntimeError(f"a kernel adding 1..4 to zeros gave {host.tolist()}")


def compiler_message(error: BaseException) -> str:
    """The telling line of an OpenCL error: the compiler's first ``error:`` line if there is one, else the
    first line (pyopencl's messages repeat the whole build log and its options)."""
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "error:" in line.lower():
            return line[line.lower().index("error:"):][:300]
    first = lines[0].split(" - ")[0] if lines else type(error).__name__
    return first[:300]


@dataclass(frozen=True)
class HalfSupport:
    """The float16 tier of a device and how it was decided."""

    native: bool
    claimed: bool  # the device lists cl_khr_fp16
    detail: str

    @property
    def tier(self) -> str:
        return "native half" if self.native else "float16 storage, float32 arithmetic"


def _operands() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(64) * 4).astype(np.float16)
    b = (rng.standard_normal(64) * 4).astype(np.float16)
    edges_a = np.array([60000, 6e-5, 1e-7, -0.0, np.inf, 1, 3, 2049], dtype=np.float16)
    edges_b = np.array([60000, 6e-5, 3.0, 1.0, 1.0, 3, 7, 1], dtype=np.float16)
    return np.concatenate([a, edges_a]), np.concatenate([b, edges_b])


def _expected(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x, y = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        return np.stack([x + y, x * y, x / y, x - y], axis=1).astype(np.float16).reshape(-1)


@contextlib.contextmanager
def quiet_compiler() -> Iterator[None]:
    """No ``CompilerWarning`` for a build that succeeded: Intel's compiler always has something to say
    ("Compilation started"), and a failed build raises with its log anyway."""
    import pyopencl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pyopencl.CompilerWarning)
        yield


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Mute file descriptor 2: some OpenCL compilers (PoCL's clang) print a failed probe's diagnostics there
    themselves, and a failed probe is an expected answer, not an error to show the user."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def probe_native_half(state: Any) -> HalfSupport:
    """Run the probe on ``state``'s device (a DeviceState); never raises."""
    claimed = "cl_khr_fp16" in state.extensions
    if os.environ.get("AMPCORE_OPENCL_HALF", "").strip().lower() == "storage":
        return HalfSupport(False, claimed, "AMPCORE_OPENCL_HALF=storage")
    try:
        import pyopencl as cl

        with _stderr_silenced(), quiet_compiler():
            program = cl.Program(state.context, _SOURCE).build()
        a, b = _operands()
        flags = cl.mem_flags
        buf_a = cl.Buffer(state.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=a)
        buf_b = cl.Buffer(state.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=b)
        buf_out = cl.Buffer(state.context, flags.WRITE_ONLY, 4 * a.nbytes)
        program.probe(state.queue, (a.size,), None, buf_a, buf_b, buf_out, np.int32(a.size))
        out = np.empty(4 * a.size, dtype=np.float16)
        cl.enqueue_copy(state.queue, out, buf_out)
    except Exception as exc:  # a device without half arithmetic fails to build: that is the answer
        return HalfSupport(False, claimed, f"probe kernel did not build or run ({compiler_message(exc)[:120]})")
    expected = _expected(a, b)
    same = (out.view(np.uint16) == expected.view(np.uint16)) | (np.isnan(out) & np.isnan(expected))
    if not same.all():
        return HalfSupport(False, claimed, f"probe gave wrong results in {int((~same).sum())} of {same.size} cases")
    return HalfSupport(True, claimed, "probe passed (correctly rounded add, sub, mul, div, subnormals, inf)")
