"""The conformance suite tested on fake backends: honest ones (capabilities switched off) pass, with "not
supported" where they say no; deliberately broken ones FAIL in the check that names the defect; known gaps,
the report, the JSON and ``ampcore conformance`` behave.

The suite runs in-process through pytest's ``pytester``, so a fake registered here is the backend it checks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore.cli import main
from ampcore.conformance import KnownGapsError, load_known_gaps
from ampcore.plugins import hookimpl, registry
from ampcore.testing import FakeBackend

pytest_plugins = ["pytester"]


class Result:
    """One in-process run of the suite: pytest's outcome and the JSON report of the one backend checked."""

    def __init__(self, run: Any, report: dict[str, Any]):
        self.run, self.report = run, report
        self.ret = run.ret

    def cells(self, outcome: str) -> set[tuple[str, str, str]]:
        return {(c["check"], c["op"], c["dtype"]) for c in self.report["cells"] if c["outcome"] == outcome}

    def checks(self, outcome: str) -> set[str]:
        return {check for check, _, _ in self.cells(outcome)}


@pytest.fixture
def suite(pytester: pytest.Pytester) -> Any:
    """``suite(backend_name, *modules, *extra_args)`` runs the named check modules (all if none) in-process."""

    def run(name: str, *modules: str, args: tuple[str, ...] = ()) -> Result:
        path = pytester.path / "report.json"
        targets = [f"ampcore.conformance.checks.test_{m}" for m in modules] or ["ampcore.conformance"]
        outcome = pytester.runpytest_inprocess(
            "-p",
            "no:cacheprovider",
            "--pyargs",
            *targets,
            "--ampcore-backend",
            name,
            "--ampcore-json",
            str(path),
            *args,
        )
        backends = json.loads(path.read_text())["backends"] if path.exists() else []
        return Result(outcome, backends[0] if backends else {})

    return run


# --------------------------------------------------------------------------- honest backends pass
HONEST = {
    "every dtype": {},
    "no float64": {"storable": [d for d in dt.ALL_DTYPES if d is not dt.float64]},
    "bfloat16 storage only": {
        "native": [dt.float64, dt.float32, dt.int64, dt.int32, dt.bool_],
        "emulated": [dt.float16],
        "autocast_dtype": dt.float16,
    },
    "no 2-byte floats": {"storable": [dt.float64, dt.float32, dt.int64, dt.int32, dt.bool_]},
}


@pytest.mark.slow
@pytest.mark.parametrize("config", HONEST, ids=list(HONEST))
def test_suite_passes_on_an_honest_fake_backend(suite, register_fake, config):
    backend = register_fake(**HONEST[config])
    result = suite(backend.name)
    assert result.ret == 0, result.run.stdout.str()[-3000:]
    assert result.report["passed"] and result.report["summary"]["fail"] == 0
    assert result.report["summary"]["pass"] > 100
    unsupported = {d for _, _, d in result.cells("not supported")}
    passing = {d for _, _, d in result.cells("pass")}
    for d in dt.FLOAT_DTYPES:
        if d in backend.native | backend.emulated:
            assert d.name in passing and ("kernels", "add", d.name) in result.cells("pass")
        else:
            assert d.name in unsupported, f"{d.name} is not computed: its kernel cells must say 'not supported'"
            assert ("kernels", "add", d.name) in result.cells("not supported")


# --------------------------------------------------------------------------- broken backends fail
# defect -> (the check modules to run, the (check, op, dtype) cells that must fail)
DEFECTS = {
    "truncating_casts": (("rounding",), {("rounding", "cast", "float16"), ("rounding", "cast", "bfloat16")}),
    "float32_inside": (
        ("rounding", "storage"),
        {("storage", "bytes per element", "float16"), ("rounding", "no_silent_float32", "float16")},
    ),
    "low_precision_accumulation": (
        ("kernels_reductions",),
        {("kernels", "sum", "float16"), ("kernels", "matmul", "bfloat16")},
    ),
    "unscale_ignores_nan": (("amp_kernels",), {("amp_kernels", "unscale_and_check", "float32")}),
    "integer_add_off_by_one": (("kernels",), {("kernels", "add", "int64"), ("kernels", "add", "int32")}),
    "unchecked_adamw_step": (
        ("fused",),
        {("fused", "adamw_step.arguments", "float32"), ("fused", "adamw_step.arguments", "bfloat16")},
    ),
    "adamw_step_amp_ignores_skip": (
        ("fused",),
        {("fused", "adamw_step_amp", "float32"), ("fused", "adamw_step_amp", "float16")},
    ),
    "floating_point_warnings": (("kernels",), {("kernels", "log", "float32"), ("kernels", "div", "float16")}),
}


