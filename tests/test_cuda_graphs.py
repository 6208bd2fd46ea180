"""CUDA-graph capture and replay (ampcore_cuda.graphs) on the CUDA simulator: an eager float16 AMP training step
(autocast, GradScaler, AdamW(fused=True)) captured once and replayed is bit for bit the eager steps, skipped
step and loss-scale backoff included; what CUDA refuses inside a capture is refused (a host read, a
synchronisation, loading a kernel, an allocation from another pool, a copy from pageable memory, CuPy's cuBLAS);
and capture declines with the reason where the GEMMs cannot be captured.  On a GPU the same tests run on the
device (tests/test_cuda_device.py's graph test, and benchmarks/gpu_checks.sh times it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ampcore_cuda.sim import PROFILES, cupy_module
from ampcore_cuda.sim.capture import StreamCaptureError

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")
HERE = Path(__file__).parent
cp = cupy_module(PROFILES["h100"])

ADD_ONE = r"""
extern "C" __global__ void add_one(float *x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] + 1.0f;
}
"""


def _kernel() -> Any:
    """``add_one``, compiled and loaded through the simulated NVRTC (outside any capture)."""
    nvrtc = cp.cuda.nvrtc
    program = nvrtc.createProgram(ADD_ONE, "add_one.cu", [], [])
    nvrtc.compileProgram(program, ["-arch=sm_90", "--fmad=false"])
    module = cp.cuda.function.Module()
    module.load(nvrtc.getCUBIN(program))
    return module.get_function("add_one")


def _captured(body: Any) -> tuple[Any, Any]:
    """``body()`` captured on a new stream with a pool of its own: (the graph, body's result)."""
    pool, stream = cp.cuda.MemoryPool(), cp.cuda.Stream(non_blocking=True)
    with stream, cp.cuda.using_allocator(pool.malloc):
        stream.begin_capture()
        try:
            out = body()
        finally:
            graph = stream.end_capture()
    return graph, out


# --------------------------------------------------------------------------- the simulator's capture
def test_a_capture_runs_nothing_and_each_launch_runs_the_recorded_work_in_place():
    kernel = _kernel()
    x = cp.asarray(np.arange(4, dtype=np.float32))

    def body():
        kernel((1,), (32,), (x, np.int32(4)))
        return x * 2  # a CuPy kernel into a buffer of the capture's pool

    graph, doubled = _captured(body)
    assert x.get().tolist() == [0, 1, 2, 3], "capturing ran the kernel: a GPU only records it"
    assert np.isnan(doubled.get()).all(), "a graph's buffer holds garbage until its first launch"
    graph.launch()
    graph.launch()
    assert x.get().tolist() == [2, 3, 4, 5] and doubled.get().tolist() == [4, 6, 8, 10]


@pytest.mark.parametrize(
    "what, body",
    [
        ("a host read of device data", lambda x: x.get()),
        ("a host read of device data", lambda x: float(x[0])),
        ("Device.synchronize", lambda x: cp.cuda.Device(0).synchronize()),
        ("compiling kernel source", lambda x: _kernel()),
        ("cupy.asarray of host data", lambda x: cp.asarray(np.ones(3, np.float32))),
        ("memcpyAsync from pageable host memory", lambda x: _pageable_copy(x)),
    ],
)
def test_what_cuda_refuses_inside_a_capture_is_refused_with_its_name(what, body):
    x = cp.asarray(np.ones(3, np.float32))
    with pytest.raises(StreamCaptureError, match=what):
        _captured(lambda: body(x))


def _pageable_copy(x: Any) -> None:
    host = np.zeros(3, np.float32)
    cp.cuda.runtime.memcpyAsync(x.data.ptr, host.ctypes.data, 12, 1, 0)


def test_an_allocation_outside_the_captures_pool_is_refused():
    stream = cp.cuda.Stream(non_blocking=True)
    x = cp.asarray(np.ones(3, np.float32))
    with stream:
        stream.begin_capture()
        try:
            with pytest.raises(StreamCaptureError, match="not from the capture's pool"):
                x * 2
        finally:
            stream.end_capture()


def test_cupys_cublas_raises_inside_a_capture_as_cupy_does():
    with pytest.raises(NotImplementedError, match="cuBLAS API during stream capture"):
        _captured(lambda: cp.cuda.cublas.setPointerMode(cp.cuda.device.get_cublas_handle(), 0))


def test_a_pinned_copy_is_a_node_that_rereads_its_source_at_each_launch():
    x = cp.empty(3, dtype=np.float32)
    pinned = cp.cuda.alloc_pinned_memory(12)
    host = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_float * 3).from_address(pinned.ptr))
    host[:] = [1, 2, 3]
    graph, _ = _captured(lambda: cp.cuda.runtime.memcpyAsync(x.data.ptr, pinned.ptr, 12, 1, 0))
    host[:] = [4, 5, 6]
    graph.launch()
    assert x.get().tolist() == [4, 5, 6]


