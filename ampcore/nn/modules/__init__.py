"""The layer classes of :mod:`ampcore.nn`."""

from .activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .attention import MultiheadAttention
from .container import ModuleList, Sequential
from .conv import Conv2d
from .dropout import Dropout
from .linear import Flatten, Identity, Linear
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss
from .normalization import BatchNorm2d, GroupNorm, LayerNorm
from .sparse import Embedding

__all__ = [
    "GELU", "LogSoftmax", "ReLU", "Sigmoid", "SiLU", "Softmax", "Tanh", "MultiheadAttention", "ModuleList",
    "Sequential", "Conv2d", "Dropout", "Flatten", "Identity", "Linear", "BCELoss", "BCEWithLogitsLoss",
    "CrossEntropyLoss", "L1Loss", "MSELoss", "NLLLoss", "SmoothL1Loss", "BatchNorm2d", "GroupNorm", "LayerNorm",
    "Embedding",
]
