"""torch.nn.functional for ampcore: every op a composition of primitives (or a fused kernel) with autograd."""

from typing import TYPE_CHECKING

from ...names import missing_names_getattr as _missing_names_getattr
from .activation import gelu, log_softmax, relu, silu, softmax
from .attention import scaled_dot_product_attention
from .conv import conv1d, conv2d
from .dropout import dropout
from .extra_activation import prelu, softmin, softplus
from .extra_loss import (
    cosine_embedding_loss,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    margin_ranking_loss,
    poisson_nll_loss,
    soft_margin_loss,
    triplet_margin_loss,
)
from .linear import addmm, baddbmm, bmm, linear, matmul, mm
from .loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from .normalization import batch_norm, group_norm, layer_norm
from .pooling import avg_pool2d, max_pool2d
from .primitives import cat, cumsum, exp, log, mean, pow, rsqrt, sigmoid, sqrt, stack, sum, tanh  # noqa: A004 - torch names
from .similarity import cosine_similarity, normalize
from .sparse import embedding
from .tensor_ops import addcdiv, addcmul, bilinear, dot, tensordot

__all__ = [
    # linear algebra
    "matmul",
    "mm",
    "bmm",
    "linear",
    "addmm",
    "baddbmm",
    "bilinear",
    "dot",
    "tensordot",
    # convolution and pooling
    "conv1d",
    "conv2d",
    "max_pool2d",
    "avg_pool2d",
    # activations and pointwise math
    "relu",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "pow",
    "sqrt",
    "rsqrt",
    "softmax",
    "log_softmax",
    "prelu",
    "softplus",
    "softmin",
    "addcmul",
    "addcdiv",
    # normalisation, dropout, embedding, attention
    "layer_norm",
    "group_norm",
    "batch_norm",
    "dropout",
    "embedding",
    "scaled_dot_product_attention",
    # similarity
    "normalize",
    "cosine_similarity",
    # tensor ops
    "cat",
    "stack",
    "sum",
    "mean",
    "cumsum",
    # losses
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "huber_loss",
    "margin_ranking_loss",
    "soft_margin_loss",
    "hinge_embedding_loss",
    "poisson_nll_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
]


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
