"""Helpers for testing ampcore and backends: gradient checks and fake backends."""

from .fake import FakeBackend
from .gradcheck import GradcheckError, gradcheck

__all__ = ["FakeBackend", "GradcheckError", "gradcheck"]
