"""The torch ports in examples/torch_ports run on ampcore with only ``torch`` renamed (issue 27).

Each port is one file written against PyTorch; ``harness.py`` renames ``torch`` to ``ampcore`` in its
text and runs it. Every feature a renamed port names must exist in ampcore (found with hasattr /
inspect.signature, and a boolean-mask assignment that must give the right values): one that goes missing,
or gives a wrong value, fails here and names the attributes, rather than skipping the port.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import ampcore

PORTS_DIR = Path(__file__).resolve().parent.parent / "examples" / "torch_ports"


def _load_harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("torch_ports_harness", PORTS_DIR / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = _load_harness()

# A few steps: two epochs of four batches each, nothing generated at the end.  (Four steps in all would leave
# OneCycleLR's warm-up phase 0 steps long, which divides by zero in torch's schedule as in ours.)
FEW_STEPS = ["--epochs", "2", "--batches-per-epoch", "4"]
EXTRA = {"gpt": ["--sample", "4"], "cnn": [], "vae": [], "lstm": []}


def _require_features(port: str) -> None:
    missing = harness.missing_features(port)
    assert not missing, f"the {port} port needs what ampcore lacks (or gets wrong): {', '.join(missing)}"


def _device_or_skip(device: str) -> str:
    if device == "cpu":
        return device
    try:
        backend = ampcore.get_backend(device)
    except ampcore.UnknownBackendError as err:
        pytest.skip(f"backend {device!r} is not installed: {err}")
    availability = backend.availability()
    if not availability:
        pytest.skip(f"backend {device!r} is unavailable: {availability.reason}")
    return device


@pytest.mark.parametrize("port", harness.PORTS)
def test_port_is_written_against_torch_and_renamed_only_by_the_word(port: str) -> None:
    original = harness.source(port, "torch")
    renamed = harness.source(port, "ampcore")
    assert "import torch" in original and "ampcore" not in original
    assert "torch" not in renamed
    assert re.sub(r"\bampcore\b", "torch", renamed) == original
    assert "import ampcore as torch" not in renamed


def test_rename_touches_the_word_torch_only() -> None:
    text = "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\nx = torchvision\n"
    assert harness.rename(text) == (
        "import ampcore\nimport ampcore.nn as nn\nfrom ampcore.utils.data import DataLoader\nx = torchvision\n"
    )


def test_named_features_follow_imports_aliases_and_decorators() -> None:
    text = (
        "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader as DL\n"
        "@torch.inference_mode()\ndef f():\n    return nn.ModuleDict(), torch.optim.lr_scheduler.StepLR, DL\n"
    )
    named = harness.named_features(text, root="torch")
    assert {"torch.inference_mode", "torch.nn.ModuleDict", "torch.optim.lr_scheduler.StepLR"} <= set(named)
    assert "torch.utils.data.DataLoader" in named
    assert "torch.optim" not in named  # only the whole chain, not its prefixes


@pytest.mark.parametrize("port", harness.PORTS)
def test_ampcore_has_every_feature_the_port_uses(port: str) -> None:
    assert harness.missing_features(port) == []


def test_boolean_mask_assignment_gives_the_values_the_gpt_port_relies_on() -> None:
    x = ampcore.tensor([1.0, 2.0, 3.0])
    x[x < 2.5] = 0.0
    assert x.tolist() == [0.0, 0.0, 3.0]


def test_a_wrong_boolean_mask_assignment_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A regression that assigns the wrong values (not only one that raises) is reported by missing_features."""
    original = ampcore.Tensor.__setitem__
    monkeypatch.setattr(ampcore.Tensor, "__setitem__", lambda self, key, value: original(self, key, value + 1.0))
    assert "ampcore.Tensor.__setitem__ with a boolean mask" in harness.missing_features("gpt")


def test_missing_features_names_what_ampcore_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "source", lambda port, framework="ampcore": "import ampcore\nampcore.no_such_op(1)\n")
    monkeypatch.setitem(harness.TENSOR_METHODS, "cnn", ("no_such_method", "view"))
    missing = harness.missing_features("cnn")
    assert "ampcore.no_such_op" in missing
    assert "ampcore.Tensor.no_such_method" in missing
    assert "ampcore.Tensor.view" not in missing