# --------------------------------------------------------------------------- the backend's capture
def _run(run_python: Any, check: str, **kwargs: Any) -> Any:
    code = f"import json, {Path(__file__).stem} as t; print(json.dumps(t.{check}(**{kwargs!r})))"
    proc = run_python(code, path=HERE, env={"AMPCORE_CUDA_SIMULATOR": "h100"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def amp_step_eager_against_graph() -> dict[str, Any]:
    """Six float16 AMP steps of a small MLP, the fourth overflowing: eagerly, and as one captured step replayed
    (the first step is capture's warm-up) with each batch written into the static input."""
    import ampcore
    from ampcore import nn, optim
    from ampcore.nn import functional as F
    from ampcore_cuda import graphs

    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((8, 12)).astype(np.float32) for _ in range(6)]
    xs[3][3, 4] = 1e30  # float16 overflow: the scaler skips this step and backs off, on the device
    y = rng.integers(0, 5, 8)

    def setup() -> tuple[Any, ...]:
        ampcore.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 32, device="cuda"), nn.ReLU(), nn.Linear(32, 5, device="cuda"))
        opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, fused=True)
        scaler = ampcore.GradScaler("cuda", init_scale=2.0**10)
        x, t = ampcore.tensor(xs[0], device="cuda"), ampcore.tensor(y, device="cuda")

        def step() -> Any:
            opt.zero_grad()
            with ampcore.autocast("cuda", dtype="float16"):
                loss = F.cross_entropy(model(x), t)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss

        return model, scaler, x, step

    model, scaler, x, step = setup()
    eager_losses = []
    for batch in xs:
        x._data.data[...] = batch  # the same static input the graph reads
        eager_losses.append(step().item())
    eager = [p.detach().numpy() for p in model.parameters()]
    eager_scale = scaler.get_scale()

    model, scaler, x, step = setup()
    with ampcore.count_host_syncs() as capture_reads:
        graph = graphs.capture(step, device=0, warmup=1)
    losses = [eager_losses[0]]
    with ampcore.count_host_syncs() as replay_reads:
        for batch in xs[1:]:
            x._data.data[...] = batch
            graph.replay()
    losses.append(graph.outputs.item())  # the last replay's loss: each replay rewrites the same output
    got = [p.detach().numpy() for p in model.parameters()]
    return dict(
        nodes=graph._graph.nodes,
        replays=graph.replays,
        capture_reads=capture_reads.count,
        replay_reads=replay_reads.count,
        last_loss=(losses[-1], eager_losses[-1]),
        differ=[i for i, (a, b) in enumerate(zip(eager, got)) if a.tobytes() != b.tobytes()],
        scales=(scaler.get_scale(), eager_scale),
        eager_nan=[bool(np.isnan(v)) for v in eager_losses],
    )


def test_a_captured_amp_training_step_replays_bit_for_bit_the_eager_steps_skip_included(run_python):
    got = _run(run_python, "amp_step_eager_against_graph")
    assert got["eager_nan"] == [False, False, False, True, False, False]  # the fourth step overflowed
    assert got["differ"] == [], f"parameters {got['differ']} differ from eager's after 5 replays"
    assert got["scales"][0] == got["scales"][1] == 512.0, got["scales"]  # backed off once, on the device
    assert got["last_loss"][0] == got["last_loss"][1]
    assert got["replays"] == 5 and got["nodes"] > 20
    assert got["capture_reads"] == 0 and got["replay_reads"] == 0


def refused_step(kind: str) -> str:
    """What capture() raises for a step that reads the host (``item``) or runs a float64 GEMM."""
    import ampcore
    from ampcore_cuda import graphs

    a = ampcore.ones(4, 4, device="cuda", dtype="float64" if kind == "float64" else "float32")
    step = {"item": lambda: (a * 2).sum().item(), "float64": lambda: a @ a}[kind]
    try:
        graphs.capture(step)
    except Exception as exc:  # noqa: BLE001 - the test reads the error's type and message
        return f"{type(exc).__name__}: {exc}"
    return "captured"


@pytest.mark.parametrize(
    "kind, error",
    [
        ("item", r"StreamCaptureError: a host read of device data"),
        ("float64", r"CaptureDeclinedError: .*float64 GEMM cannot run inside a CUDA graph"),
    ],
)
def test_a_step_that_cannot_be_captured_raises_naming_the_reason(run_python, kind, error):
    import re

    got = _run(run_python, "refused_step", kind=kind)
    assert re.search(error, got), got


def declined_without_nvmath() -> str:
    from ampcore_cuda import blas, graphs

    def missing() -> Any:
        raise ModuleNotFoundError("No module named 'nvmath'", name="nvmath")

    blas.import_cublas = missing
    blas.support.cache_clear()
    try:
        graphs.capture(lambda: None)
    except graphs.CaptureDeclinedError as exc:
        return exc.reason
    return "captured"


def test_capture_declines_with_the_reason_and_the_fix_where_nvmath_is_missing(run_python):
    reason = _run(run_python, "declined_without_nvmath")
    assert "GEMMs inside a graph need a cuBLAS handle of our own" in reason
    assert "nvmath-python is not installed" in reason and "ampcore-cuda[graphs]" in reason


def test_the_graph_benchmark_captures_a_transformer_step_with_eagers_bits_on_the_simulator(tmp_path):
    """benchmarks/bench_cuda_graph.py (gpu_checks.sh's bench-cuda-graph step) end to end on the simulator, on
    the small transformer (attention, layer norm, GELU): the captured step reads the host 0 times and its
    parameters are eager's bit for bit, or the script exits 1."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AMPCORE_")}
    env["AMPCORE_CUDA_SIMULATOR"] = "h100"
    script = HERE.parent / "benchmarks" / "bench_cuda_graph.py"
    args = ["--model", "transformer", "--steps", "1", "--allow-simulator", "--json", str(tmp_path / "g.json")]
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    row = json.loads((tmp_path / "g.json").read_text())["reports"][0]["rows"]["captured"]
    assert row["host_reads_per_step"] == 0 and row["bits_equal_eager"] is True
