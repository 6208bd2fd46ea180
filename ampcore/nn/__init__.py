"""Layers, losses and parameter utilities with torch.nn's names and semantics."""

from . import functional, init, utils
from .module import IncompatibleKeys, Module, StateDictError
from .modules import (GELU, BatchNorm2d, BCELoss, BCEWithLogitsLoss, Conv2d, CrossEntropyLoss, Dropout, Embedding,
                      Flatten, GroupNorm, Identity, L1Loss, LayerNorm, Linear, LogSoftmax, ModuleList, MSELoss,
                      MultiheadAttention, NLLLoss, ReLU, Sequential, Sigmoid, SiLU, SmoothL1Loss, Softmax, Tanh)
from .parameter import Parameter

__all__ = [
    # submodules
    "functional", "init", "utils",
    # base classes
    "Module", "Parameter", "StateDictError", "IncompatibleKeys",
    # layers
    "Linear", "Identity", "Flatten", "Conv2d", "LayerNorm", "GroupNorm", "BatchNorm2d", "Embedding", "Dropout",
    "Sequential", "ModuleList", "MultiheadAttention",
    # activations
    "ReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
    # losses
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "BCELoss", "BCEWithLogitsLoss",
]
