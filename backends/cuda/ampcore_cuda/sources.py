"""Every CUDA C source this backend can compile, by kernel name, for the compile check without a GPU.

Each family module has a ``sources()`` listing every variant it builds (one
per dtype, op, ...); this collects them.  The launchers build the same strings,
so what nvcc checks is what CuPy compiles.
"""

from __future__ import annotations

import importlib

SOURCE_FAMILIES = ("convert", "elementwise", "amp", "softmax", "gelu", "optim", "norm", "loss", "float8", "fusion")


def all_sources() -> dict[str, str]:
    """``{"family/kernel": source}`` for every kernel of every family."""
    out: dict[str, str] = {}
    for family in SOURCE_FAMILIES:
        module = importlib.import_module(f"{__package__}.{family}")
        out.update({f"{family}/{name}": src for name, src in module.sources().items()})
    return out
