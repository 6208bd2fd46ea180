"""Float8 training: torchao's and Transformer Engine's recipes on every backend (docs/float8.md)."""

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

__all__ = [
    "Format",
    "Recipe",
    "TensorwiseScaling",
    "RowwiseScaling",
    "DelayedScaling",
    "MXFP8BlockScaling",
    "RECIPES",
    "parse_recipe",
]
