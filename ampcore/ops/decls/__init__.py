"""The op declarations: every module here declares ops (:mod:`ampcore.ops.declare`) and is imported, in name
order, when :mod:`ampcore.ops` is, so a new op is a new module here and nothing else.

A module declares ops at import time by calling :func:`~ampcore.ops.declare.unary`,
:func:`~ampcore.ops.declare.binary`, :func:`~ampcore.ops.declare.comparison` or
:func:`~ampcore.ops.declare.elementwise`; the registry rejects a name declared twice.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__ = ["load"]


def load() -> list[str]:
    """Import every declaration module of this package (once); their names, in import order."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    return names
