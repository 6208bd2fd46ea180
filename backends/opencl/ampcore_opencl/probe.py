"""Can a device build and run a kernel at all, does it really do half arithmetic, and which float16
conversions does it run faster?  Ask it.

:func:`run_smoke_kernel` builds and runs the smallest kernel there is: a device
that fails it is unusable (its compiler may not know this CPU).

Half arithmetic: don't trust the extension string.

Some drivers omit ``cl_khr_fp16`` though they support it, some claim it and
miscompile.  The probe compiles a kernel that uses ``half`` arithmetic and
compares its results, bit for bit, with correctly rounded float16 values
(NumPy's): rounding of sums, products and quotients, subnormals, overflow to
inf and NaN.  Native half is used only when the probe passes; otherwise
float16 is stored in 2 bytes and computed in float32, converted on load and
store (below), which every OpenCL device can do.

``AMPCORE_OPENCL_HALF=storage`` forces the storage tier (to compare the two).

float16 conversions: measure, among the exact ones.

Every float16 load and store converts to or from float32, by one of two exact
implementations (codegen's ``HALF_CONVERSIONS``): ``integer`` arithmetic, or
the ``half`` type's conversions, which need ``cl_khr_fp16``.  Which is faster
depends on the runtime, not on the extension list (Intel's CPU runtime emits
F16C instructions for the ``half`` casts, 2-4x faster than the integer code
there), so where the device lists ``cl_khr_fp16``, :func:`choose_half_convert`
asks it, in one build and ~0.1 s at device setup (measured on Intel's runtime):

1. build one program holding both implementations (distinct names), each
   wrapped in a kernel ``f[i] = half_to_float(h[i]); y[i] = float_to_half(x[i])``;
2. run each once on :data:`CONVERT_ITEMS` items: ``h`` every float16 bit
   pattern, ``x`` a structured float32 sample (every float16 value, the ties
   halfway to its neighbour, points one float32 ulp either side of them,
   quarter points, float32 subnormals, overflow edges, inf, NaN, -0.0), and
   compare with NumPy's conversions (bit for bit; a NaN must stay NaN with its
   sign).  A path that is not exact is not chosen;
3. time both kernels on :data:`CONVERT_TIMED_ITEMS` items, interleaved, up to
   :data:`CONVERT_REPEATS` runs each within :data:`CONVERT_BUDGET_S` of
   device time, and keep the faster by its best run: ``half`` must take at
   most :data:`CONVERT_MARGIN` of ``integer``'s time, else ``integer`` stays
   (it does not depend on the runtime's code generation).  A device that took
   longer than the budget for the checking runs (a simulator) is not timed:
   ``integer``.

Without ``cl_khr_fp16`` (PoCL 3.0 on x86) the path is ``integer``, with no
probe.  OpenCL's ``vload_half``/``vstore_half_rte`` were measured as a third
path and left out: exact on both runtimes, but on PoCL a library call (~6x
slower than the integer code) and on Intel's runtime anywhere from 2x faster
to 30x slower than it, depending on the kernel around them, which one probe
kernel cannot predict.

``AMPCORE_OPENCL_HALF_CONVERT=integer`` or ``=half`` forces a path (for tests
and comparisons; ``half`` needs ``cl_khr_fp16``), and skips the probe.  The
choice is reported by ``ampcore info`` (capabilities ``extra["float16_path"]``).
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .codegen import HALF_CONVERSIONS, HALF_TYPE_DEFINE

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

    with stderr_silenced(), quiet_compiler():  # PoCL's clang prints a failed build's diagnostics itself
        program = cl.Program(context, _SMOKE).build()
    host = np.zeros(4, dtype=np.int32)
    buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    cl.Kernel(program, "smoke")(queue, (4,), None, buffer)
    cl.enqueue_copy(queue, host, buffer, is_blocking=True)
    if host.tolist() != [1, 2, 3, 4]:
        raise RuntimeError(f"a kernel adding 1..4 to zeros gave {host.tolist()}")


def compiler_message(error: BaseException) -> str:
    """The telling line of an OpenCL error: the compiler's first ``error:`` line if there is one, else the
    first line with the build log's first line after it (pyopencl's messages repeat the status, then give
    ``Build on <device>:``, the log and the options)."""
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "error:" in line.lower():
            return line[line.lower().index("error:") :][:300]
    first = lines[0].split(" - ")[0] if lines else type(error).__name__
    starts = [i + 1 for i, line in enumerate(lines) if line.startswith("Build on ")]
    log = [line for line in lines[starts[0] :] if not line.startswith("(")] if starts else []
    return (f"{first} ({log[0]})" if log else first)[:300]  # e.g. PoCL's "Invalid build option: -mcpu=..."


def diagnostic(error: BaseException, limit: int = 100) -> str:
    """:func:`compiler_message` in one short line for ``ampcore info``: without the ``error:`` tags and the
    compiler's temporary file name and position (``/root/.cache/pocl/kcache/tempfile_x.cl:6:10:``)."""
    message = compiler_message(error)
    message = re.sub(r"\berror:\s*", "", message)
    message = re.sub(r"(?:\S*[/\\])?[\w.-]+\.cl:\d+(?::\d+)?:\s*", "", message).strip()
    return message if len(message) <= limit else message[: limit - 1] + "…"


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
def stderr_silenced() -> Iterator[None]:
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

        with stderr_silenced(), quiet_compiler():
            program = cl.Program(state.context, _SOURCE).build()
        a, b = _operands()
        flags = cl.mem_flags
        buf_a = cl.Buffer(state.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=a)
        buf_b = cl.Buffer(state.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=b)
        buf_out = cl.Buffer(state.context, flags.WRITE_ONLY, 4 * a.nbytes)
        program.probe(state.queue, (a.size,), None, buf_a, buf_b, buf_out, np.int32(a.size))
        out = np.empty(4 * a.size, dtype=np.float16)
        cl.enqueue_copy(state.queue, out, buf_out)
    except Exception as exc:  # noqa: BLE001 - a device without half arithmetic fails to build: that is the answer
        reason = "no cl_khr_fp16, and the" if not claimed else "the"
        return HalfSupport(False, claimed, f"{reason} probe kernel did not build or run: {diagnostic(exc)}")
    expected = _expected(a, b)
    same = (out.view(np.uint16) == expected.view(np.uint16)) | (np.isnan(out) & np.isnan(expected))
    if not same.all():
        return HalfSupport(False, claimed, f"probe gave wrong results in {int((~same).sum())} of {same.size} cases")
    return HalfSupport(True, claimed, "probe passed (correctly rounded add, sub, mul, div, subnormals, inf)")


