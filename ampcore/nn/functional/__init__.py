"""torch.nn.functional for ampcore: every op a composition of primitives (or a fused kernel) with autograd."""

from .activation import gelu, log_softmax, relu, silu, softmax
from .attention import scaled_dot_product_attention
from .conv import conv1d, conv2d
from .dropout import dropout
from .linear import addmm, baddbmm, bmm, linear, matmul, mm
from .loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, l1_loss, mse_loss,
                   nll_loss, smooth_l1_loss)
from .normalization import batch_norm, group_norm, layer_norm
from .pooling import avg_pool2d, max_pool2d
from .primitives import cat, cumsum, exp, log, mean, pow, rsqrt, sigmoid, sqrt, stack, sum, tanh
from .sparse import embedding

__all__ = [
    # linear algebra
    "matmul", "mm", "bmm", "linear", "addmm", "baddbmm",
    # convolution and pooling
    "conv1d", "conv2d", "max_pool2d", "avg_pool2d",
    # activations and pointwise math
    "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "pow", "sqrt", "rsqrt", "softmax", "log_softmax",
    # normalisation, dropout, embedding, attention
    "layer_norm", "group_norm", "batch_norm", "dropout", "embedding", "scaled_dot_product_attention",
    # tensor ops
    "cat", "stack", "sum", "mean", "cumsum",
    # losses
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
]
