"""ampcore.backends: torch.backends' flags; the one with a meaning sets the float32 matmul precision."""

from __future__ import annotations

import pytest

import ampcore
from ampcore import backends


@pytest.fixture(autouse=True)
def _restore_precision():
    before = ampcore.get_float32_matmul_precision()
    yield
    ampcore.set_float32_matmul_precision(before)


def test_cuda_matmul_allow_tf32_is_the_float32_matmul_precision():
    backends.cuda.matmul.allow_tf32 = True
    assert ampcore.get_float32_matmul_precision() == "high" and backends.cuda.matmul.allow_tf32 is True
    backends.cuda.matmul.allow_tf32 = False
    assert ampcore.get_float32_matmul_precision() == "highest" and backends.cuda.matmul.allow_tf32 is False
    ampcore.set_float32_matmul_precision("medium")
    assert backends.cuda.matmul.allow_tf32 is True


def test_cudnn_and_friends_accept_torchs_flags_and_report_nothing_available():
    for name, value in [("benchmark", True), ("deterministic", True), ("allow_tf32", False), ("enabled", False)]:
        setattr(backends.cudnn, name, value)
        assert getattr(backends.cudnn, name) is value
    assert backends.cudnn.is_available() is False and backends.cudnn.version() is None
    assert backends.mkldnn.is_available() is False and backends.mps.is_available() is False
    assert backends.mps.is_built() is False
    backends.cuda.enable_flash_sdp(False)
    assert backends.cuda.flash_sdp_enabled() is False
    backends.cuda.enable_flash_sdp(True)


def test_a_flag_torch_has_and_ampcore_lacks_names_itself():
    with pytest.raises(AttributeError, match=r"ampcore does not have torch\.backends\.cudnn\.fp32_precision yet"):
        backends.cudnn.fp32_precision  # noqa: B018 - the attribute access is the test
