"""torch.version's names: ``ampcore.version.__version__``; ``cuda`` and ``hip`` are None (ampcore is not built
against a CUDA or ROCm toolkit: its cuda backend runs through CuPy, whose own version says which CUDA it uses)."""

__all__ = ["__version__", "cuda", "hip", "git_version"]

__version__ = "0.1.0"
cuda: str | None = None
hip: str | None = None
git_version: str | None = None
