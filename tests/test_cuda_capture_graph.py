"""ampcore.compile on the cuda backend: each replay of a captured program is one CUDA-graph launch
(ampcore_cuda.graph_runner, the backend's ``capture_runner``), on the CUDA simulator.

Whole float16 and bfloat16 AMP steps (autocast, scaler.scale(loss).backward(), scaler.step(AdamW),
scaler.update(), zero_grad) and a compiled module's forward and backward with an eager optimizer replay through
the graph runner (the tests assert it launched, so a silent fallback to the core's runner fails them), bit for bit
the eager steps, a step skipped on an injected inf included, reading the host 0 times per replay.  A step that
takes a value drawn anew each replay (dropout's seed; a learning rate that keeps changing) runs between graphs
(a StagedRunner), with eager's bits.  What a graph cannot replay (a float32 or float64 GEMM, whose eager path is
CuPy's matmul, no nvmath-python) replays through the core's runner with eager's bits, and says why.  On a GPU,
benchmarks/gpu_checks.sh times it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")
HERE = Path(__file__).parent


def _run(run_python: Any, check: str, profile: str = "h100", **kwargs: Any) -> Any:
    code = f"import json, {Path(__file__).stem} as t; print(json.dumps(t.{check}(**{kwargs!r})))"
    proc = run_python(code, path=HERE, env={"AMPCORE_CUDA_SIMULATOR": profile})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _bits(t: Any) -> str:
    return t.detach().numpy().tobytes().hex()


def _data(n: int, inf_at: int | None = None) -> list[tuple[Any, Any]]:
    import ampcore

    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        x = rng.standard_normal((6, 8)).astype(np.float32)
        if i == inf_at:
            x[0, 0] = np.inf  # the scaled gradients overflow: the scaler skips the step and backs off
        out.append((ampcore.tensor(x, device="cuda"), ampcore.tensor(rng.integers(0, 4, 6), device="cuda")))
    return out


def _model(dropout: float = 0.0) -> Any:
    import ampcore
    from ampcore import nn

    ampcore.manual_seed(0)
    layers = [nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4)]
    if dropout:
        layers.insert(2, nn.Dropout(dropout))
    return nn.Sequential(*layers).to("cuda")


def _runner_report(run: Any) -> dict[str, Any]:
    from ampcore_cuda.graph_runner import GraphRunner, StagedRunner

    if not isinstance(run, (GraphRunner, StagedRunner)):
        return {"type": type(run).__name__}
    report = {
        "type": type(run).__name__,
        "launches": run.launches,
        "captures": run.captures,
        "reference_calls": run.reference_calls,
        "declined": run.declined,
    }
    if isinstance(run, StagedRunner):
        report["graphs"] = len(run._graphs)
    elif run.staged is not None:
        report["staged"] = _runner_report(run.staged)
    return report


def amp_steps(
    dtype: str, steps: int = 7, inf_at: int | None = 4, lrs: list[float] | None = None, dropout: float = 0.0
) -> dict[str, Any]:
    """``steps`` whole AMP steps eagerly and compiled, from the same seeds: bits of losses, parameters, AdamW's
    moments and step counts, the loss scale and the skipped steps; the compiled run's host reads per call and
    its runner.  ``lrs``: a learning rate set before each step (a schedule); ``dropout``: the model's."""
    import ampcore
    from ampcore import optim
    from ampcore.nn import functional as F

    def step(model: Any, opt: Any, scaler: Any, x: Any, y: Any) -> Any:
        opt.zero_grad()
        with ampcore.autocast("cuda", dtype=dtype):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.detach()

    data = _data(steps, inf_at)
    runs: list[dict[str, Any]] = []
    for compiled in (False, True):
        model = _model(dropout)
        opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        scaler = ampcore.GradScaler("cuda", init_scale=2.0**10)
        ampcore.manual_seed(1)
        fn = ampcore.compile(step) if compiled else step
        losses, reads = [], []
        for i, (x, y) in enumerate(data):
            if lrs is not None:
                opt.param_groups[0]["lr"] = lrs[i]
            with ampcore.count_host_syncs() as syncs:
                losses.append(fn(model, opt, scaler, x, y))
            reads.append(syncs.count)
        run: dict[str, Any] = {
            "losses": [_bits(v) for v in losses],
            "params": [_bits(p) for p in model.parameters()],
            "moments": [_bits(s[k]) for s in opt.state.values() for k in ("exp_avg", "exp_avg_sq")],
            "counts": [int(float(s["step"])) for s in opt.state.values()],
            "scale": scaler.get_scale(),
            "skipped": scaler.skipped_steps,
        }
        if compiled:
            stats = fn._compiled.stats
            (entry,) = fn._compiled.entries.values()
            run.update(reads=reads, replays=stats.replays, runner=_runner_report(entry.run))
            run["fused"] = len(entry.program.fusions)
        runs.append(run)
    eager, graph = runs
    return {
        "same": {k: eager[k] == graph[k] for k in eager},
        "skipped": (eager["skipped"], graph["skipped"]),
        "scale": (eager["scale"], graph["scale"]),
        "reads": graph["reads"],
        "replays": graph["replays"],
        "runner": graph["runner"],
        "fused": graph["fused"],
    }