@pytest.mark.parametrize("defect", DEFECTS)
def test_suite_fails_on_a_broken_backend_where_the_defect_is(suite, register_fake, defect):
    modules, must_fail = DEFECTS[defect]
    backend = register_fake(defects=(defect,))
    result = suite(backend.name, *modules)
    assert result.ret == 1, f"the suite passed a backend with {defect}"
    assert not result.report["passed"]
    failing = result.cells("fail")
    assert must_fail <= failing, f"expected {sorted(must_fail - failing)} among the failures {sorted(failing)}"
    honest = suite(register_fake().name, *modules)
    assert honest.ret == 0, "the same checks pass on the fake without the defect"


def test_a_max_that_drops_keepdims_fails_and_every_failure_names_max(suite, register_fake):
    """The core checks each kernel's output shape: the broken max fails its own check first in the report, and
    the ops built on it (softmax, cross-entropy, sdpa, training) fail with a KernelError naming max instead of
    a raw broadcast error."""
    result = suite(register_fake(defects=("max_ignores_keepdims",)).name)
    assert result.ret == 1
    failures = [
        (c["check"], c["op"], t["message"])
        for c in result.report["cells"]
        for t in c["tests"]
        if t["outcome"] == "fail"
    ]
    assert ("kernels", "max") in {(check, op) for check, op, _ in failures}
    unnamed = [f for f in failures if "'max'" not in f[2] and "max(" not in f[2]]
    assert not unnamed, f"failures that do not name max: {unnamed[:5]}"
    assert failures[0][0] == "kernels", "the kernel's own check comes first in the report"
    problems = [line for line in result.run.stdout.lines if line.startswith("FAIL ")]
    assert "/test_kernels" in problems[0], problems[:3]


class MissingMatmul:
    """A plugin whose backend lacks the matmul primitive: registration records it as broken."""

    @hookimpl
    def ampcore_backends(self):
        return [FakeBackend(name="nomatmul", missing=("matmul",))]


def test_suite_fails_on_a_backend_missing_a_primitive_and_names_it(suite, monkeypatch):
    monkeypatch.setattr(registry, "broken", list(registry.broken))
    ampcore.register_plugin(MissingMatmul(), name="nomatmul")
    try:
        result = suite("nomatmul", "contract")
        assert result.ret == 1
        assert "missing primitive kernels matmul" in result.run.stdout.str()
    finally:
        registry.pm.unregister(name="nomatmul")


# --------------------------------------------------------------------------- known gaps
def write_gaps(path: Path, *entries: dict[str, str]) -> Path:
    lines = []
    for entry in entries:
        lines.append("[[gap]]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in entry.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


# low_precision_accumulation's cells: a gap names each dtype it covers (one without would cover the float32 and
# integer cells too, which pass, and a gap that passes fails the run)
_GAPS_OF_THE_DEFECT = tuple(
    {"check": "kernels", "op": op, "dtype": dtype, "reason": "accumulates in the input dtype, fix in #99"}
    for op in ("sum", "cumsum", "matmul")
    for dtype in ("float16", "bfloat16")
)


def test_known_gaps_turn_failures_into_xfail_and_a_stale_one_fails_the_run(suite, register_fake, tmp_path):
    backend = register_fake(defects=("low_precision_accumulation",))
    gaps = write_gaps(
        tmp_path / "gaps.toml",
        *_GAPS_OF_THE_DEFECT,
        {"check": "kernels", "op": "neg", "dtype": "float32", "reason": "once broken, now fixed"},
        {"check": "kernels", "op": "no-such-op", "reason": "a typo"},
    )
    result = suite(backend.name, "kernels", "kernels_reductions", args=("--ampcore-known-gaps", str(gaps)))
    assert result.ret == 1, "a known gap that passes must fail the run: " + result.run.stdout.str()[-3000:]
    assert ("kernels", "sum", "float16") in result.cells("xfail")
    assert ("kernels", "neg", "float32") in result.cells("stale")
    assert not result.cells("fail") and not result.report["passed"]
    assert any("no-such-op" in g for g in result.report["unused_known_gaps"])
    out = result.run.stdout.str()
    assert "known gap matches no check" in out and "stale" in out and "listed as a known gap but passes" in out
    assert "FAILS" in out
    fixed = write_gaps(tmp_path / "fixed.toml", *_GAPS_OF_THE_DEFECT)
    result = suite(backend.name, "kernels", "kernels_reductions", args=("--ampcore-known-gaps", str(fixed)))
    assert result.ret == 0, "without the stale entry the run passes: " + result.run.stdout.str()[-3000:]


def test_a_backend_ships_its_known_gaps_file(suite, register_fake, tmp_path):
    gaps = write_gaps(tmp_path / "gaps.toml", *_GAPS_OF_THE_DEFECT)

    class Shipped(FakeBackend):
        def conformance_known_gaps(self) -> str:
            return str(gaps)

    backend = register_fake(cls=Shipped, defects=("low_precision_accumulation",))
    result = suite(backend.name, "kernels_reductions")
    assert result.ret == 0 and ("kernels", "sum", "float16") in result.cells("xfail")


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("[[gap]]\nop = 'sum'\nreason = 'x'\n", "non-empty string 'check'"),
        ("[[gap]]\ncheck = 'kernels'\n", "non-empty string 'reason'"),
        ("[[gap]]\ncheck = 'kernels'\nreason = 'x'\nopp = 'sum'\n", "unknown keys ['opp']"),
        ("[gaps]\ncheck = 'kernels'\n", "unknown tables ['gaps']"),
        ("[[gap]\n", "cannot read"),
    ],
)
def test_a_malformed_known_gaps_file_is_refused_naming_the_problem(tmp_path, text, complaint):
    path = tmp_path / "gaps.toml"
    path.write_text(text)
    with pytest.raises(KnownGapsError, match=str(path)) as info:
        load_known_gaps(path)
    assert complaint in str(info.value)


