"""torch.nn.functional for ampcore: every op a composition of primitives (or a fused kernel) with autograd."""

from typing import TYPE_CHECKING

from ...names import missing_names_getattr as _missing_names_getattr
from ...ops.decls.activation import elu, hardsigmoid, hardswish, hardtanh, leaky_relu, relu6, selu
from .activation import gelu, log_softmax, relu, silu, softmax
from .adaptive_pool import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from .attention import scaled_dot_product_attention
from .conv import conv1d, conv2d
from .conv_nd import conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d
from .dropout import dropout, dropout1d, dropout2d, dropout3d
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
from .mha import multi_head_attention_forward
from .normalization import batch_norm, group_norm, instance_norm, layer_norm
from .padding import pad
from .pooling import avg_pool1d, avg_pool2d, avg_pool3d, max_pool2d
from .primitives import cat, cumsum, exp, log, mean, pow, rsqrt, sigmoid, sqrt, stack, sum, tanh  # noqa: A004 - torch names
from .similarity import cosine_similarity, normalize
from .sparse import embedding, one_hot
from .tensor_ops import addcdiv, addcmul, bilinear, dot, tensordot
from .upsampling import interpolate, upsample, upsample_bilinear, upsample_nearest
from .vision import pixel_shuffle, pixel_unshuffle

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
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    # resampling and padding
    "interpolate",
    "upsample",
    "upsample_nearest",
    "upsample_bilinear",
    "pad",
    "pixel_shuffle",
    "pixel_unshuffle",
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
    "leaky_relu",
    "elu",
    "selu",
    "hardtanh",
    "relu6",
    "hardsigmoid",
    "hardswish",
    "addcmul",
    "addcdiv",
    # normalisation, dropout, embedding, attention
    "layer_norm",
    "group_norm",
    "batch_norm",
    "instance_norm",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "embedding",
    "one_hot",
    "scaled_dot_product_attention",
    "multi_head_attention_forward",
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
