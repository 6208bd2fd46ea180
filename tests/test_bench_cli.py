"""``ampcore bench`` end to end on the cpu backend: the table, the JSON result against its schema, the plot.

Nothing here asserts a timing: only that each figure is present, has the
right type and obeys what holds by construction (ratios are ratios of the
reported medians, the float32 row is its own baseline, the loss history has
one entry per step).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from ampcore.bench import MODELS, SCHEMA, get_model, make_batches
from ampcore.cli import main

STEPS, WARMUP = 3, 1


DOC = Path(__file__).resolve().parents[1] / "docs" / "bench.md"


def _bench(tmp_path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "--device",
            "cpu",
            "--steps",
            str(STEPS),
            "--warmup",
            str(WARMUP),
            "--batch",
            "16",
            "--json",
            str(out),
            *args,
        ]
    )
    assert code == 0
    return json.loads(out.read_text()), str(out)


def _check_row(row: dict, batch: int) -> None:
    stats = row["step_seconds"]
    assert len(row["times_seconds"]) == STEPS and all(t > 0 for t in row["times_seconds"])
    assert stats["min"] <= stats["q1"] <= stats["median"] <= stats["q3"] <= stats["max"]
    assert math.isclose(row["samples_per_second"], batch / stats["median"])
    assert len(row["losses"]) == STEPS + WARMUP and all(math.isfinite(v) for v in row["losses"])
    assert row["final_loss"] == row["losses"][-1]
    assert row["saved_for_backward_bytes"] > 0
    assert isinstance(row["skipped_steps"], int) and 0 <= row["skipped_steps"] <= STEPS + WARMUP
    if row["loss_scaling"]:
        assert len(row["loss_scales"]) == STEPS + WARMUP and all(s > 0 for s in row["loss_scales"])
    else:
        assert row["loss_scales"] is None


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """One ``ampcore bench`` on the cpu backend without torch, with a plot: (result, printed table, plot path)."""
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib (in the test extra)")
    tmp_path = tmp_path_factory.mktemp("bench")
    plot = tmp_path / "bench.png"
    capture = __import__("io").StringIO()
    with __import__("contextlib").redirect_stdout(capture):
        result, _ = _bench(tmp_path, "--no-torch", "--plot", str(plot))
    return result, capture.getvalue(), plot


def test_bench_on_cpu_prints_the_table_and_saves_a_png(cpu_run):
    _, printed, plot = cpu_run
    assert "ms/step" in printed and "vs fp32" in printed and "bf16 AMP" in printed and "fp16 AMP" in printed
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000


def _documented_fields() -> dict[str, set[str]]:
    """Section heading -> the backticked field names in the first column of its table in docs/bench.md."""
    fields: dict[str, set[str]] = {}
    section = None
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            section = None
        elif line.startswith("### "):
            section = line[4:].strip().strip("`")
            fields[section] = set()
        elif section and (m := re.match(r"\| `([a-z_0-9]+)` \|", line)):
            fields[section].add(m.group(1))
    return fields


def test_the_result_has_exactly_the_fields_docs_bench_md_documents(cpu_run):
    result, _, _ = cpu_run
    doc = _documented_fields()
    assert set(result) == doc["Top level"]
    for name in ("machine", "versions", "model", "settings"):
        assert set(result[name]) == doc[name], name
    assert all(set(b) == doc["backends[]"] for b in result["backends"])
    assert all(set(c) == doc["configs[]"] for c in result["configs"])
    assert set(result["configs"][0]["step_seconds"]) == {"median", "min", "max", "q1", "q3", "iqr"}


def test_bench_on_cpu_writes_a_result_that_follows_the_schema(cpu_run):
    result, _, _ = cpu_run

    assert result["schema"] == SCHEMA
    assert {"platform", "machine", "cpu_count"} <= set(result["machine"])
    assert result["versions"]["ampcore"] and result["versions"]["numpy"]
    assert result["model"] == {
        **result["model"],
        "name": "mlp",
        "batch": 16,
        "input_shape": [784],
        "classes": 10,
        "parameters": 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10,
    }
    assert result["settings"]["steps"] == STEPS and result["settings"]["warmup"] == WARMUP
    (backend,) = result["backends"]
    assert backend["device"] == "cpu:0" and backend["distribution"] == "ampcore-cpu"
    assert "bfloat16" in backend["capabilities"]["emulated"]

    rows = {row["precision"]: row for row in result["configs"]}
    assert [r["framework"] for r in result["configs"]] == ["ampcore"] * 3
    assert set(rows) == {"float32", "float16", "bfloat16"}  # the cpu backend emulates both AMP dtypes
    for row in rows.values():
        _check_row(row, 16)
        assert row["peak_memory_bytes"] > 0  # the cpu backend measures it (tracemalloc)
        assert row["host_syncs_per_step"] <= 1.0  # the skip decision, or the optimizer's deferred checks
        assert row["step_time_vs_torch"] is None
    base = rows["float32"]
    assert base["speedup_vs_float32"] == 1.0 and base["final_loss_diff_vs_float32"] == 0.0
    for name in ("float16", "bfloat16"):
        row = rows[name]
        assert row["amp"] and math.isclose(
            row["speedup_vs_float32"], base["step_seconds"]["median"] / row["step_seconds"]["median"]
        )
        assert math.isclose(row["final_loss_diff_vs_float32"], row["final_loss"] - base["final_loss"])
        # Same weights, same batches: after four steps the AMP loss is still close to float32's.
        assert abs(row["final_loss_diff_vs_float32"]) < 0.05
    assert rows["float16"]["loss_scaling"] and not rows["bfloat16"]["loss_scaling"]


def test_bench_measures_torch_beside_ampcore_when_it_is_installed(tmp_path):
    pytest.importorskip("torch", reason="torch is an optional dependency of the benchmark")
    result, _ = _bench(tmp_path, "--dtype", "bfloat16")
    rows = {(r["framework"], r["precision"]): r for r in result["configs"]}
    assert set(rows) == {("ampcore", "float32"), ("ampcore", "bfloat16"), ("torch", "float32"), ("torch", "bfloat16")}
    for (framework, precision), row in rows.items():
        _check_row(row, 16)
        if framework == "ampcore":
            twin = rows[("torch", precision)]
            assert math.isclose(
                row["step_time_vs_torch"], row["step_seconds"]["median"] / twin["step_seconds"]["median"]
            )
    # The same weights and batches in both frameworks: the first losses agree to float32 rounding.
    assert rows[("ampcore", "float32")]["losses"][0] == pytest.approx(rows[("torch", "float32")]["losses"][0], rel=1e-5)
    assert rows[("torch", "float32")]["peak_memory_bytes"] is None  # torch does not count CPU memory
    assert result["versions"]["torch"]


def test_bench_from_a_saved_result_prints_it_again(tmp_path, capsys):
    result, path = _bench(tmp_path, "--no-torch", "--dtype", "bfloat16", "--model", "cnn")
    capsys.readouterr()
    assert main(["bench", "--from", path]) == 0
    printed = capsys.readouterr().out
    assert result["model"]["name"] == "cnn" and "bf16 AMP" in printed and "CNN" in printed


def test_bench_float8_adds_a_row_per_recipe_against_bfloat16(tmp_path, capsys):
    result, _ = _bench(tmp_path, "--no-torch", "--dtype", "bfloat16", "--float8", "tensorwise", "--float8", "mxfp8")
    rows = {row["id"]: row for row in result["configs"]}
    assert result["settings"]["float8"] == ["tensorwise", "mxfp8"]
    bf16 = rows["ampcore cpu:0 bfloat16 AMP"]
    for recipe in ("tensorwise", "mxfp8"):
        row = rows[f"ampcore cpu:0 bfloat16 AMP + float8 {recipe}"]
        _check_row(row, 16)
        assert row["float8"] == recipe and row["precision"] == "bfloat16"
        assert math.isclose(row["final_loss_vs_reference"], row["final_loss"] / bf16["final_loss"] - 1)
        assert math.isclose(
            row["step_time_vs_reference"], row["step_seconds"]["median"] / bf16["step_seconds"]["median"]
        )
    assert bf16["float8"] is None and bf16["final_loss_vs_reference"] is None
    printed = " ".join(capsys.readouterr().out.split())
    assert "bf16 AMP + f8 tensorwise" in printed and "% vs bfloat16" in printed


@pytest.mark.parametrize(
    "args, message",
    [
        (["--float8", "fp8"], "unknown recipe 'fp8'"),
        (["--device", "nosuch"], "nosuch"),
        (["--dtype", "float64"], "float64"),
        (["--steps", "0"], "steps must be an integer >= 1"),
        (["--batch", "0"], "batch must be a positive integer"),
    ],
)
def test_bench_rejects_bad_options_in_one_line(args, message, capsys):
    assert main(["bench", "--no-torch", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bench_from_rejects_a_file_that_is_not_a_result(tmp_path, capsys):
    path = tmp_path / "other.json"
    path.write_text('{"schema": "something else"}')
    assert main(["bench", "--from", str(path)]) == 2
    assert "is not an ampcore bench result" in capsys.readouterr().err


def test_bench_from_refuses_options_that_choose_what_to_measure(tmp_path, capsys):
    assert main(["bench", "--from", str(tmp_path / "saved.json"), "--device", "cpu", "--steps", "5"]) == 2
    assert "--device, --steps cannot apply to --from, which shows a saved result" in capsys.readouterr().err


def _available(monkeypatch, *backends) -> None:
    """Plain ``ampcore bench`` (no --device) sees the cpu backend and ``backends``, nothing else installed."""
    from ampcore.bench import benchmark
    from ampcore.plugins import get_backend

    monkeypatch.setattr(benchmark, "available_backends", lambda: [get_backend("cpu"), *backends])


def _quick_bench(tmp_path, *args: str) -> tuple[int, dict | None]:
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "--no-torch",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--batch",
            "16",
            "--dtype",
            "bfloat16",
            "--json",
            str(out),
            *args,
        ]
    )
    return code, json.loads(out.read_text()) if out.exists() else None


def test_plain_bench_measures_the_devices_that_work_and_lists_one_that_raised_as_refused(
    tmp_path, capsys, register_fake, monkeypatch
):
    broken = register_fake(fail_on=("matmul", 1))
    _available(monkeypatch, broken)
    code, result = _quick_bench(tmp_path)
    assert code == 0
    assert {row["device"] for row in result["configs"]} == {"cpu:0"}
    [refused] = result["refused"]
    assert set(refused) == _documented_fields()["refused[]"]
    assert (refused["framework"], refused["device"]) == ("ampcore", f"{broken.name}:0")
    assert refused["reason"].startswith("KernelError: ")
    assert "injected failure in call 1 of kernel 'matmul'" in refused["reason"]
    printed = capsys.readouterr().out
    assert printed.index(f"ampcore {broken.name}:0 refused: {refused['reason']}\n") > printed.index("cpu:0    fp32")


def test_bench_measures_every_usable_device_and_refuses_an_unusable_one(tmp_path, capsys, register_fake, monkeypatch):
    flaky = register_fake(devices=2, unusable={0: "device 0 has no [fp16] compiler: update the driver"})
    _available(monkeypatch, flaky)
    code, result = _quick_bench(tmp_path)
    assert code == 0 and {row["device"] for row in result["configs"]} == {"cpu:0", f"{flaky.name}:1"}
    assert result["refused"] == [
        {
            "framework": "ampcore",
            "device": f"{flaky.name}:0",
            "reason": "device 0 has no [fp16] compiler: update the driver",
        }
    ]
    assert f"ampcore {flaky.name}:0 refused: device 0 has no [fp16] compiler" in capsys.readouterr().out


def test_bench_exits_1_with_the_reasons_when_no_device_could_be_measured(tmp_path, capsys, register_fake):
    broken = register_fake(fail_on=("matmul", 1))
    code, result = _quick_bench(tmp_path, "--device", broken.name)
    assert code == 1 and result is None
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"ampcore bench: error: no device could be measured (ampcore {broken.name}:0: KernelError")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_benchmark_model_builds_and_its_teacher_labels_use_every_class(name):
    spec = get_model(name)
    ((x, y),) = make_batches(spec, seed=0, count=1, batch=64 if "large" not in name else 8)
    assert x.shape[1:] == spec.input_shape and y.min() >= 0 and y.max() < spec.classes
    if "large" not in name:  # building the GPU-sized models would allocate gigabytes
        model = spec.build("cpu")
        assert tuple(model(__import__("ampcore").from_numpy(x)).shape) == (64, spec.classes)
        assert len(set(y.tolist())) > spec.classes // 2


def test_the_torch_copy_of_each_model_computes_the_same_logits():
    torch = pytest.importorskip("torch", reason="torch is an optional dependency of the benchmark")
    import ampcore
    from ampcore.bench.torch_reference import twin

    for name in ("mlp", "cnn", "transformer"):
        spec = get_model(name)
        ampcore.manual_seed(0)
        model = spec.build("cpu")
        ((x, _),) = make_batches(spec, seed=0, count=1, batch=4)
        ours = model(ampcore.from_numpy(x)).numpy()
        weights = {name: t.numpy() for name, t in model.state_dict().items()}
        theirs = twin(spec, weights)(torch.from_numpy(x)).detach().numpy()
        # float32 on both sides, summing over the widest fan-in: a few ulp of the logits' scale.
        assert abs(ours - theirs).max() <= 64 * 2.0**-23 * max(1.0, abs(theirs).max()), name


def test_torch_runs_beside_the_device_types_named_only():
    from ampcore.bench import BenchSettings, configurations

    pytest.importorskip("torch", reason="torch is an optional dependency of the benchmark")
    spec = get_model("mlp")
    with_cpu = configurations(BenchSettings(spec, devices=("cpu",), dtypes=("bfloat16",)))
    assert [c.label for c in with_cpu] == [
        "ampcore cpu:0 float32",
        "ampcore cpu:0 bfloat16 AMP",
        "torch cpu float32",
        "torch cpu bfloat16 AMP",
    ]
    if "opencl" in {b.name for b in __import__("ampcore").available_backends()}:
        only_opencl = configurations(BenchSettings(spec, devices=("opencl:0",)))
        assert {c.framework for c in only_opencl} == {"ampcore"}


def test_compile_adds_a_captured_row_for_every_ampcore_configuration_float8_ones_included():
    from ampcore.bench import BenchSettings, configurations

    spec = get_model("mlp")
    settings = BenchSettings(spec, devices=("cpu",), dtypes=("bfloat16",), float8=("tensorwise",), compile=True)
    labels = [c.label for c in configurations(settings) if c.framework == "ampcore"]
    assert labels == [
        "ampcore cpu:0 float32",
        "ampcore cpu:0 bfloat16 AMP",
        "ampcore cpu:0 bfloat16 AMP + float8 tensorwise",
        "ampcore cpu:0 float32 captured",
        "ampcore cpu:0 bfloat16 AMP captured",
        "ampcore cpu:0 bfloat16 AMP + float8 tensorwise captured",
    ]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_table_says_what_it_compared_and_on_how_many_threads(cpu_run):
    """Without torch the 'vs torch' column is gone and the footer says why; it names the compiled path and the
    thread counts, which the JSON holds too."""
    import ampcore
    from ampcore_cpu import compiled

    result, printed, _ = cpu_run
    flat = _flat(printed)
    assert "vs torch" not in printed and "torch not measured (--no-torch)" in flat
    enabled = compiled.status().enabled
    assert f"compiled kernels: cpu:0 {'yes' if enabled else 'no'}" in flat
    assert result["backends"][0]["compiled"] is enabled
    gemms = result["backends"][0]["capabilities"]  # which GEMM ran bfloat16, float16 and float8 (ampcore_cpu.lowp_gemm)
    assert f"cpu:0 GEMMs: bf16 {gemms['bf16_gemm']}; f16 {gemms['f16_gemm']}; float8 {gemms['float8_gemm']}" in flat
    threads = result["threads"]
    assert threads["torch"] is None and threads["ampcore"]["num_threads"] == ampcore.get_num_threads()
    assert threads["ampcore"]["backends"]["cpu"]["blas"] >= 1
    assert f"threads {ampcore.get_num_threads()} ({threads['ampcore']['source']}): cpu blas" in flat


def test_without_torch_installed_one_line_says_so_and_how_to_add_it(tmp_path, monkeypatch, capsys):
    from ampcore.bench import torch_reference

    monkeypatch.setattr(torch_reference, "devices", lambda: [])
    monkeypatch.setattr(torch_reference, "missing", lambda: torch_reference.MISSING)
    result, _ = _bench(tmp_path, "--dtype", "bfloat16")
    printed = capsys.readouterr().out
    assert result["settings"]["torch_missing"] == torch_reference.MISSING
    assert {row["framework"] for row in result["configs"]} == {"ampcore"} and "vs torch" not in printed
    assert (
        _flat(printed).count("torch is not installed, so nothing ran beside ampcore; add it with: pip install torch")
        == 1
    )


def test_torch_runs_on_ampcores_thread_count(tmp_path):
    pytest.importorskip("torch", reason="torch is an optional dependency of the benchmark")
    import ampcore

    ampcore.set_num_threads(1)
    try:
        result, _ = _bench(tmp_path, "--dtype", "bfloat16")
    finally:
        ampcore.set_num_threads(None)
    assert result["threads"]["torch"] == 1 == result["threads"]["ampcore"]["num_threads"]
    assert result["threads"]["ampcore"]["backends"]["cpu"]["blas"] == 1
