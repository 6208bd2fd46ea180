"""What torch 2.13's CPU autocast does with every op ampcore implements: the audit's result, as data.

torch's documented CPU list (:mod:`.torch_lists`) is not the whole of what it registers for the
AutocastCPU dispatch key in ``aten/src/ATen/autocast_mode.cpp`` (``smooth_l1_loss`` runs in float32 but
is not on the page), and some ops torch composes of others take the category of a registered op inside
(``tensordot`` runs ``mm``: lower precision).  This table was derived from torch 2.13.0 itself by
``tests/torch_autocast_audit.py`` (``python tests/torch_autocast_audit.py`` prints it): whether the aten op
has an AutocastCPU kernel (``torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU")``), and
the output dtype of each registered or composite op under ``torch.autocast("cpu", dtype=torch.bfloat16)``
on float32, bfloat16 and mixed inputs.  ``tests/test_policy_torch_audit.py`` checks ampcore's cpu table
against it always, and re-derives it from torch where torch is installed.

Each entry: ampcore op -> (category, the aten op torch runs for it or None for a Python-level composition,
whether that aten op has an AutocastCPU kernel of its own).

:func:`audit_rows` adds a row for every declared op (:mod:`ampcore.ops.declare`) the committed table lacks,
from its declaration: its aten op, and the category torch's documented CPU list gives it (registered) or
unlisted.  Where torch is installed, ``tests/test_policy_torch_audit.py`` re-derives those rows from torch
too, so a new op's row is checked without anyone editing this file.
"""

from __future__ import annotations

from ..ops import declare
from . import torch_lists as lists

__all__ = ["TORCH_VERSION", "REGISTRATION_SOURCE", "AUTOCAST_CPU", "audit_rows"]

TORCH_VERSION = "2.13.0"
REGISTRATION_SOURCE = "torch 2.13 AutocastCPU registration (autocast_mode.cpp)"

