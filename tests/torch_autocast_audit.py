"""Derive, from torch itself, what torch's CPU autocast does with every op ampcore implements.

For each ampcore op: the aten op torch dispatches for it (``ATEN``), whether torch registers an
AutocastCPU kernel for that aten op (``torch._C._dispatch_get_registrations_for_dispatch_key``), the
source line of the registration (``torch._C._dispatch_dump``), and, for registered ops, the category
observed at run time under ``torch.autocast("cpu", dtype=torch.bfloat16)``: float32 inputs that come out
bfloat16 -> lower; bfloat16 inputs that come out float32 -> fp32; otherwise (all-bfloat16 stays bfloat16,
mixed bfloat16/float32 comes out float32) -> promote.  Ops without a registration are unlisted.

Used by ``tests/test_policy_torch_audit.py`` (torch-gated) and by ``python tests/torch_autocast_audit.py``,
which prints the table committed as ``ampcore/policy/torch_cpu_audit.py``.  Imports torch: never import it
from ampcore.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

# ampcore op -> the aten op (without overload) torch runs for it; None: a Python-level composition in torch
# with no aten op of its own (its parts decide, and none of them is registered for AutocastCPU).
ATEN: dict[str, str | None] = {
    "__rpow__": "pow",
    "__rtruediv__": "reciprocal",
    "__setitem__": "index_put_",
    "abs": "abs",
    "add": "add",
    "add_": "add_",
    "addcdiv": "addcdiv",
    "addcmul": "addcmul",
    "addmm": "addmm",
    "amax": "amax",
    "argmax": "argmax",
    "argmin": "argmin",
    "argsort": "argsort",
    "avg_pool2d": "avg_pool2d",
    "baddbmm": "baddbmm",
    "batch_norm": "batch_norm",
    "bilinear": "bilinear",
    "binary_cross_entropy": "binary_cross_entropy",
    "binary_cross_entropy_with_logits": "binary_cross_entropy_with_logits",
    "bmm": "bmm",
    "cat": "cat",
    "chunk": "chunk",
    "clamp": "clamp",
    "clone": "clone",
    "conv1d": "conv1d",
    "conv2d": "conv2d",
    "cos": "cos",
    "cosine_embedding_loss": "cosine_embedding_loss",
    "cosine_similarity": "cosine_similarity",
    "cross_entropy": "cross_entropy_loss",
    "cumsum": "cumsum",
    "div": "div",
    "dot": "dot",
    "dropout": "dropout",
    "dropout_": "dropout_",
    "embedding": "embedding",
    "eq": "eq",
    "erf": "erf",
    "exp": "exp",
    "expand": "expand",
    "flatten": "flatten",
    "ge": "ge",
    "gelu": "gelu",
    "getitem": "index",
    "group_norm": "group_norm",
    "gt": "gt",
    "hinge_embedding_loss": "hinge_embedding_loss",
    "huber_loss": "huber_loss",
    "index_add": "index_add",
    "kl_div": "kl_div",
    "l1_loss": "l1_loss",
    "layer_norm": "layer_norm",
    "le": "le",
    "linear": "linear",
    "log": "log",
    "log_softmax": "log_softmax",
    "lt": "lt",
    "margin_ranking_loss": "margin_ranking_loss",
    "masked_fill": "masked_fill",
    "masked_select": "masked_select",
    "matmul": "matmul",
    "max": "max",
    "max_pool2d": "max_pool2d",
    "maximum": "maximum",
    "mean": "mean",
    "min": "min",
    "minimum": "minimum",
    "mm": "mm",
    "mse_loss": "mse_loss",
    "mul": "mul",
    "mul_": "mul_",
    "multinomial": "multinomial",
    "ne": "ne",
    "neg": "neg",
    "nll_loss": "nll_loss",
    "normalize": None,
    "pad": "pad",
    "permute": "permute",
    "poisson_nll_loss": "poisson_nll_loss",
    "pow": "pow",
    "prelu": "prelu",
    "relu": "relu",
    "relu_": "relu_",
    "reshape": "reshape",
    "rsqrt": "rsqrt",
    "scaled_dot_product_attention": "scaled_dot_product_attention",
    "sigmoid": "sigmoid",
    "sign": "sign",
    "silu": "silu",
    "silu_": "silu_",
    "sin": "sin",
    "smooth_l1_loss": "smooth_l1_loss",
    "soft_margin_loss": "soft_margin_loss",
    "softmax": "softmax",
    "softmin": None,
    "softplus": "softplus",
    "sort": "sort",
    "split": "split",
    "sqrt": "sqrt",
    "squeeze": "squeeze",
    "stack": "stack",
    "std": "std",
    "sub": "sub",
    "sum": "sum",
    "take": "take",
    "take_along_dim": "take_along_dim",
    "tanh": "tanh",
    "tensordot": "tensordot",
    "to": "_to_copy",
    "topk": "topk",
    "transpose": "transpose",
    "tril": "tril",
    "triplet_margin_loss": "triplet_margin_loss",
    "triu": "triu",
    "unsqueeze": "unsqueeze",
    "var": "var",
    "where": "where",
}


def _t(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=_GEN).add(0.5).to(dtype)


_GEN = torch.Generator().manual_seed(0)

# How to call each op torch registers for AutocastCPU, given a tensor factory t(*shape).
CALLS: dict[str, Callable[[Callable[..., torch.Tensor]], torch.Tensor]] = {
    "addmm": lambda t: torch.addmm(t(3, 5), t(3, 4), t(4, 5)),
    "baddbmm": lambda t: torch.baddbmm(t(2, 3, 5), t(2, 3, 4), t(2, 4, 5)),
    "bmm": lambda t: torch.bmm(t(2, 3, 4), t(2, 4, 5)),
    "cat": lambda t: torch.cat([t(2, 3), t(2, 3)]),
    "stack": lambda t: torch.stack([t(2, 3), t(2, 3)]),
    "conv1d": lambda t: F.conv1d(t(2, 3, 8), t(4, 3, 3), t(4)),
    "conv2d": lambda t: F.conv2d(t(2, 3, 6, 6), t(4, 3, 3, 3), t(4)),
    "linear": lambda t: F.linear(t(3, 4), t(5, 4), t(5)),
    "matmul": lambda t: torch.matmul(t(3, 4), t(4, 5)),
    "mm": lambda t: torch.mm(t(3, 4), t(4, 5)),
    "prelu": lambda t: F.prelu(t(2, 3, 4), t(3)),
    "scaled_dot_product_attention": lambda t: F.scaled_dot_product_attention(t(2, 4, 8), t(2, 4, 8), t(2, 4, 8)),
    "binary_cross_entropy": lambda t: F.binary_cross_entropy(t(4).sub(0.4).clamp(0.05, 0.95), t(4).sub(0.5)),
    "binary_cross_entropy_with_logits": lambda t: F.binary_cross_entropy_with_logits(t(4), t(4).sub(0.5)),
    "cosine_embedding_loss": lambda t: F.cosine_embedding_loss(t(3, 4), t(3, 4), torch.tensor([1.0, -1.0, 1.0])),
    "cross_entropy": lambda t: F.cross_entropy(t(3, 5), torch.tensor([0, 2, 4])),
    "hinge_embedding_loss": lambda t: F.hinge_embedding_loss(t(3, 4), torch.ones(3, 4)),
    "huber_loss": lambda t: F.huber_loss(t(3, 4), t(3, 4)),
    "kl_div": lambda t: F.kl_div(t(3, 4), t(3, 4), reduction="batchmean"),
    "l1_loss": lambda t: F.l1_loss(t(3, 4), t(3, 4)),
    "margin_ranking_loss": lambda t: F.margin_ranking_loss(t(4), t(4), torch.tensor([1.0, -1.0, 1.0, -1.0])),
    "mse_loss": lambda t: F.mse_loss(t(3, 4), t(3, 4)),
    "nll_loss": lambda t: F.nll_loss(t(3, 5), torch.tensor([0, 2, 4])),
    "poisson_nll_loss": lambda t: F.poisson_nll_loss(t(3, 4), t(3, 4)),
    "smooth_l1_loss": lambda t: F.smooth_l1_loss(t(3, 4), t(3, 4)),
    "soft_margin_loss": lambda t: F.soft_margin_loss(t(3, 4), torch.ones(3, 4)),
    "triplet_margin_loss": lambda t: F.triplet_margin_loss(t(3, 4), t(3, 4), t(3, 4)),
    # No AutocastCPU kernel of their own, but CompositeImplicitAutograd (or Python) in torch: the aten ops
    # they decompose into pass through autocast, so a registered one inside decides their output dtype.
    "batch_norm": lambda t: F.batch_norm(t(2, 3), None, None, training=True),
    "bilinear": lambda t: F.bilinear(t(3, 4), t(3, 5), t(6, 4, 5), t(6)),
    "cosine_similarity": lambda t: F.cosine_similarity(t(3, 4), t(3, 4)),
    "dropout": lambda t: F.dropout(t(3, 4), 0.5, training=True),
    "dropout_": lambda t: F.dropout(t(3, 4), 0.5, training=True, inplace=True),
    "flatten": lambda t: torch.flatten(t(2, 3, 4), 1),
    "group_norm": lambda t: F.group_norm(t(2, 4, 3), 2, t(4), t(4)),
    "layer_norm": lambda t: F.layer_norm(t(3, 4), (4,), t(4), t(4)),
    "log_softmax": lambda t: F.log_softmax(t(3, 4), 1),
    "max": lambda t: torch.max(t(3, 4), t(3, 4)),
    "max_pool2d": lambda t: F.max_pool2d(t(1, 2, 4, 4), 2),
    "min": lambda t: torch.min(t(3, 4), t(3, 4)),
    "normalize": lambda t: F.normalize(t(3, 4)),
    "pad": lambda t: F.pad(t(2, 3), (1, 1)),
    "reshape": lambda t: torch.reshape(t(2, 3), (3, 2)),
    "softmax": lambda t: F.softmax(t(3, 4), 1),
    "softmin": lambda t: F.softmin(t(3, 4), 1),
    "std": lambda t: torch.std(t(3, 4), 1),
    "tensordot": lambda t: torch.tensordot(t(3, 4), t(4, 5), dims=1),
    "var": lambda t: torch.var(t(3, 4), 1),
    "where": lambda t: torch.where(torch.tensor([True, False, True]), t(3), t(3)),
    # Declared ops whose torch call their example cannot make: a parameter that is an operand in ampcore (a
    # Python number in torch's signature), or a random op with no example to check against.
    "leaky_relu": lambda t: F.leaky_relu(t(3, 4), 0.1),
    "elu": lambda t: F.elu(t(3, 4), 0.5),
    "hardtanh": lambda t: F.hardtanh(t(3, 4), -0.5, 0.5),
    "feature_dropout": lambda t: torch.feature_dropout(t(2, 3, 4), 0.5, True),
    # The recurrent ops, with torch's own argument structure (an LSTM cell's state is a pair; an LSTM layer on the
    # CPU is mkldnn_rnn_layer, which nn.LSTM runs).
    "RNNCell": lambda t: torch.rnn_tanh_cell(t(3, 5), t(3, 6), t(6, 5), t(6, 6), t(6), t(6)),
    "LSTMCell": lambda t: torch.lstm_cell(t(3, 5), (t(3, 6), t(3, 6)), t(24, 5), t(24, 6), t(24), t(24))[0],
    "GRUCell": lambda t: torch.gru_cell(t(3, 5), t(3, 6), t(18, 5), t(18, 6), t(18), t(18)),
    "mkldnn_rnn_layer": lambda t: torch.nn.LSTM(5, 6)(t(3, 2, 5))[0],
}


def registrations() -> dict[str, str]:
    """aten op name (no overload) -> "autocast_mode.cpp:LINE" of its AutocastCPU kernel, for every registered op."""
    found: dict[str, str] = {}
    for qualified in torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU"):
        base = qualified.removeprefix("aten::").split(".")[0]
        dump = torch._C._dispatch_dump(qualified)
        line = re.search(r"AutocastCPU: registered at \S*?([\w.]+\.cpp:\d+)", dump)
        found.setdefault(base, line.group(1) if line else "autocast_mode.cpp")
    return found


def observed_category(op: str, registered: bool = True) -> str:
    """lower / fp32 / promote from running ``op`` under CPU autocast with bfloat16; for an op torch does not
    register (``registered=False``), lower / fp32 where a registered op inside decides, else unlisted."""
    bf16, f32 = torch.bfloat16, torch.float32

    def run(*dtypes: torch.dtype) -> torch.dtype:
        count = iter(range(1 << 20))
        with torch.autocast("cpu", dtype=bf16):
            return CALLS[op](lambda *shape: _t(dtypes[next(count) % len(dtypes)], *shape)).dtype

    if run(f32) == bf16:
        return "lower"
    if run(bf16) == f32:
        return "fp32"
    if not registered:
        return "unlisted"
    if run(bf16, f32) == f32:
        return "promote"
    raise AssertionError(f"torch registers {op!r} for AutocastCPU but it behaves like no category")


def _declared_aten(op: str) -> str | None:
    """The aten op of an op declared in ampcore/ops/decls (ATEN has the others), and its torch call (``CALLS``,
    for the observed category) made from its arity: ``torch.<aten>`` on tensors of one shape."""
    from ampcore.ops import declare

    base = op.removesuffix("_")
    decl = declare.get(base)
    if decl is None or decl.aten is None:
        return None
    aten = decl.aten if base == op else f"{decl.aten}_"
    if op not in CALLS and base == op:
        CALLS[op] = _torch_call(decl)
    return aten


def _torch_call(decl: Any) -> Callable[[Callable[..., torch.Tensor]], torch.Tensor]:
    """torch's own function of a declared op, called as the op's example calls it (an elementwise op: on (3, 4)
    tensors)."""
    fn: Any = torch
    own = decl.name if "function" in decl.variants else f"Tensor.{decl.name}"  # a method-only op is torch's method
    for part in (decl.torch_function if decl.torch_function not in ("", decl.name) else own).split("."):
        fn = getattr(fn, part)
    if decl.example is None:
        return lambda t: fn(*(t(3, 4) for _ in range(decl.arity)))

    def call(t: Callable[..., torch.Tensor]) -> torch.Tensor:
        args = []
        for i in decl.example.inputs:
            if i.kind == "float":
                args.append(t(*i.shape))
            elif i.kind == "int64":
                args.append(torch.arange(int(torch.tensor(i.shape).prod())).reshape(i.shape) % i.high)
            else:
                args.append(torch.arange(int(torch.tensor(i.shape).prod())).reshape(i.shape) % 2 == 0)
        return decl.example.run(fn, *args)

    return call


def audit(ops: Any) -> dict[str, tuple[str, str | None, str | None]]:
    """ampcore op -> (category, aten op, registration site or None) per torch's AutocastCPU registrations,
    and, for ops torch composes of others (``CALLS`` has them), per what those run in."""
    registered = registrations()
    result: dict[str, tuple[str, str | None, str | None]] = {}
    for op in sorted(ops):
        aten = ATEN[op] if op in ATEN else _declared_aten(op)
        if aten is not None and aten in registered:
            result[op] = (observed_category(op), aten, registered[aten])
        elif op in CALLS:
            result[op] = (observed_category(op, registered=False), aten, None)
        else:
            result[op] = ("unlisted", aten, None)
    return result


if __name__ == "__main__":
    from ampcore.dispatch import registered_ops

    print(f"# torch {torch.__version__}")
    for op, row in audit(registered_ops()).items():
        print(f"    {op!r}: {row!r},")
