"""The ``ampcore`` command line: ``info`` (text and JSON) and ``train``, and its error reporting."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

import ampcore
from ampcore.cli import main
from ampcore.kernels import FUSED, PRIMITIVES
from ampcore.plugins import BrokenPlugin, hookimpl, registry


@pytest.fixture
def wide(monkeypatch):
    """A wide terminal, so rich does not wrap the lines the tests look for."""
    monkeypatch.setenv("COLUMNS", "200")


def test_info_lists_cpu_as_available_with_capabilities(capsys, wide):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"default device {ampcore.get_default_device()}" in out
    cpu_panel = out.split("─ cpu ─", 1)[1].split("╰", 1)[0]
    assert re.search(r"status +available", cpu_panel)
    assert re.search(r"storable +bfloat16, bool, float16, float32, float64, float8_e4m3fn,", out)
    assert re.search(r"float8 +emulated", out)
    assert re.search(r"native +bool, float32, float64, int32, int64", out)
    assert re.search(r"emulated +bfloat16, float16", out)
    assert re.search(r"autocast dtype +bfloat16", out)
    # the cpu backend has every fused kernel but the MX-scaled GEMM (scaled_mm_mx), which the core composes
    assert re.search(r"fused +(core reference: scaled_mm_mx[\s│]*)?cpu: adamw_step", out), cpu_panel
    assert "from ampcore-cpu 0.1.0  entry point ampcore_cpu.plugin" in out
    assert "broken plugins: none" in out


def test_info_shows_unavailable_backends_with_reason_and_broken_plugins(capsys, wide, register_fake, monkeypatch):
    from ampcore import Availability
    from ampcore.testing import FakeBackend

    class Offline(FakeBackend):
        def availability(self):
            return Availability(False, "no device: libfake.so not found")

    offline = register_fake(cls=Offline)
    broken = BrokenPlugin("exploder", "ImportError: exploder needs libboom", "import")
    monkeypatch.setattr(registry, "broken", [*registry.broken, broken])
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"─ {offline.name} ─" in out
    assert "unavailable: no device: libfake.so not found" in out
    assert "broken plugins" in out and "exploder" in out and "ImportError: exploder needs libboom" in out


def test_info_prints_brackets_in_reasons_and_errors_literally(capsys, wide, register_fake, monkeypatch):
    from ampcore import Availability
    from ampcore.testing import FakeBackend

    class Offline(FakeBackend):
        def availability(self):
            return Availability(False, "driver [bold] is too old")

    register_fake(cls=Offline)
    broken = BrokenPlugin("cudaish", "OSError: libcudart.so.12 not found in [/opt/cuda/lib64]", "import")
    monkeypatch.setattr(registry, "broken", [*registry.broken, broken])
    assert main(["info"]) == 0  # a closing-tag look-alike used to raise rich's MarkupError
    out = capsys.readouterr().out
    assert "unavailable: driver [bold] is too old" in out
    assert "OSError: libcudart.so.12 not found in [/opt/cuda/lib64]" in out


def test_info_json_has_the_same_facts(capsys, register_fake):
    fake = register_fake(storable=["float32", "bfloat16", "int64", "bool"], native=["float32", "int64", "bool"])
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    backends = {b["name"]: b for b in data["backends"]}
    cpu = backends["cpu"]
    assert cpu["available"] is True and cpu["priority"] == 100
    assert cpu["distribution"] == "ampcore-cpu" and cpu["entry_point"] == "ampcore_cpu.plugin"
    assert cpu["devices"][0]["emulated"] == ["bfloat16", "float16"]
    assert cpu["devices"][0]["autocast_dtype"] == "bfloat16"
    assert set(cpu["kernels"]["fused"]) == {
        "softmax",
        "softmax_backward",
        "log_softmax",
        "log_softmax_backward",
        "gelu",
        "gelu_backward",
        "max_pool2d_tiled",
        "max_pool2d_tiled_backward",
        "adamw_step",
        "adamw_step_amp",
        "quantize_float8",
        "quantize_float8_current",
        "scaled_mm",
        "scaled_mm_mx",
    }
    assert cpu["devices"][0]["float8"] == "emulated" and backends[fake.name]["devices"][0]["float8"] == "none"
    # every primitive and fused kernel its own but scaled_mm_mx (the core's composition); the elementwise programs'
    # kernels come on top as they are first used
    assert cpu["kernels"]["native"] >= len(PRIMITIVES | FUSED - {"scaled_mm_mx"})
    assert cpu["kernels"]["primitives"] == len(PRIMITIVES)
    assert backends[fake.name]["devices"][0]["storable"] == ["bfloat16", "bool", "float32", "int64"]
    assert backends[fake.name]["devices"][0]["emulated"] == ["bfloat16"]
    assert data["default_device"] == str(ampcore.get_default_device())
    assert isinstance(data["broken_plugins"], list)
    plugins = {p["name"]: p for p in data["plugins"]}
    assert plugins["cpu"]["distribution"] == "ampcore-cpu" and plugins["cpu"]["backends"] == ["cpu"]
    assert cpu["kernels"]["reference"] == sorted(n for n, p in cpu["kernels"]["fused"].items() if p == "core reference")


class FasterMatmul:
    """A kernel plugin: replaces one kernel of someone else's backend through ``ampcore_kernels``."""

    def __init__(self, target: str):
        self.target = target

    @hookimpl
    def ampcore_kernels(self, backend):
        if backend.name != self.target:
            return None
        plain = backend.kernels.matmul
        return {
            "matmul": lambda a, b: plain(a, b),
            "softmax": lambda x, axis: x,
            "softmax_backward": lambda y, gy, axis: gy,
        }