def test_a_malformed_known_gaps_file_stops_the_run(suite, register_fake, tmp_path):
    path = tmp_path / "gaps.toml"
    path.write_text("[[gap]]\ncheck = 'kernels'\n")
    result = suite(register_fake().name, "contract", args=("--ampcore-known-gaps", str(path)))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "non-empty string 'reason'" in result.run.stderr.str()


# --------------------------------------------------------------------------- unavailable, report, CLI
def test_an_unavailable_backend_is_skipped_with_its_reason(suite, register_fake):
    from ampcore import Availability

    class Offline(FakeBackend):
        def availability(self):
            return Availability(False, "no device: libfake.so not found")

    result = suite(register_fake(cls=Offline).name, "contract")
    assert result.ret == 0
    assert result.report["summary"]["skipped"] > 0 and result.report["summary"]["pass"] == 0
    assert "libfake.so not found" in result.run.stdout.str()


def test_the_json_report_carries_capabilities_versions_and_every_cell(suite, register_fake):
    backend = register_fake(storable=[dt.float32, dt.float16, dt.int64, dt.bool_])
    report = suite(backend.name, "contract", "storage").report
    assert report["backend"] == backend.name and report["device"] == f"{backend.name}:0"
    assert report["capabilities"]["storable"] == ["bool", "float16", "float32", "int64"]
    assert report["environment"]["ampcore"] == ampcore.__version__ and report["environment"]["numpy"]
    cell = next(c for c in report["cells"] if (c["check"], c["op"], c["dtype"]) == ("storage", "round trip", "float64"))
    assert cell["outcome"] == "not supported" and "does not claim to store float64" in cell["tests"][0]["message"]


def test_the_report_table_shows_ops_by_dtype(suite, register_fake):
    result = suite(register_fake().name, "storage")
    out = result.run.stdout.str()
    assert "round trip" in out and "bf16" in out and "passes" in out
    for state in ("pass:", "FAIL:", "n/s: not supported", "skip:", "xfail:", "STALE:", "blank:"):
        assert state in out, f"the legend under the table must explain {state!r}"


def test_the_suite_checks_integer_arithmetic_and_integer_division_promotes(suite, register_fake):
    """Integer add/sub/mul/pow/maximum/minimum and neg/abs/sign are checked exactly; int / int is true division
    in float32 (torch's rule), so the integer columns of those rows are not blank."""
    result = suite(register_fake().name, "kernels", args=("-k", "integer"))
    assert result.ret == 0, result.run.stdout.str()[-3000:]
    passing = result.cells("pass")
    for op in ("add", "sub", "mul", "pow", "maximum", "minimum", "neg", "abs", "sign", "div", "exp"):
        for dtype in ("int64", "int32"):
            assert ("kernels", op, dtype) in passing, (op, dtype)


