"""Training in float8 with each recipe tracks bfloat16: the short CI version of docs/float8.md's 300-step runs.

The char-level GPT of examples/float8_gpt (one block, width 32, 30 steps)
trains under bfloat16 autocast, then once per recipe with its Linear layers
in float8; every run starts from the same weights and sees the same batches.
Each float8 run must learn (its held-out loss ends well below the first
step's) and end within 2% of the bfloat16 run's held-out loss, the issue's
bar for the 300-step runs (measured: within 0.4% at 30 steps, 0.7% at 300).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ampcore import nn
from ampcore.float8 import convert_to_float8_training
from ampcore.training import TrainConfig, train

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "float8_gpt" / "train_gpt.py"
TOLERANCE = 0.02


def _example():
    spec = importlib.util.spec_from_file_location("float8_train_gpt_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gpt():
    return _example()


@pytest.fixture(scope="module")
def tiny(gpt):
    return gpt.GPTConfig(width=32, heads=2, layers=1, context=32, batch=8)


@pytest.fixture(scope="module")
def bf16_run(gpt, tiny):
    return gpt.run(None, steps=30, cfg=tiny)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "delayed,amax_history_len=16", "mxfp8"])
def test_each_recipe_learns_and_ends_within_two_percent_of_bfloat16(gpt, tiny, bf16_run, recipe: str) -> None:
    run = gpt.run(recipe, steps=30, cfg=tiny)
    assert run["final_loss"] < 0.8 * run["first_loss"], run
    assert abs(run["final_loss"] / bf16_run["final_loss"] - 1) < TOLERANCE, (run["final_loss"], bf16_run["final_loss"])


def test_bfloat16_baseline_learns(bf16_run) -> None:
    assert bf16_run["final_loss"] < 0.8 * bf16_run["first_loss"]


def test_every_linear_of_the_gpt_is_converted(gpt, tiny) -> None:
    model = convert_to_float8_training(gpt.CharGPT(tiny), "tensorwise")
    linears = [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    assert linears == ["blocks.0.qkv", "blocks.0.proj", "blocks.0.fc", "blocks.0.out", "head"]
    assert all(type(m).__name__ == "Float8Linear" for name, m in model.named_modules() if name in linears)
    assert isinstance(model.tok, nn.Embedding)


def test_train_float8_reports_stats() -> None:
    result = train(TrainConfig(device="cpu", dtype="bfloat16", epochs=1, float8="delayed,amax_history_len=4"))
    assert result.float8 == "delayed,amax_history_len=4"
    assert set(result.float8_stats) >= {"0.input", "0.weight", "0.grad_output", "4.grad_output"}
    assert result.test_accuracy > 0.5
    row = result.float8_stats["0.weight"]
    assert row["steps"] > 0 and row["scale"] > 0 and row["saturated"] >= 0


def test_train_config_rejects_an_unknown_recipe() -> None:
    with pytest.raises(ValueError, match="unknown recipe 'fp8'"):
        TrainConfig(float8="fp8")
    assert TrainConfig(float8="delayed, margin=1").float8 == "delayed,margin=1"
