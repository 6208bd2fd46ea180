"""ampcore-arrayapi: an ampcore backend for any Array API namespace (see README.md)."""

__version__ = "0.1.0"
