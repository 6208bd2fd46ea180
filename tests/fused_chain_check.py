"""A mixed-dtype chain with a broadcast bias row, compiled and replayed: what it fused and whether its bits are
eager's.  Shared by tests/test_capture_fusion_devices.py's opencl checks (in process) and cuda checks (in a
fresh interpreter on the CUDA simulator, which reads its variable per process)."""

from __future__ import annotations

from typing import Any

import numpy as np

import ampcore
from ampcore import expr as E


def chain(x: ampcore.Tensor, r: ampcore.Tensor, bias: ampcore.Tensor) -> ampcore.Tensor:
    """A 16-bit bias add and scaling (each stored in x's dtype eagerly), widened against a float32 residual."""
    return (((x + bias) * 1.5).relu().float() * r + 0.25).to(x.dtype) - bias


def check(device: str, dtype: str) -> dict[str, Any]:
    """The compiled chain's replay on ``device`` with ``x`` and ``bias`` in ``dtype``: its fused steps, their
    rounding nodes, and whether its bits are eager's."""
    rng = np.random.default_rng(5)
    d = getattr(ampcore, dtype)
    x = ampcore.tensor(rng.standard_normal((37, 70)) * 3.0, dtype=d, device=device)
    r = ampcore.tensor(rng.standard_normal((37, 70)), device=device)
    bias = ampcore.tensor(rng.standard_normal(70), dtype=d, device=device)
    compiled = ampcore.compile(chain, options={"warmup": 0})
    compiled(x, r, bias)
    replayed = compiled(x, r, bias)
    (entry,) = compiled._compiled.entries.values()
    fused = [s for s in entry.program.steps if getattr(s, "program", None) is not None]
    return {
        "replays": compiled._compiled.stats.replays,
        "fusions": len(entry.program.fusions),
        "fused_kernels": [s.fn is not None for s in fused],
        "replaced": sum(s.replaces for s in fused),
        "roundings": sum(1 for s in fused for n in s.program.nodes if n.op in E.ROUNDINGS),
        "same_bits": replayed.numpy().tobytes() == chain(x, r, bias).numpy().tobytes(),
        "dtype": replayed.dtype.name,
    }