@pytest.mark.parametrize(("dtype", "profile"), [("float16", "h100"), ("bfloat16", "h100"), ("float16", "t4")])
def test_a_whole_amp_step_replays_as_one_graph_launch_bit_for_bit_skip_included(run_python, dtype, profile):
    got = _run(run_python, "amp_steps", profile, dtype=dtype)
    assert got["same"] == dict.fromkeys(got["same"], True), got["same"]
    assert got["skipped"] == [1, 1], "the overflowing step must be skipped, eagerly and replayed"
    assert got["scale"][0] == got["scale"][1] == 512.0  # backed off once, from 1024
    runner = got["runner"]
    assert runner["type"] == "GraphRunner" and runner["declined"] is None, runner
    assert got["replays"] == 5 and runner["launches"] == 5 and runner["reference_calls"] == 0, (got, runner)
    assert runner["captures"] <= 2, runner  # the first replay, and once more for state the step rebinds
    assert got["fused"] > 0, "the graph should hold the backend's fused elementwise kernels"
    assert got["reads"][2:] == [0] * 5, got["reads"]  # 0 host reads per replayed step (capture included)


def test_an_amp_step_with_dropout_replays_as_graphs_around_the_draw_bit_for_bit(run_python):
    """Dropout draws a new mask each step: the step that draws runs between two graphs, every replay; a skipped
    step included, the bits are eager's from the same seeds, with 0 host reads."""
    got = _run(run_python, "amp_steps", dtype="float16", dropout=0.3)
    assert got["same"] == dict.fromkeys(got["same"], True), got["same"]
    assert got["skipped"] == [1, 1], got
    runner = got["runner"]
    assert runner["type"] == "StagedRunner" and runner["declined"] is None and runner["reference_calls"] == 0, runner
    assert runner["launches"] == 5 * runner["graphs"], runner
    assert got["reads"][2:] == [0] * 5, got["reads"]


