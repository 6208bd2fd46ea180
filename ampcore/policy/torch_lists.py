"""torch's autocast op lists, transcribed verbatim from the torch.amp reference page.

Data only, in the page's order (including its duplicates, e.g. ``inverse``
twice in the CPU float32 list).  Three groups: CUDA (float16), XPU and CPU
(bfloat16; float16 shares the CPU lists).  Each group has the ops that run in
the lower-precision dtype, the ops forced to float32, and the ops that run in
the widest input float type.  :mod:`ampcore.policy.builtin` turns them into
policies; ``TORCH_ALIASES`` maps the few torch names that differ from the
names ampcore's ops are called by.
"""

from __future__ import annotations

CUDA_LOWER: tuple[str, ...] = (
    "__matmul__", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "multi_dot", "conv1d",
    "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "GRUCell", "linear",
    "LSTMCell", "matmul", "mm", "mv", "prelu", "RNNCell",
)

CUDA_FP32: tuple[str, ...] = (
    "__pow__", "__rdiv__", "__rpow__", "__rtruediv__", "acos", "asin", "binary_cross_entropy_with_logits",
    "cosh", "cosine_embedding_loss", "cdist", "cosine_similarity", "cross_entropy", "cumprod", "cumsum", "dist",
    "erfinv", "exp", "expm1", "group_norm", "hinge_embedding_loss", "kl_div", "l1_loss", "layer_norm", "log",
    "log_softmax", "log10", "log1p", "log2", "margin_ranking_loss", "mse_loss", "multilabel_margin_loss",
    "multi_margin_loss", "nll_loss", "norm", "normalize", "pdist", "poisson_nll_loss", "pow", "prod",
    "reciprocal", "rsqrt", "sinh", "smooth_l1_loss", "soft_margin_loss", "softmax", "softmin", "softplus",
    "sum", "renorm", "tan", "triplet_margin_loss",
)

CUDA_PROMOTE: tuple[str, ...] = (
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample", "index_put", "scatter_add",
    "tensordot",
)

XPU_LOWER: tuple[str, ...] = (
    "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "multi_dot", "conv1d", "conv2d",
    "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "GRUCell", "linear", "LSTMCell",
    "matmul", "mm", "mv", "RNNCell",
)

XPU_FP32: tuple[str, ...] = (
    "__pow__", "__rdiv__", "__rpow__", "__rtruediv__", "binary_cross_entropy_with_logits",
    "cosine_embedding_loss", "cosine_similarity", "cumsum", "dist", "exp", "group_norm", "hinge_embedding_loss",
    "kl_div", "l1_loss", "layer_norm", "log", "log_softmax", "margin_ranking_loss", "nll_loss", "normalize",
    "poisson_nll_loss", "pow", "reciprocal", "rsqrt", "soft_margin_loss", "softmax", "softmin", "sum",
    "triplet_margin_loss",
)

XPU_PROMOTE: tuple[str, ...] = (
    "bilinear", "cross", "grid_sample", "index_put", "scatter_add", "tensordot",
)

CPU_LOWER: tuple[str, ...] = (
    "conv1d", "conv2d", "conv3d", "bmm", "mm", "linalg_vecdot", "baddbmm", "addmm", "addbmm", "linear",
    "matmul", "_convolution", "conv_tbc", "mkldnn_rnn_layer", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "prelu", "scaled_dot_product_attention", "_native_multi_head_attention",
)

CPU_FP32: tuple[str, ...] = (
    "avg_pool3d", "binary_cross_entropy", "grid_sampler", "grid_sampler_2d", "_grid_sampler_2d_cpu_fallback",
    "grid_sampler_3d", "polar", "prod", "quantile", "nanquantile", "stft", "cdist", "trace", "view_as_complex",
    "cholesky", "cholesky_inverse", "cholesky_solve", "inverse", "lu_solve", "orgqr", "inverse", "ormqr",
    "pinverse", "max_pool3d", "max_unpool2d", "max_unpool3d", "adaptive_avg_pool3d", "reflection_pad1d",
    "reflection_pad2d", "replication_pad1d", "replication_pad2d", "replication_pad3d", "mse_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "poisson_nll_loss",
    "cross_entropy_loss", "l1_loss", "huber_loss", "margin_ranking_loss", "soft_margin_loss",
    "triplet_margin_loss", "multi_margin_loss", "ctc_loss", "kl_div", "multilabel_margin_loss",
    "binary_cross_entropy_with_logits", "fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn",
    "fft_rfft", "fft_irfft", "fft_rfft2", "fft_irfft2", "fft_rfftn", "fft_irfftn", "fft_hfft", "fft_ihfft",
    "linalg_cond", "linalg_matrix_rank", "linalg_solve", "linalg_cholesky", "linalg_svdvals", "linalg_eigvals",
    "linalg_eigvalsh", "linalg_inv", "linalg_householder_product", "linalg_tensorinv", "linalg_tensorsolve",
    "fake_quantize_per_tensor_affine", "geqrf", "_lu_with_info", "qr", "svd", "triangular_solve",
    "fractional_max_pool2d", "fractional_max_pool3d", "adaptive_max_pool3d", "multilabel_margin_loss_forward",
    "linalg_qr", "linalg_cholesky_ex", "linalg_svd", "linalg_eig", "linalg_eigh", "linalg_lstsq",
    "linalg_inv_ex",
)

CPU_PROMOTE: tuple[str, ...] = (
    "cat", "stack", "index_copy",
)

# torch name -> the name of the ampcore op it is (Python 3 has no __rdiv__; a @ b is matmul; torch's
# CPU list names the aten kernels cross_entropy_loss and nll_loss2d, which ampcore's cross_entropy
# and nll_loss (any number of dimensions) are).
TORCH_ALIASES: dict[str, str] = {
    "__matmul__": "matmul",
    "__pow__": "pow",
    "__rdiv__": "__rtruediv__",
    "cross_entropy_loss": "cross_entropy",
    "nll_loss2d": "nll_loss",
}