def test_info_names_the_plugin_that_provides_each_overridden_kernel(capsys, wide, register_fake):
    fake = register_fake()
    assert fake.kernels.provider("softmax") is None
    ampcore.register_plugin(FasterMatmul(fake.name), name="fastmm")
    try:
        assert fake.kernels.provider("matmul") == "fastmm"
        assert main(["info", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        kernels = next(b for b in data["backends"] if b["name"] == fake.name)["kernels"]
        assert kernels["overridden"] == {"matmul": "fastmm", "softmax": "fastmm", "softmax_backward": "fastmm"}
        assert kernels["fused"]["softmax"] == "fastmm" and "softmax" not in kernels["reference"]
        assert "log_softmax" in kernels["reference"]
        plugin = next(p for p in data["plugins"] if p["name"] == "fastmm")
        assert plugin["backends"] == [] and plugin["distribution"] is None
        assert plugin["kernels"] == {fake.name: ["matmul", "softmax", "softmax_backward"]}

        assert main(["info"]) == 0
        out = capsys.readouterr().out
        assert re.search(r"from plugins +matmul \(fastmm\), softmax \(fastmm\)", out)
        row = next(line for line in out.splitlines() if "│ fastmm" in line)
        assert "registered from code" in row and f"kernels matmul, softmax, softmax_backward for {fake.name}" in row
    finally:
        registry.pm.unregister(name="fastmm")


def test_python_dash_m_ampcore_info_shows_a_broken_plugin(tmp_path, run_python):
    info = tmp_path / "ampcore_crashy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ampcore-crashy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[ampcore.backends]\ncrashy = crashy_plugin\n")
    (tmp_path / "crashy_plugin.py").write_text(
        textwrap.dedent("""
        raise RuntimeError("crashy cannot find its driver")
    """)
    )
    proc = run_python("", args=("-m", "ampcore", "info"), path=tmp_path, env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "─ cpu ─" in proc.stdout and "available" in proc.stdout
    assert "crashy" in proc.stdout and "RuntimeError: crashy cannot find its driver" in proc.stdout


def test_train_one_epoch_prints_accuracy(capsys):
    assert main(["train", "--epochs", "1", "--device", "cpu"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps lines at the terminal width
    assert "training on cpu in bfloat16: autocast to bfloat16, no loss scaling needed; step captured" in out
    assert "test accuracy 0." in out and "train accuracy 0." in out and "0.00 host syncs/step" in out
    assert "20 of 23 steps replayed captured" in out


def test_train_eager_reads_the_host_once_per_step(capsys):
    assert main(["train", "--epochs", "1", "--device", "cpu", "--eager"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no loss scaling needed; eager; 1 epoch," in out and "1.00 host syncs/step" in out
    assert "replayed captured" not in out


def test_train_compile_prints_captured_beside_eager(capsys):
    assert main(["train", "--epochs", "1", "--device", "cpu", "--dtype", "float16", "--compile"]) == 0
    raw = capsys.readouterr().out
    assert "the step captured (ampcore.compile) vs eager (same seed and batches)\n" in raw
    out = " ".join(raw.split())
    assert re.search(r"float16 \(AMP\) captured .* float16 \(AMP\) eager", out)
    assert "float16: captured " in out and "x faster than eager" in out
    assert main(["train", "--epochs", "1", "--batch-size", "256", "--compile", "--compare", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["dtype"], r["compiled"]) for r in runs] == [
        ("bfloat16", True),
        ("bfloat16", False),
        ("float32", True),
        ("float32", False),
    ]
    assert runs[0]["final_loss"] == runs[1]["final_loss"] and runs[2]["final_loss"] == runs[3]["final_loss"]


def test_train_compare_prints_amp_beside_the_float32_baseline(capsys):
    assert main(["train", "--epochs", "1", "--device", "cpu", "--dtype", "float16", "--compare"]) == 0
    raw = capsys.readouterr().out
    # the title is a line of its own (a table title wraps at the table's width, mid-phrase); one epoch, singular
    assert "mixed precision vs the float32 baseline (same seed and batches)\n" in raw
    assert "; 1 epoch, batch size" in raw
    out = " ".join(raw.split())  # rich wraps lines at the terminal width
    assert "autocast to float16, GradScaler on" in out and "float32 (no AMP)" in out
    assert re.search(r"float16 \(AMP\) .* float32", out)
    assert re.search(r"final loss scale │ 65536 │ - ", out)
    assert "test accuracy difference: " in out


def test_train_json_compare_reports_both_runs(capsys):
    assert main(["train", "--epochs", "1", "--batch-size", "256", "--dtype", "float16", "--compare", "--json"]) == 0
    amp, fp32 = json.loads(capsys.readouterr().out)
    assert (amp["dtype"], amp["amp"], fp32["dtype"], fp32["amp"]) == ("float16", True, "float32", False)
    assert amp["loss_scale"] == 65536.0 and fp32["loss_scale"] is None


def test_train_float8_shows_the_recipe_and_each_layers_casts(capsys):
    assert main(["train", "--epochs", "1", "--device", "cpu", "--float8", "rowwise"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps lines at the terminal width
    assert "Linear layers in float8 (recipe rowwise)" in out and "test accuracy 0." in out
    assert "float8 casts (recipe rowwise)" in out
    assert re.search(r"0\.input │ [\d.e+-]+ │ [\d.e+-]+ │ 0 │ \d+", out) and "4.grad_output" in out


def test_train_json_reports_the_result(capsys):
    assert main(["train", "--epochs", "1", "--batch-size", "128", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["steps"] == 12 and result["epochs"] == 1
    assert result["device"] == str(ampcore.get_default_device())
    assert 0.0 <= result["test_accuracy"] <= 1.0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--device", "nosuch"], "ampcore train: error: unknown backend 'nosuch'; installed backends are "),
        (["train", "--device", "cpu:3"], "device 'cpu:3' does not exist; backend 'cpu' has 1 device(s)"),
        (
            ["train", "--dtype", "float8"],
            "'float8' (did you mean 'float' or 'float32'?) is not a training dtype; choose one of 'float16'",
        ),
        (["train", "--dtype", "None"], "or leave --dtype out for the device's autocast dtype"),
        (["train", "--dtype", "flaot16"], "dtype 'flaot16' (did you mean 'float16'"),
        (["train", "--compare", "--no-amp"], "but --no-amp turns AMP off; drop --no-amp"),
        (["train", "--compare", "--dtype", "float32"], "but --dtype float32 turns AMP off; drop --dtype float32"),
        (["train", "--compare", "--dtype", "fp32"], "but --dtype fp32 turns AMP off; drop --dtype fp32"),
        (["train", "--compare", "--no-amp", "--dtype", "fp32"], "but --no-amp and --dtype fp32 turn AMP off"),
        (["train", "--no-amp", "--dtype", "bf16"], "--no-amp trains in float32 but --dtype asks for 'bf16'; drop"),
        (
            ["train", "--no-amp", "--dtype", "float16"],
            "--no-amp trains in float32 but --dtype asks for 'float16'; drop",
        ),
        (["train", "--epochs", "0"], "epochs must be a positive integer, got 0"),
        (["train", "--float8", "blockwise"], "float8 recipe 'blockwise': unknown recipe 'blockwise'; the recipes are"),
        (["train", "--eager", "--compile"], "--compile trains a captured run beside an eager one, but --eager"),
    ],
)
def test_bad_train_options_exit_2_with_one_line_and_no_traceback(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_device_from_the_real_command_line(run_python):
    proc = run_python("", args=("-m", "ampcore", "train", "--device", "nosuch"))
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("ampcore train: error: unknown backend 'nosuch'; installed backends are ")
    assert "'cpu'" in line


def test_no_subcommand_prints_usage_and_fails(capsys):
    assert main([]) == 2
    assert "usage: ampcore" in capsys.readouterr().err


def test_dtype_errors_never_offer_none_and_no_amp_compare_names_only_given_options(capsys):
    assert main(["train", "--dtype", "None"]) == 2
    err = capsys.readouterr().err
    assert "None for" not in err and "'float16', 'bfloat16', 'float32'" in err
    assert main(["train", "--compare", "--no-amp"]) == 2
    assert "--dtype" not in capsys.readouterr().err  # the user never passed it


@pytest.mark.parametrize("alias, name", [("fp16", "float16"), ("bf16", "bfloat16"), ("half", "float16")])
def test_train_accepts_the_dtype_aliases_the_api_accepts(capsys, alias, name):
    assert main(["train", "--epochs", "1", "--batch-size", "256", "--dtype", alias, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dtype"] == name


def test_no_amp_with_dtype_float32_is_not_a_conflict(capsys):
    assert main(["train", "--epochs", "1", "--no-amp", "--dtype", "float32", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dtype"] == "float32"


@pytest.mark.parametrize("argv", [["train", "--bogus"], ["bench", "--no-torch", "--bogus"], ["policy", "extra"]])
def test_an_unknown_argument_prints_the_subcommands_usage_and_exits_2(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: ampcore {argv[0]} ")
    assert f"ampcore {argv[0]}: error: unrecognized arguments: {argv[-1]}" in err


def _help_entries(command: str, capsys: pytest.CaptureFixture) -> dict[str, str]:
    """``ampcore COMMAND --help``'s options: the option's first word -> its entry, wrapped lines joined."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    entries: list[str] = []
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("  -"):
            entries.append(line.strip())
        elif entries and line.startswith("   "):
            entries[-1] += " " + line.strip()
    return {entry.split()[0].rstrip(","): entry for entry in entries}


@pytest.mark.parametrize("command", ["info", "policy", "train", "bench", "conformance"])
def test_help_shows_each_default_at_most_once_and_none_for_flags(capsys, command):
    for entry in _help_entries(command, capsys).values():
        assert entry.count("(default:") <= 1, entry
        assert not re.search(r"\(default: (True|False|None)\)", entry), entry


def test_help_shows_the_defaults_argparse_knows_and_the_ones_the_help_states(capsys):
    bench = _help_entries("bench", capsys)
    assert bench["--steps"].endswith("timed steps per configuration (default: 20)")
    assert bench["--no-torch"].endswith("do not measure torch even if it is installed")
    assert bench["--batch"].endswith("batch size (default: the model's)")
    train = _help_entries("train", capsys)
    assert train["--no-amp"].endswith("train the float32 baseline only")
    assert train["--device"].endswith("(default: the best available backend)")


def test_train_into_a_pipe_prints_each_line_whole(run_python):
    proc = run_python("", args=("-m", "ampcore", "train", "--epochs", "1", "--device", "cpu"), env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("training on cpu in bfloat16: ") and line.endswith(", seed 0") for line in lines)
    summary = next(line for line in lines if line.startswith("train accuracy "))
    assert re.search(r" final loss .* on cpu \(bfloat16\) .* host syncs/step", summary)


def test_conformance_runs_in_the_quick_start_environment_because_pytest_is_a_core_dependency():
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    assert any(req.replace(" ", "").startswith("pytest>=") for req in project["dependencies"])
    quick_start = (Path(__file__).resolve().parents[1] / "README.md").read_text().split("## Quick start")[1]
    assert "pip install -q -e . -e backends/cpu" in quick_start  # no extra needed for `ampcore conformance`