def module_steps(dtype: str, steps: int = 6) -> dict[str, Any]:
    """nanoGPT's loop: ``model = ampcore.compile(model)``, forward under autocast, eager loss.backward() and
    AdamW; eagerly and compiled, the bits of the losses and parameters, and the forward's and backward's runners."""
    import ampcore
    from ampcore import optim
    from ampcore.nn import functional as F

    data = _data(steps)
    runs = []
    report: dict[str, Any] = {}
    for compiled in (False, True):
        model = _model()
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        net = ampcore.compile(model) if compiled else model
        losses = []
        for x, y in data:
            with ampcore.autocast("cuda", dtype=dtype):
                loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(_bits(loss))
        runs.append((losses, [_bits(p) for p in model.parameters()]))
        if compiled:
            (entry,) = net._compiled.entries.values()
            report = {
                "replays": net._compiled.stats.replays,
                "forward": _runner_report(entry.run),
                "backward": [_runner_report(bp.run) for bp, _ in entry.backward],
            }
    return {"same_losses": runs[0][0] == runs[1][0], "same_params": runs[0][1] == runs[1][1], **report}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_compiled_modules_forward_and_backward_are_graph_launches_with_an_eager_optimizer(run_python, dtype):
    got = _run(run_python, "module_steps", dtype=dtype)
    assert got["same_losses"] and got["same_params"], got
    forward, (backward,) = got["forward"], got["backward"]
    assert forward["type"] == backward["type"] == "GraphRunner", got
    assert forward["declined"] is None and backward["declined"] is None, got
    assert got["replays"] == 4 and forward["launches"] == 4 and forward["reference_calls"] == 0, got
    # The recorded call's backward runs the captured backward too: 5 backward launches.
    assert backward["launches"] == 5 and backward["reference_calls"] == 0, got


# --------------------------------------------------------------------------- what a graph declines
def declines() -> dict[str, Any]:
    """Programs a graph cannot replay, each replayed by the core's runner with eager's bits."""
    import ampcore
    from ampcore.compiler import explain
    from ampcore_cuda import blas

    out: dict[str, Any] = {}
    # Dropout draws a seed per call: the step that draws runs between two graphs (float16 autocast: a float32
    # GEMM declines, below).
    model = _model(dropout=0.5)
    net = ampcore.compile(model)
    x, _ = _data(1)[0]
    got = []
    for i in range(4):
        ampcore.manual_seed(i)
        with ampcore.no_grad(), ampcore.autocast("cuda", dtype="float16"):
            got.append(_bits(net(x)))
    want = []
    for i in range(4):
        ampcore.manual_seed(i)
        with ampcore.no_grad(), ampcore.autocast("cuda", dtype="float16"):
            want.append(_bits(model(x)))
    (entry,) = net._compiled.entries.values()
    out["dropout"] = {"same": got == want, "runner": _runner_report(entry.run), "differ": len(set(want)) == 4}
    with ampcore.no_grad(), ampcore.autocast("cuda", dtype="float16"):
        out["explain"] = {"dropout": explain(net, x).runner}
    out["explain"]["plain"] = explain(lambda t: t * 2.0, x).runner

    # A float32 or float64 GEMM runs through CuPy's matmul eagerly and cublasGemmEx in a graph: the capture
    # declines, the runner says why and the core's runner replays, with eager's bits.
    for dtype in ("float32", "float64"):
        a = ampcore.tensor(np.random.default_rng(1).standard_normal((4, 4)), device="cuda", dtype=dtype)
        mm = ampcore.compile(lambda t: (t @ t) * 2.0)
        results = [_bits(mm(a)) for _ in range(4)]
        (entry,) = mm._compiled.entries.values()
        out[dtype] = {"same": results == [_bits((a @ a) * 2.0)] * 4, "runner": _runner_report(entry.run)}

    # Without nvmath-python there are no graphs: no runner, and `ampcore info` says so.
    backend = ampcore.plugins.get_backend("cuda")
    out["support"] = backend.capture_support()

    def missing() -> Any:
        raise ModuleNotFoundError("No module named 'nvmath'", name="nvmath")

    blas.import_cublas = missing
    blas.support.cache_clear()
    f = ampcore.compile(lambda t: t * 3.0 + 1.0)
    y = ampcore.ones(5, device="cuda")
    values = [_bits(f(y)) for _ in range(3)]
    (entry,) = f._compiled.entries.values()
    out["explain"]["no_nvmath"] = explain(lambda t: t * 2.0, y).runner
    out["no_nvmath"] = {
        "same": values == [_bits(y * 3.0 + 1.0)] * 3,
        "runner": _runner_report(entry.run),
        "support": backend.capture_support(),
    }
    return out


