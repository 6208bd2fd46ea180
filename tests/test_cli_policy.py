"""``ampcore policy`` and the cast-policy lines of ``ampcore info``."""

from __future__ import annotations

import json
import re

import pytest

from ampcore.cli import main


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


def test_policy_table_shows_category_and_source(capsys, wide):
    assert main(["policy", "--device", "cpu", "--op", "linear", "--op", "gelu", "--op", "cross_entropy"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^linear\s+lower\s+torch docs cpu list", out, re.M)
    assert re.search(r"^gelu\s+unlisted", out, re.M)
    assert "torch docs cpu list (as cross_entropy_loss)" in out


def test_piped_policy_table_is_plain_columns_within_120_characters(capsys):
    assert main(["policy", "--device", "cpu", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "cast policy on 'cpu'" and re.match(r"op\s+category\s+source$", lines[1])
    assert max(map(len, lines)) <= 120
    assert not any(line != line.rstrip() or "│" in line for line in lines)
    assert any(re.match(r"linear\s+lower\s+", line) for line in lines)


def test_policy_json_filters_by_category_and_marks_ops_ampcore_lacks(capsys):
    assert main(["policy", "--device", "cpu", "--category", "promote", "--all", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device_type"] == "cpu" and data["policy"] == "cpu"
    assert {r["op"]: r["implemented"] for r in data["ops"]} == {"cat": True, "stack": True, "index_copy": True}
    assert main(["policy", "--device", "cpu", "--category", "fp32", "--all", "--json"]) == 0
    lacking = {r["op"] for r in json.loads(capsys.readouterr().out)["ops"] if not r["implemented"]}
    assert "stft" in lacking and "prod" not in lacking


def test_policy_of_an_unknown_op_or_device_is_a_one_line_error(capsys):
    assert main(["policy", "--op", "no_such_op"]) == 2
    assert "op 'no_such_op' is not in policy 'cpu'" in capsys.readouterr().err
    assert main(["policy", "--device", "tpu"]) == 2
    assert "unknown backend 'tpu'" in capsys.readouterr().err


def test_info_names_the_policy_table_and_fallbacks(capsys, wide, register_fake):
    fake = register_fake(policy="cuda", fallback_ops={"bfloat16": {"conv2d"}})
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"cast policy +cpu table \(ampcore policy --device cpu\)", out)
    panel = out.split(f"─ {fake.name} ─", 1)[1].split("╰", 1)[0]
    assert re.search(r"cast policy +cuda table", panel)
    assert re.search(r"float32 fallback \(bfloat16\) +conv2d", panel)


def test_policy_into_a_pipe_keeps_every_op_name_whole(run_python):
    proc = run_python("", args=("-m", "ampcore", "policy", "--device", "cpu"), env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    registered = r"torch docs cpu list; torch 2.13 AutocastCPU registration"  # the rest may wrap under it
    assert re.search(rf"^binary_cross_entropy_with_logits +fp32 +{registered}", proc.stdout, re.M)
    assert re.search(rf"^binary_cross_entropy +fp32 +{registered}", proc.stdout, re.M)
    assert "…" not in proc.stdout
