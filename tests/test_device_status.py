"""Devices that cannot run kernels (``Backend.device_status``): never chosen by default, refused by name with
the reason, listed by ``ampcore info`` with it, skipped with it by the conformance suite; an index never moves."""

from __future__ import annotations

import json

import pytest

import ampcore
from ampcore.cli import main
from ampcore.plugins import registry

REASON = "its compiler cannot build for this CPU: error: unknown target CPU 'generic'; pip install a-runtime"


def test_the_default_device_skips_unusable_devices(register_fake):
    fake = register_fake(devices=3, unusable={0: REASON}, priority=10_000)
    assert registry.best_device() == ampcore.Device(fake.name, 1)
    assert ampcore.zeros(2).device == ampcore.Device(fake.name, 1)
    assert ampcore.zeros(2, device=fake.name).device.index == 1  # the name alone: the first usable device


def test_an_unusable_device_named_explicitly_raises_with_the_reason(register_fake):
    fake = register_fake(devices=2, unusable={0: REASON})
    with pytest.raises(ampcore.BackendUnavailableError, match=rf"device '{fake.name}:0'.*unusable.*unknown target"):
        ampcore.zeros(2, device=f"{fake.name}:0")
    assert ampcore.zeros(2, device=f"{fake.name}:1").device.index == 1  # indices do not move


def test_a_backend_with_no_usable_device_is_unavailable(register_fake):
    fake = register_fake(devices=2, unusable={0: "a", 1: "b"})
    assert fake.name not in {b.name for b in ampcore.available_backends()}
    with pytest.raises(ampcore.BackendUnavailableError, match="no usable device"):
        ampcore.zeros(1, device=fake.name)


def test_a_raising_device_status_counts_as_unusable(register_fake):
    class Raising(ampcore.testing.FakeBackend):
        def device_status(self, index=0):
            raise OSError("driver gone")

    fake = register_fake(cls=Raising)
    with pytest.raises(ampcore.BackendUnavailableError, match="device_status.. raised OSError: driver gone"):
        ampcore.zeros(1, device=f"{fake.name}:0")


def test_info_lists_unusable_devices_with_their_reason(register_fake, capsys):
    fake = register_fake(devices=2, unusable={1: REASON})
    assert main(["info", "--json"]) == 0
    entry = next(b for b in json.loads(capsys.readouterr().out)["backends"] if b["name"] == fake.name)
    assert [(d["index"], d["usable"]) for d in entry["devices"]] == [(0, True), (1, False)]
    assert entry["devices"][1]["reason"] == REASON and "storable" not in entry["devices"][1]
    assert entry["devices"][0]["device_name"] == "fake device 0"
    assert main(["info"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())  # the panel wraps long lines
    assert f"{fake.name}:1 unusable: {REASON}" in text


def test_info_lists_the_devices_of_an_unavailable_backend_with_their_reasons(register_fake, capsys):
    fake = register_fake(devices=2, unusable={0: "zero is broken", 1: "one is broken"})
    assert main(["info", "--json"]) == 0
    entry = next(b for b in json.loads(capsys.readouterr().out)["backends"] if b["name"] == fake.name)
    assert not entry["available"]
    assert [d["reason"] for d in entry["devices"]] == ["zero is broken", "one is broken"]


pytest_plugins = ["pytester"]


def test_the_conformance_suite_checks_each_device_and_skips_an_unusable_one_with_its_reason(register_fake, pytester):
    fake = register_fake(devices=2, unusable={1: REASON})
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--pyargs",
        "ampcore.conformance.checks.test_storage",
        "--ampcore-backend",
        fake.name,
        "-rs",
    )
    out = result.stdout.str()
    assert f"[{fake.name}:0" in out or f"{fake.name}:0" in out
    assert "unknown target CPU" in out  # the skip reason of fake:1
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) > 0 and outcomes.get("skipped", 0) > 0 and not outcomes.get("failed")