def test_what_a_graph_cannot_replay_runs_through_the_cores_runner_with_eagers_bits_and_says_why(run_python):
    got = _run(run_python, "declines")
    assert got["dropout"]["same"] and got["dropout"]["differ"], got["dropout"]
    dropout = got["dropout"]["runner"]
    assert dropout["type"] == "StagedRunner" and dropout["declined"] is None, dropout
    # two replays, each two graph launches around the step that draws the mask
    assert dropout["graphs"] == 2 and dropout["launches"] == 4 and dropout["reference_calls"] == 0, dropout
    assert got["explain"]["dropout"].startswith("the cuda backend's CUDA graphs: 2 launches per replay"), got["explain"]
    assert got["explain"]["no_nvmath"] == "the core's reference runner (kernel by kernel)", got["explain"]
    assert got["explain"]["plain"].startswith("the cuda backend's CUDA graph: one launch per replay"), got["explain"]
    for dtype in ("float32", "float64"):
        gemm = got[dtype]
        assert gemm["same"] and gemm["runner"]["type"] == "GraphRunner", gemm
        assert f"a {dtype} GEMM runs through CuPy's matmul eagerly" in gemm["runner"]["declined"], gemm
        assert gemm["runner"]["launches"] == 0 and gemm["runner"]["reference_calls"] == 2, gemm
    assert got["support"].startswith("each replay one CUDA-graph launch") and "dropout" in got["support"]
    assert got["no_nvmath"]["same"] and got["no_nvmath"]["runner"]["type"] == "function", got["no_nvmath"]
    support = got["no_nvmath"]["support"]
    assert "no CUDA graphs here" in support and "ampcore-cuda[graphs]" in support, support


def test_a_learning_rate_that_keeps_changing_recaptures_twice_then_runs_its_step_between_graphs(run_python):
    lrs = [1e-2, 1e-2, 1e-2, 1e-2, 5e-3, 5e-3, 2e-3, 1e-3, 5e-4]
    got = _run(run_python, "amp_steps", dtype="float16", steps=len(lrs), inf_at=None, lrs=lrs)
    assert got["same"] == dict.fromkeys(got["same"], True), got["same"]
    runner = got["runner"]
    assert "a dynamic number (a learning rate) changed more than 2 times" in runner["declined"], runner
    # Replays 1-5 launched the one graph (recaptured at the 2e-3 and 5e-3 changes); at 1e-3 and 5e-4 the AdamW
    # step runs between two graphs, the rest of the step before it and the scaler's update after it.
    assert runner["launches"] == 5 and runner["reference_calls"] == 0, runner
    staged = runner["staged"]
    assert staged["graphs"] == 2 and staged["launches"] == 4 and staged["reference_calls"] == 0, staged
    assert got["reads"][2:] == [0] * 7