def test_cli_runs_the_suite_and_writes_json(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "cpu.json"
    assert main(["conformance", "--backend", "cpu", "--json", str(path), "--", "-k", "contract"]) == 0
    out = capsys.readouterr().out
    assert "ampcore conformance: cpu passes" in out and "primitives present" in out
    report = json.loads(path.read_text())["backends"][0]
    assert report["passed"] and report["distribution"] == "ampcore-cpu"
    assert {c["check"] for c in report["cells"]} == {"contract"}


def test_cli_summary_names_each_failing_check_in_one_line_without_tracebacks(
    tmp_path, capsys, monkeypatch, register_fake
):
    monkeypatch.chdir(tmp_path)
    backend = register_fake(defects=("truncating_casts",))
    assert main(["conformance", "--backend", backend.name, "--report", "summary", "--", "-k", "rounding"]) == 1
    lines = capsys.readouterr().out.splitlines()
    failed = [line for line in lines if line.startswith("FAILED ")]
    assert len(failed) >= 4 and all(
        "test_rounding.py::test_narrowing_cast_rounds_to_nearest_even[" in line for line in failed
    )
    assert f"ampcore conformance: {backend.name} FAILS ({len(failed)} fail, " in "\n".join(lines)
    assert len(lines) <= len(failed) + 8, "\n".join(lines)  # progress, the verdict, pytest's header and count


def test_cli_refuses_an_unknown_or_unavailable_backend_in_one_line(capsys, register_fake):
    assert main(["conformance", "--backend", "nosuch"]) == 2
    assert "unknown backend 'nosuch'" in capsys.readouterr().err
    assert main(["conformance", "--backend", "cpu", "--known-gaps", "/nonexistent.toml"]) == 2
    assert "/nonexistent.toml" in capsys.readouterr().err


# --------------------------------------------------------------------------- the guide's example conforms
def test_the_guides_minimal_backend_passes_the_suite(suite):
    """docs/writing-a-backend.md walks an author to a passing suite: its `tiny` backend must pass."""
    import types

    from test_plugins import doc_block

    module = types.ModuleType("ampcore_tiny_plugin")
    exec(compile(doc_block("# ampcore_tiny/plugin.py"), "ampcore_tiny/plugin.py", "exec"), module.__dict__)
    backend = ampcore.register_backend(module.TinyBackend())
    try:
        result = suite(backend.name)
        assert result.ret == 0, result.run.stdout.str()[-3000:]
        assert ("kernels", "add", "float16") in result.cells("not supported")
        # the guide shows the verdict's form (its counts grow with every declared op, so none is pinned); the
        # run gives that verdict, and quietly
        shown = re.search(r"tiny passes \(N pass, M not supported\)", doc_block("$ python -m venv"))
        assert shown, "docs/writing-a-backend.md no longer shows the tiny backend's conformance verdict"
        summary = result.report["summary"]
        assert summary["pass"] > 300 and summary["not supported"] > 0 and summary.get("fail", 0) == 0, summary
        assert "warnings" not in result.run.parseoutcomes(), result.run.stdout.str()[-3000:]
    finally:
        registry.unregister_backend(backend.name)


def test_another_projects_backend_fixture_is_left_alone(pytester):
    """The plugin is active in every pytest run of the environment: it must not hijack a fixture of the same name."""
    pytester.makeconftest("import pytest\n\n@pytest.fixture\ndef backend():\n    return 'theirs'\n")
    pytester.makepyfile("def test_it(backend):\n    assert backend == 'theirs'\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "ampcore conformance" not in result.stdout.str()


# --------------------------------------------------------------------------- float8
def test_float8_checks_pass_on_the_core_compositions_of_an_honest_backend(suite, register_fake):
    result = suite(register_fake(float8="emulated").name, "float8")
    assert result.ret == 0, result.run.stdout.str()[-3000:]
    ops = {op for _, op, _ in result.cells("pass")}
    assert {"quantize_float8", "scaled_mm", "cast"} <= ops


def test_float8_checks_skip_with_the_reason_on_a_backend_without_float8(suite, register_fake):
    result = suite(register_fake(float8_reason="no float8 on this fake").name, "float8")
    assert result.ret == 0 and not result.cells("pass") and not result.cells("fail")
    assert result.cells("not supported")
    messages = {t["message"] for c in result.report["cells"] for t in c["tests"]}
    assert all("has no float8 (no float8 on this fake)" in m for m in messages), messages


def test_a_float8_cast_rounded_toward_zero_fails_naming_the_kernel(suite, register_fake):
    backend = register_fake(float8="emulated", defects=("float8_truncating_quantize",))
    result = suite(backend.name, "float8", args=("-k", "not block_scaled"))
    assert result.ret == 1, "the suite passed a float8 cast that truncates"
    failing = result.cells("fail")
    assert ("float8", "quantize_float8", "float8_e4m3fn") in failing
    assert ("float8", "quantize_float8", "float8_e5m2") in failing
    # ... and the current-scaling cast, which the fake composes from it
    assert {op for _, op, _ in failing} == {"quantize_float8", "quantize_float8_current"}, failing
    result.run.stdout.fnmatch_lines(["*quantize_float8(float16 -> float8_e4m3fn, saturate=True)*elements differ*"])
