"""ampcore's NumPy CPU backend (entry point ``cpu``)."""

from .plugin import CPUBackend

__all__ = ["CPUBackend"]