def parameters_as_arguments(steps: int = 6) -> dict[str, Any]:
    """A step taking its parameters as arguments: they are the call's inputs (copied into the graph's buffers),
    which AdamW updates in place, so each replay copies them back into the caller's arrays."""
    import ampcore
    from ampcore import nn, optim
    from ampcore.nn import functional as F

    data = _data(steps, inf_at=3)
    runs = []
    report: dict[str, Any] = {}
    for compiled in (False, True):
        ampcore.manual_seed(0)
        w = nn.Parameter(ampcore.randn(4, 8, device="cuda") * 0.3)
        b = nn.Parameter(ampcore.zeros(4, device="cuda"))
        arrays = (w._data, b._data)
        opt = optim.AdamW([w, b], lr=1e-2)
        scaler = ampcore.GradScaler("cuda", init_scale=2.0**10)

        def step(x: Any, y: Any, w: Any, b: Any, opt: Any = opt, scaler: Any = scaler) -> Any:
            opt.zero_grad()
            with ampcore.autocast("cuda", dtype="float16"):
                loss = F.cross_entropy(F.linear(x, w, b), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss.detach()

        fn = ampcore.compile(step) if compiled else step
        losses = [_bits(fn(x, y, w, b)) for x, y in data]
        runs.append((losses, _bits(w), _bits(b), scaler.skipped_steps, (w._data, b._data) == arrays))
        if compiled:
            (entry,) = fn._compiled.entries.values()
            run = entry.run
            report = {
                "runner": _runner_report(run),
                "copied_back": len(getattr(run, "_copy_back", ())),
            }
    return {"same": runs[0] == runs[1], "skipped": runs[0][3], "same_arrays": runs[0][4], **report}


def test_parameters_passed_as_arguments_are_copied_in_and_back_bit_for_bit(run_python):
    got = _run(run_python, "parameters_as_arguments")
    assert got["same"] and got["skipped"] == 1, got  # bits, and whether the parameters' arrays stayed, as eager
    assert got["runner"]["type"] == "GraphRunner" and got["runner"]["declined"] is None, got
    assert got["runner"]["launches"] == 4 and got["copied_back"] >= 2, got  # w and b at least


def float8_steps(recipe: str, steps: int = 6) -> dict[str, Any]:
    """``steps`` bfloat16-autocast steps of a float8 MLP eagerly and compiled: whether losses, parameters and
    every per-step float8 stat agree, the compiled run's reads per call, replays and runner."""
    import ampcore
    from ampcore import nn, optim
    from ampcore.float8 import convert_to_float8_training, float8_stats
    from ampcore.nn import functional as F

    def step(model: Any, opt: Any, x: Any, y: Any) -> Any:
        opt.zero_grad()
        with ampcore.autocast("cuda", dtype=ampcore.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    rng = np.random.default_rng(0)
    data = [
        (
            ampcore.tensor(rng.standard_normal((32, 32)).astype(np.float32), device="cuda"),
            ampcore.tensor(rng.integers(0, 4, 32), device="cuda"),
        )
        for _ in range(steps)
    ]
    runs: list[Any] = []
    report: dict[str, Any] = {}
    for compiled in (False, True):
        ampcore.manual_seed(0)
        model = convert_to_float8_training(
            nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)).to("cuda"), recipe
        )
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        fn = ampcore.compile(step) if compiled else step
        losses, reads = [], []
        for x, y in data:
            with ampcore.count_host_syncs() as syncs:
                losses.append(fn(model, opt, x, y))
            reads.append(syncs.count)
        runs.append(([_bits(v) for v in losses], [_bits(p) for p in model.parameters()], float8_stats(model)))
        if compiled:
            stats = fn._compiled.stats
            (entry,) = fn._compiled.entries.values()
            report = {"reads": reads, "replays": stats.replays, "breaks": [b.reason for b in stats.breaks]}
            report["runner"] = _runner_report(entry.run)
    return {"same": runs[0] == runs[1], **report}


@pytest.mark.parametrize("recipe", ["tensorwise", "delayed"])
def test_a_float8_step_replays_as_graph_launches_with_its_stats(run_python, recipe):
    got = _run(run_python, "float8_steps", recipe=recipe)
    assert got["same"] and not got["breaks"], got
    assert got["replays"] == 4 and got["reads"][2:] == [0] * 4, got
    assert got["runner"]["type"] == "GraphRunner" and got["runner"]["launches"] == 4, got["runner"]


def test_an_mxfp8_step_without_cublaslt_replays_kernel_by_kernel_and_says_why(run_python):
    """Without cuBLASLt's MXFP8 GEMM (no nvmath-python, or below sm_100) scaled_mm_mx multiplies the dequantized
    blocks with CuPy's matmul, which a CUDA graph cannot hold: the step replays through the core's runner, with
    eager's bits and no host read."""
    got = _run(run_python, "float8_steps", "b200", recipe="mxfp8")
    assert got["same"] and not got["breaks"] and got["reads"][2:] == [0] * 4, got
    runner = got["runner"]
    assert runner["launches"] == 0 and runner["reference_calls"] == 4, runner
    assert "scaled_mm_mx" in runner["declined"], runner
