"""The layer classes of :mod:`ampcore.nn`."""

from .activation import GELU, LogSoftmax, PReLU, ReLU, Sigmoid, SiLU, Softmax, Softmin, Softplus, Tanh
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d
from .data_parallel import DataParallel
from .distance import CosineSimilarity
from .dropout import Dropout
from .linear import Bilinear, Flatten, Identity, Linear, NonDynamicallyQuantizableLinear
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    NLLLoss,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm
from .pooling import AvgPool2d, MaxPool2d
from .sparse import Embedding
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "Conv1d",
    "BatchNorm1d",
    "BatchNorm3d",
    "MaxPool2d",
    "AvgPool2d",
    "NonDynamicallyQuantizableLinear",
    "DataParallel",
    "GELU",
    "LogSoftmax",
    "ReLU",
    "Sigmoid",
    "SiLU",
    "Softmax",
    "Tanh",
    "MultiheadAttention",
    "ModuleList",
    "ModuleDict",
    "Sequential",
    "Conv2d",
    "Dropout",
    "Flatten",
    "Identity",
    "Linear",
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "L1Loss",
    "MSELoss",
    "NLLLoss",
    "SmoothL1Loss",
    "BatchNorm2d",
    "GroupNorm",
    "LayerNorm",
    "Embedding",
    "PReLU",
    "Softplus",
    "Softmin",
    "CosineSimilarity",
    "Bilinear",
    "KLDivLoss",
    "HuberLoss",
    "MarginRankingLoss",
    "SoftMarginLoss",
    "HingeEmbeddingLoss",
    "PoissonNLLLoss",
    "CosineEmbeddingLoss",
    "TripletMarginLoss",
]
