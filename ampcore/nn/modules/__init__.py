"""The layer classes of :mod:`ampcore.nn`.

Each layer is listed once, in its own module's ``__all__``; this package re-exports them by name (for readers and
type checkers) and derives its ``__all__`` from those lists.
"""

# ruff: noqa: F401 - the imports below are the re-exports; __all__ is derived from the submodules' lists
from types import ModuleType as _ModuleType

from ..module import Module as _Module
from .activation import (
    ELU,
    GELU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSoftmax,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Tanh,
)
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d
from .conv_nd import Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .data_parallel import DataParallel
from .distance import CosineSimilarity
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
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
from .padding import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .pooling import AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AvgPool1d, AvgPool2d, AvgPool3d, MaxPool2d
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .sparse import Embedding
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

# The layers: the Module classes each submodule lists in its own __all__ (which may also hold helpers such as
# check_sizes), so a new layer is listed once, in its own module.
_SUBMODULES = [
    m for m in list(globals().values()) if isinstance(m, _ModuleType) and m.__name__.startswith(f"{__name__}.")
]
__all__ = list(
    dict.fromkeys(
        name
        for submodule in _SUBMODULES
        for name in submodule.__all__
        if isinstance(getattr(submodule, name), type) and issubclass(getattr(submodule, name), _Module)
    )
)
