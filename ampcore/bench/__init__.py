"""Benchmarks of what AMP buys: the shared benchmark models and ``ampcore bench``'s measurement.

``models`` holds the networks every benchmark trains; ``benchmark`` times
float32 against AMP per backend (and torch); ``report`` turns a result into a
table or a figure.  The JSON result is described in ``docs/bench.md``.
"""

from .benchmark import SCHEMA, BenchSettings, configurations, run_benchmark
from .models import MODELS, ModelSpec, get_model, make_batches

__all__ = [
    "SCHEMA",
    "BenchSettings",
    "configurations",
    "run_benchmark",
    "MODELS",
    "ModelSpec",
    "get_model",
    "make_batches",
]
