"""ampcore.utils.tensorboard.SummaryWriter: event files TensorBoard reads back, from ampcore tensors."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

import ampcore
from ampcore.utils.tensorboard import SummaryWriter, TensorBoardNotInstalledError

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator", reason="tensorboard is not installed (the test extra)"
)


def _read(log_dir):
    acc = event_accumulator.EventAccumulator(str(log_dir), size_guidance={"images": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_scalars_from_tensors_numbers_and_arrays_read_back(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalar("loss/train", ampcore.tensor(0.5), 0)
        writer.add_scalar("loss/train", ampcore.tensor([0.25], dtype=ampcore.float16), ampcore.tensor(1))
        writer.add_scalar("loss/train", np.float64(0.125), 2)
        writer.add_scalar("lr", 3e-4, 0)
    acc = _read(tmp_path)
    assert [(e.step, e.value) for e in acc.Scalars("loss/train")] == [(0, 0.5), (1, 0.25), (2, 0.125)]
    assert acc.Scalars("lr")[0].value == pytest.approx(3e-4, rel=1e-7)  # stored as float32
    with pytest.raises(ValueError, match=r"scalar_value must have one element, got shape \(2,\)"):
        SummaryWriter(tmp_path / "x").add_scalar("bad", ampcore.ones(2))


def test_histogram_counts_every_value_and_its_moments(tmp_path):
    values = ampcore.randn(1000)
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram("w", values, 3)
        writer.add_histogram("w_auto", values, 3, bins="auto")
    acc = _read(tmp_path)
    for tag in ("w", "w_auto"):
        histo = acc.Histograms(tag)[0].histogram_value
        v = values.numpy().astype(np.float64)
        assert histo.num == 1000 and sum(histo.bucket) == 1000
        assert histo.min == pytest.approx(v.min()) and histo.max == pytest.approx(v.max())
        assert histo.sum == pytest.approx(v.sum()) and histo.sum_squares == pytest.approx(v @ v)
        assert list(histo.bucket_limit) == sorted(histo.bucket_limit) and histo.bucket_limit[-1] >= v.max()


def test_images_text_and_grouped_scalars(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_image("rgb", ampcore.rand(3, 4, 5), 0)
        writer.add_image("gray", np.full((4, 5), 255, dtype=np.uint8), 0, dataformats="HW")
        writer.add_images("batch", ampcore.rand(2, 1, 4, 5), 0)
        writer.add_text("note", "**hello**", 0)
        writer.add_scalars("acc", {"train": 0.9, "test": ampcore.tensor(0.8)}, 5)
    acc = _read(tmp_path)
    assert (acc.Images("rgb")[0].width, acc.Images("rgb")[0].height) == (5, 4)
    assert acc.Images("batch")[0].width == 10  # two images side by side
    assert acc.Tensors("note/text_summary")[0].tensor_proto.string_val == [b"**hello**"]
    assert _read(tmp_path / "acc_test").Scalars("acc")[0].value == pytest.approx(0.8)


def test_without_tensorboard_the_error_names_the_fix(monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("tensorboard"):
            raise ImportError("No module named 'tensorboard'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(TensorBoardNotInstalledError, match=r"pip install 'ampcore\[tensorboard\]'"):
        SummaryWriter(tmp_path)
