"""Tools CI tried to install (``AMPCORE_REQUIRED_TOOLS``, set by .ci/run): where one of them is still missing, the
tests that need it would skip quietly, so a fail-if-skipped check fails the run instead, naming the tool."""

from __future__ import annotations

import os
import shutil

import pytest

ENV = "AMPCORE_REQUIRED_TOOLS"


def required() -> frozenset[str]:
    """The tools the environment requires (comma separated), e.g. ``{"g++", "oclgrind"}``."""
    return frozenset(t.strip() for t in os.environ.get(ENV, "").split(",") if t.strip())


def fail_if_required_and_missing(tool: str, needed_by: str) -> None:
    """Fail where ``tool`` is required here but not on PATH, so that ``needed_by`` would only skip."""
    if tool in required() and shutil.which(tool) is None:
        pytest.fail(f"{ENV} requires {tool!r} (CI tried to install it), but it is not on PATH: {needed_by} skip")
