"""Layers, losses and parameter utilities with torch.nn's names and semantics."""

from typing import TYPE_CHECKING

from ..names import missing_names_getattr as _missing_names_getattr
from . import functional, init, utils
from .module import IncompatibleKeys, Module, StateDictError
from .modules import (
    GELU,
    BatchNorm2d,
    BCELoss,
    BCEWithLogitsLoss,
    Bilinear,
    Conv2d,
    CosineEmbeddingLoss,
    CosineSimilarity,
    CrossEntropyLoss,
    DataParallel,
    Dropout,
    Embedding,
    Flatten,
    GroupNorm,
    HingeEmbeddingLoss,
    HuberLoss,
    Identity,
    KLDivLoss,
    L1Loss,
    LayerNorm,
    Linear,
    LogSoftmax,
    MarginRankingLoss,
    ModuleDict,
    ModuleList,
    MSELoss,
    MultiheadAttention,
    NLLLoss,
    PoissonNLLLoss,
    PReLU,
    ReLU,
    Sequential,
    Sigmoid,
    SiLU,
    SmoothL1Loss,
    SoftMarginLoss,
    Softmax,
    Softmin,
    Softplus,
    Tanh,
    TripletMarginLoss,
)
from .parameter import Parameter

__all__ = [
    # submodules
    "functional",
    "init",
    "utils",
    # base classes
    "Module",
    "Parameter",
    "StateDictError",
    "IncompatibleKeys",
    # layers
    "Linear",
    "Identity",
    "Flatten",
    "Conv2d",
    "LayerNorm",
    "GroupNorm",
    "BatchNorm2d",
    "Embedding",
    "Dropout",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "MultiheadAttention",
    "Bilinear",
    "CosineSimilarity",
    "DataParallel",
    # activations
    "ReLU",
    "GELU",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "Softmax",
    "LogSoftmax",
    "PReLU",
    "Softplus",
    "Softmin",
    # losses
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "L1Loss",
    "SmoothL1Loss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "KLDivLoss",
    "HuberLoss",
    "MarginRankingLoss",
    "SoftMarginLoss",
    "HingeEmbeddingLoss",
    "PoissonNLLLoss",
    "CosineEmbeddingLoss",
    "TripletMarginLoss",
]


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
