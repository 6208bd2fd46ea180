"""Float8 training: torchao's and Transformer Engine's recipes on every backend (docs/float8.md)."""

from .casting import STATS_LENGTH
from .linear import Float8GemmConfig, Float8Linear, Float8LinearConfig
from .recipes import (
    RECIPES,
    DelayedScaling,
    Format,
    MXFP8BlockScaling,
    Recipe,
    RowwiseScaling,
    TensorwiseScaling,
    parse_recipe,
)
from .stats import convert_to_float8_training, float8_stats, summarize

__all__ = [
    "convert_to_float8_training",
    "float8_stats",
    "summarize",
    "Float8Linear",
    "Float8LinearConfig",
    "Float8GemmConfig",
    "STATS_LENGTH",
    "Format",
    "Recipe",
    "TensorwiseScaling",
    "RowwiseScaling",
    "DelayedScaling",
    "MXFP8BlockScaling",
    "RECIPES",
    "parse_recipe",
]
