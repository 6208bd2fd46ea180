"""torch.compile's face: :func:`compile` (also ``ampcore.compile``), :func:`explain`, :func:`reset`, and the
settings in :data:`config`.  The engine is :mod:`ampcore.capture`; ``docs/compile.md`` explains both."""

from ..capture import CaptureBreakError, config
from ..hooks import CAPTURE
from .explain import Explanation, explain
from .wrap import BACKENDS, MODES, OptimizedModule, compile  # noqa: A004 - torch's name

__all__ = [
    "BACKENDS",
    "CaptureBreakError",
    "Explanation",
    "MODES",
    "OptimizedModule",
    "compile",
    "config",
    "explain",
    "is_compiling",
    "reset",
]


def is_compiling() -> bool:
    """True while a compiled call runs its Python (warming up, recording or falling back to eager): torch's
    ``torch.compiler.is_compiling``."""
    return CAPTURE.active > 0


def reset() -> None:
    """torch's ``torch.compiler.reset()``: each compiled function keeps its own programs here, dropped with it;
    nothing process-wide to clear."""
