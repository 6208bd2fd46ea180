"""ampcore-arrayapi-fused: fused kernels for the arrayapi backend (see README.md)."""

__version__ = "0.1.0"