AUTOCAST_CPU: dict[str, tuple[str, str | None, bool]] = {
    "__rpow__": ("unlisted", "pow", False),
    "__rtruediv__": ("unlisted", "reciprocal", False),
    "__setitem__": ("unlisted", "index_put_", False),
    "abs": ("unlisted", "abs", False),
    "add": ("unlisted", "add", False),
    "add_": ("unlisted", "add_", False),
    "addcdiv": ("unlisted", "addcdiv", False),
    "addcmul": ("unlisted", "addcmul", False),
    "addmm": ("lower", "addmm", True),
    "amax": ("unlisted", "amax", False),
    "argmax": ("unlisted", "argmax", False),
    "argmin": ("unlisted", "argmin", False),
    "argsort": ("unlisted", "argsort", False),
    "avg_pool2d": ("unlisted", "avg_pool2d", False),
    "baddbmm": ("lower", "baddbmm", True),
    "batch_norm": ("unlisted", "batch_norm", False),
    "bilinear": ("unlisted", "bilinear", False),
    "binary_cross_entropy": ("fp32", "binary_cross_entropy", True),
    "binary_cross_entropy_with_logits": ("fp32", "binary_cross_entropy_with_logits", True),
    "bmm": ("lower", "bmm", True),
    "einsum": ("lower", "einsum", False),  # no AutocastCPU kernel: its bmm inside runs lower
    "RNNCell": ("lower", "rnn_tanh_cell", False),  # no AutocastCPU kernel: its linear products inside run lower
    "cat": ("promote", "cat", True),
    "chunk": ("unlisted", "chunk", False),
    "clamp": ("unlisted", "clamp", False),
    "clone": ("unlisted", "clone", False),
    "conv1d": ("lower", "conv1d", True),
    "conv2d": ("lower", "conv2d", True),
    "cos": ("unlisted", "cos", False),
    "cosine_embedding_loss": ("fp32", "cosine_embedding_loss", True),
    "cosine_similarity": ("unlisted", "cosine_similarity", False),
    "cross_entropy": ("fp32", "cross_entropy_loss", True),
    "cumsum": ("unlisted", "cumsum", False),
    "div": ("unlisted", "div", False),
    "dot": ("unlisted", "dot", False),
    "dropout": ("unlisted", "dropout", False),
    "dropout_": ("unlisted", "dropout_", False),
    "embedding": ("unlisted", "embedding", False),
    "eq": ("unlisted", "eq", False),
    "erf": ("unlisted", "erf", False),
    "exp": ("unlisted", "exp", False),
    "expand": ("unlisted", "expand", False),
    "flatten": ("unlisted", "flatten", False),
    "ge": ("unlisted", "ge", False),
    "gelu": ("unlisted", "gelu", False),
    "getitem": ("unlisted", "index", False),
    "group_norm": ("unlisted", "group_norm", False),
    "gt": ("unlisted", "gt", False),
    "hinge_embedding_loss": ("fp32", "hinge_embedding_loss", True),
    "huber_loss": ("fp32", "huber_loss", True),
    "index_add": ("unlisted", "index_add", False),
    "kl_div": ("fp32", "kl_div", True),
    "l1_loss": ("fp32", "l1_loss", True),
    "layer_norm": ("unlisted", "layer_norm", False),
    "le": ("unlisted", "le", False),
    "linear": ("lower", "linear", True),
    "log": ("unlisted", "log", False),
    "log_softmax": ("unlisted", "log_softmax", False),
    "lt": ("unlisted", "lt", False),
    "margin_ranking_loss": ("fp32", "margin_ranking_loss", True),
    "masked_fill": ("unlisted", "masked_fill", False),
    "masked_select": ("unlisted", "masked_select", False),
    "matmul": ("lower", "matmul", True),
    "max": ("unlisted", "max", False),
    "max_pool2d": ("unlisted", "max_pool2d", False),
    "maximum": ("unlisted", "maximum", False),
    "mean": ("unlisted", "mean", False),
    "min": ("unlisted", "min", False),
    "minimum": ("unlisted", "minimum", False),
    "mm": ("lower", "mm", True),
    "mse_loss": ("fp32", "mse_loss", True),
    "mul": ("unlisted", "mul", False),
    "mul_": ("unlisted", "mul_", False),
    "multinomial": ("unlisted", "multinomial", False),
    "ne": ("unlisted", "ne", False),
    "neg": ("unlisted", "neg", False),
    "nll_loss": ("fp32", "nll_loss", True),
    "normalize": ("unlisted", None, False),
    "pad": ("unlisted", "pad", False),
    "permute": ("unlisted", "permute", False),
    "poisson_nll_loss": ("fp32", "poisson_nll_loss", True),
    "pow": ("unlisted", "pow", False),
    "prelu": ("lower", "prelu", True),
    "relu": ("unlisted", "relu", False),
    "relu_": ("unlisted", "relu_", False),
    "reshape": ("unlisted", "reshape", False),
    "rsqrt": ("unlisted", "rsqrt", False),
    "scaled_dot_product_attention": ("lower", "scaled_dot_product_attention", True),
    "sigmoid": ("unlisted", "sigmoid", False),
    "sign": ("unlisted", "sign", False),
    "silu": ("unlisted", "silu", False),
    "silu_": ("unlisted", "silu_", False),
    "sin": ("unlisted", "sin", False),
    "smooth_l1_loss": ("fp32", "smooth_l1_loss", True),
    "soft_margin_loss": ("fp32", "soft_margin_loss", True),
    "softmax": ("unlisted", "softmax", False),
    "softmin": ("unlisted", None, False),
    "softplus": ("unlisted", "softplus", False),
    "sort": ("unlisted", "sort", False),
    "split": ("unlisted", "split", False),
    "sqrt": ("unlisted", "sqrt", False),
    "squeeze": ("unlisted", "squeeze", False),
    "stack": ("promote", "stack", True),
    "std": ("unlisted", "std", False),
    "sub": ("unlisted", "sub", False),
    "sum": ("unlisted", "sum", False),
    "take": ("unlisted", "take", False),
    "take_along_dim": ("unlisted", "take_along_dim", False),
    "tanh": ("unlisted", "tanh", False),
    "tensordot": ("lower", "tensordot", False),
    "to": ("unlisted", "_to_copy", False),
    "topk": ("unlisted", "topk", False),
    "transpose": ("unlisted", "transpose", False),
    "tril": ("unlisted", "tril", False),
    "triplet_margin_loss": ("fp32", "triplet_margin_loss", True),
    "triu": ("unlisted", "triu", False),
    "unsqueeze": ("unlisted", "unsqueeze", False),
    "var": ("unlisted", "var", False),
    "where": ("unlisted", "where", False),
}


def audit_rows() -> dict[str, tuple[str, str | None, bool]]:
    """:data:`AUTOCAST_CPU` and a row derived from each declared op it lacks (ops torch has no aten op for,
    ``aten=None``, have none): the category of torch's documented CPU list where it names the op (a registered
    kernel), else unlisted.  A declared category is ampcore's decision, not torch's: it is the policy's ampcore
    layer, never an audit row (torch's own behaviour for an op it runs as a composition, einsum, is committed)."""
    documented = {
        **dict.fromkeys(lists.CPU_LOWER, "lower"),
        **dict.fromkeys(lists.CPU_FP32, "fp32"),
        **dict.fromkeys(lists.CPU_PROMOTE, "promote"),
    }
    rows = dict(AUTOCAST_CPU)
    for name, decl in declare.declarations().items():
        if decl.aten is None:
            continue
        for op, aten in ((name, decl.aten), (f"{name}_", f"{decl.aten}_")):
            if op in rows or (op != name and "inplace" not in decl.variants):
                continue
            listed = op in documented
            category = documented[op] if listed and op == name else "unlisted"
            rows[op] = (category, aten, listed)
    return rows