# --------------------------------------------------------------------------- float16 conversion path
CONVERT_ENV = "AMPCORE_OPENCL_HALF_CONVERT"
CONVERT_ITEMS = 1 << 16  # every float16 bit pattern, once
CONVERT_TIMED_ITEMS = 1 << 20  # a timed run converts 1M values each way (12 MB of buffers)
CONVERT_REPEATS = 5
CONVERT_BUDGET_S = 0.05  # device time the timed runs may take in all
CONVERT_MARGIN = 0.9  # half is chosen when its best run takes at most this fraction of integer's
_CONVERT_LABELS = {"integer": "integer arithmetic", "half": "half type conversions (cl_khr_fp16)"}


@dataclass(frozen=True)
class HalfConvert:
    """How a device's kernels convert float16 on load and store (``path``: integer or half), and why."""

    path: str
    detail: str

    @property
    def build_options(self) -> tuple[str, ...]:
        """The build options that select this path in codegen's prelude."""
        return (f"-D{HALF_TYPE_DEFINE}",) if self.path == "half" else ()

    @property
    def label(self) -> str:
        """What the path is, in words: ``'integer arithmetic'``, ``'half type conversions (cl_khr_fp16)'``."""
        return _CONVERT_LABELS[self.path]

    @property
    def summary(self) -> str:
        """For ``ampcore info``: the label and why, e.g. ``'integer arithmetic (no cl_khr_fp16)'``."""
        return f"{self.label} ({self.detail})"


