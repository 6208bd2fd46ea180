"""Helpers for testing ampcore and backends: gradient checks and fake backends."""

from .gradcheck import GradcheckError, gradcheck

__all__ = ["GradcheckError", "gradcheck"]