# opencl (PoCL) compiles each kernel on first use: 25-65 s a port with a cold kernel cache, seconds with a warm one
@pytest.mark.parametrize("device", ["cpu", pytest.param("opencl", marks=pytest.mark.slow)])
@pytest.mark.parametrize("port", harness.PORTS)
def test_port_trains_a_few_steps_with_float16_autocast_and_scaler(port: str, device: str, tmp_path: Path) -> None:
    _require_features(port)
    device = _device_or_skip(device)
    argv = [*FEW_STEPS, *EXTRA[port], "--device", device, "--checkpoint", str(tmp_path / "ckpt.pt")]
    losses, _ = harness.run(port, "ampcore", argv)
    assert len(losses) == 8
    assert all(math.isfinite(loss) for loss in losses), losses


@pytest.mark.parametrize("port", harness.PORTS)
def test_checkpoint_written_mid_run_resumes_with_bit_identical_losses(port: str, tmp_path: Path) -> None:
    _require_features(port)
    ckpt = str(tmp_path / "mid.pt")
    common = ["--epochs", "3", "--batches-per-epoch", "2", *EXTRA[port], "--device", "cpu", "--checkpoint", ckpt]
    uninterrupted, _ = harness.run(port, "ampcore", [*common, "--save-at-epoch", "0"])
    resumed, _ = harness.run(port, "ampcore", [*common, "--resume", ckpt])
    assert len(uninterrupted) == 6 and len(resumed) == 4
    assert resumed == uninterrupted[2:]  # bit for bit: float equality, no tolerance


def test_the_compiled_gpt_port_trains_and_resumes_with_eager_bits(tmp_path: Path) -> None:
    """``--compile`` (``torch.compile(model)``, ampcore.compile after the rename): the captured forward and
    backward give the eager port's losses bit for bit, and a resumed compiled run the uninterrupted one's."""
    _require_features("gpt")
    ckpt = str(tmp_path / "mid.pt")
    common = ["--epochs", "3", "--batches-per-epoch", "3", "--sample", "4", "--device", "cpu", "--checkpoint", ckpt]
    eager, _ = harness.run("gpt", "ampcore", common)
    uninterrupted, _ = harness.run("gpt", "ampcore", [*common, "--compile", "--save-at-epoch", "0"])
    resumed, _ = harness.run("gpt", "ampcore", [*common, "--compile", "--resume", ckpt])
    assert uninterrupted == eager  # float equality: the same bits
    assert resumed == uninterrupted[3:]


@pytest.mark.parametrize("port", harness.PORTS)
def test_port_resumes_bit_identically_on_torch_itself(port: str, tmp_path: Path) -> None:
    """The port's own resume logic, checked on real torch (the test command installs torch's CPU wheel)."""
    pytest.importorskip("torch")
    ckpt = str(tmp_path / "mid.pt")
    common = ["--epochs", "3", "--batches-per-epoch", "2", *EXTRA[port], "--device", "cpu", "--checkpoint", ckpt]
    uninterrupted, _ = harness.run(port, "torch", [*common, "--save-at-epoch", "0"])
    resumed, _ = harness.run(port, "torch", [*common, "--resume", ckpt])
    assert resumed == uninterrupted[2:]


def test_harness_cli_passes_what_follows_double_dash_to_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, str, list[str]]] = []
    monkeypatch.setattr(harness, "run", lambda port, framework, argv: seen.append((port, framework, list(argv))))
    assert harness.main(["cnn", "--framework", "torch", "--", "--epochs", "1", "--device", "cpu"]) == 0
    assert seen == [("cnn", "torch", ["--epochs", "1", "--device", "cpu"])]


@pytest.mark.parametrize("model", ["LSTM", "GRU", "RNN_TANH"])
def test_lstm_port_gives_torchs_losses_from_torchs_weights(model: str, tmp_path: Path) -> None:
    """The recurrent language model, started from the weights torch drew (saved as .npz by the torch run) on the
    same batches, in float32 without dropout: ampcore's losses are torch's to float32 rounding (a few ulps of the
    loss over 8 steps of 16 recurrent steps each)."""
    pytest.importorskip("torch")
    _require_features("lstm")
    init = str(tmp_path / "init.npz")
    common = ["--epochs", "2", "--batches-per-epoch", "4", "--device", "cpu", "--amp", "none", "--dropout", "0"]
    common += ["--model", model, "--checkpoint", str(tmp_path / "ckpt.pt")]
    torch_losses, _ = harness.run("lstm", "torch", [*common, "--save-init", init])
    ours, _ = harness.run("lstm", "ampcore", [*common, "--init-weights", init])
    assert len(ours) == len(torch_losses) == 8
    # float32 carries 2**-24 = 6e-8 relative; 16 recurrent steps, 2 layers and a vocabulary-wide log-softmax stay
    # within 2**-20 of one another (measured: 1.3e-7 at worst); a wrong gate order or bias is off by percent.
    np.testing.assert_allclose(ours, torch_losses, rtol=2.0**-20)