def _convert_source() -> str:
    parts = []
    for path, code in HALF_CONVERSIONS.items():
        parts.append(
            code.replace("half_to_float", f"half_to_float_{path}").replace("float_to_half", f"float_to_half_{path}")
        )
        parts.append(f"""
__kernel void convert_{path}(__global const ushort *h, __global float *f, __global const float *x,
                             __global ushort *y) {{
    size_t i = get_global_id(0);
    f[i] = half_to_float_{path}(h[i]);
    y[i] = float_to_half_{path}(x[i]);
}}
""")
    return "".join(parts)


def convert_operands(items: int = CONVERT_ITEMS) -> tuple[np.ndarray, np.ndarray]:
    """``(h, x)``: ``items`` float16 bit patterns (all 65536, repeated) and a structured float32 sample for
    the stores: each float16 value (by index; 0 for inf and NaN) plus a fraction of the gap to the next
    magnitude, cycling through 0, 1/2 (the ties), 1/2 -+ one float32 ulp, 1/4, 3/4, and a float32 edge
    every 8th item (overflow edges, float32 subnormals, inf, NaN, -0.0)."""
    if items > CONVERT_ITEMS:
        h, x = convert_operands(CONVERT_ITEMS)
        reps = -(-items // CONVERT_ITEMS)
        return np.tile(h, reps)[:items], np.tile(x, reps)[:items]
    h = np.arange(items, dtype=np.uint16)
    v = h.view(np.float16)
    base = np.where(np.isfinite(v), v, np.float16(0)).astype(np.float64)
    _, exponent = np.frexp(base)
    gap = np.maximum(np.ldexp(1.0, exponent - 11), 2.0**-24)  # 32 above 65504: its tie is 65520 (-> inf)
    away = np.where(np.signbit(v), -gap, gap)
    kind = np.arange(items) % 8
    x = (base + np.array([0.0, 0.5, 0.5, 0.5, 0.25, 0.75, 0.5, 0.0])[kind] * away).astype(np.float32)
    x[kind == 2] = np.nextafter(x[kind == 2], np.float32(0))
    x[kind == 3] = np.nextafter(x[kind == 3], np.copysign(np.float32(np.inf), x[kind == 3]))
    edges = np.array(
        [
            65504,
            65519.996,
            65520,
            65536,
            3.4e38,
            np.inf,
            -np.inf,
            np.nan,
            -np.nan,
            -0.0,
            1e-45,
            -1e-45,
            1.2e-38,
            2.0**-25,
            2.0**-25 * 1.0000001,
            -(2.0**-25),
            2.0**-24 * 1.5,
            2.0**-14 * (1 - 2.0**-11),
            1.0 + 2.0**-11,
            1.0 + 3 * 2.0**-11,
        ],
        dtype=np.float32,
    )
    slots = np.flatnonzero(kind == 7)
    x[slots] = edges[np.arange(slots.size) % edges.size]
    return h, x


def convert_mismatches(h: np.ndarray, f: np.ndarray, x: np.ndarray, y: np.ndarray) -> int:
    """How many of the loads ``f`` (of ``h``) and stores ``y`` (of ``x``) differ from NumPy's exact
    conversions: bit for bit, except that a NaN needs only to stay NaN with its sign (the payload may be
    quieted)."""
    want_f = h.view(np.float16).astype(np.float32)
    with np.errstate(over="ignore"):
        want_y = x.astype(np.float16)

    def bad(got: np.ndarray, want: np.ndarray, bits: Any) -> np.ndarray:
        nan_ok = np.isnan(got) & np.isnan(want) & (np.signbit(got) == np.signbit(want))
        return (got.view(bits) != want.view(bits)) & ~nan_ok

    return int(bad(f, want_f, np.uint32).sum() + bad(y.view(np.float16), want_y, np.uint16).sum())


def choose_half_convert(state: Any) -> HalfConvert:
    """The faster exact float16 conversion path on ``state``'s device (see the module docstring), or the one
    ``AMPCORE_OPENCL_HALF_CONVERT`` forces; ValueError for another value of it, or for ``half`` on a device
    without ``cl_khr_fp16``.  A probe that fails to build or run leaves ``integer``."""
    claimed = "cl_khr_fp16" in state.extensions
    forced = os.environ.get(CONVERT_ENV, "").strip().lower()
    if forced:
        if forced not in HALF_CONVERSIONS:
            raise ValueError(
                f"{CONVERT_ENV}={forced!r} is not a float16 conversion path; valid values are "
                f"{', '.join(map(repr, HALF_CONVERSIONS))}, or unset to measure"
            )
        if forced == "half" and not claimed:
            raise ValueError(
                f"{CONVERT_ENV}=half needs cl_khr_fp16, which {state.device.name.strip()!r} lacks; "
                "use 'integer' or unset it"
            )
        return HalfConvert(forced, f"forced by {CONVERT_ENV}={forced}")
    if not claimed:
        return HalfConvert("integer", "no cl_khr_fp16")
    try:
        times, wrong = _measure_convert(state)
    except Exception as exc:  # noqa: BLE001 - a driver whose half conversions do not build: the integer path needs nothing
        return HalfConvert("integer", f"probe did not build or run: {diagnostic(exc)}")
    if any(wrong.values()):  # the integer code is plain C: wrong only under a broken compiler
        path = min(wrong, key=lambda p: (wrong[p], p != "integer"))
        found = ", ".join(f"{p} {n}" for p, n in wrong.items())
        return HalfConvert(path, f"wrong results in the probe's {2 * CONVERT_ITEMS} cases: {found}")
    if times["integer"] == float("inf"):
        return HalfConvert(
            "integer",
            f"checked, not timed: the device took over {CONVERT_BUDGET_S * 1e3:.0f} ms for {CONVERT_ITEMS} items",
        )
    per_m = {path: 1e3 * t * (1 << 20) / CONVERT_TIMED_ITEMS for path, t in times.items()}  # ms per M values
    measured = f"measured: half {per_m['half']:.2f} ms vs integer {per_m['integer']:.2f} ms per M values"
    return HalfConvert("half" if times["half"] <= CONVERT_MARGIN * times["integer"] else "integer", measured)


def _measure_convert(state: Any) -> tuple[dict[str, float], dict[str, int]]:
    """(best seconds per timed run, wrong results) per path, on a profiling queue of ``state``'s context;
    no timed runs (both times inf) where the checking runs were too slow to be hardware."""
    import pyopencl as cl

    with quiet_compiler():
        program = cl.Program(state.context, _convert_source()).build(options=list(state.build_options))
    queue = cl.CommandQueue(state.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    h, x = convert_operands(CONVERT_TIMED_ITEMS)
    flags = cl.mem_flags
    bufs = [
        cl.Buffer(state.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=h),
        cl.Buffer(state.context, flags.WRITE_ONLY, 4 * h.size),
        cl.Buffer(state.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=x),
        cl.Buffer(state.context, flags.WRITE_ONLY, 2 * h.size),
    ]
    local = (min(64, state.max_work_group_size),)
    kernels = {path: cl.Kernel(program, f"convert_{path}") for path in HALF_CONVERSIONS}
    wrong: dict[str, int] = {}
    checking = 0.0
    for path, kernel in kernels.items():  # every float16 pattern loaded, the sample stored: checked
        event = kernel(queue, (CONVERT_ITEMS,), local, *bufs)
        f, y = np.empty(CONVERT_ITEMS, np.float32), np.empty(CONVERT_ITEMS, np.uint16)
        cl.enqueue_copy(queue, f, bufs[1])
        cl.enqueue_copy(queue, y, bufs[3], is_blocking=True)
        checking += (event.profile.end - event.profile.start) * 1e-9
        wrong[path] = convert_mismatches(h[:CONVERT_ITEMS], f, x[:CONVERT_ITEMS], y)
    times = {path: float("inf") for path in kernels}
    if checking > CONVERT_BUDGET_S:  # a simulator (Oclgrind): its speed says nothing, and timing would take long
        return times, wrong
    spent = 0.0
    for _ in range(CONVERT_REPEATS):
        for path, kernel in kernels.items():
            event = kernel(queue, (h.size,), local, *bufs)
            event.wait()
            seconds = (event.profile.end - event.profile.start) * 1e-9
            times[path] = min(times[path], seconds)
            spent += seconds
        if spent > CONVERT_BUDGET_S:
            break
    return times, wrong
