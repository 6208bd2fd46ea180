"""The built-in policies, built from torch's lists (:mod:`.torch_lists`).

``builtin("cuda")`` is torch's CUDA float16 table, ``builtin("cpu")`` its CPU
table (bfloat16; float16 shares it), ``builtin("xpu")`` its XPU table.  A
backend names the one it starts from in ``Capabilities.policy``: cpu -> the
CPU lists, cuda and opencl (a GPU-style float16 device) -> the CUDA lists.

One deliberate difference from the page: ``binary_cross_entropy`` is BANNED
in every table (torch bans it on CUDA but lists it as float32 on CPU); its
backward is unsafe in low precision on any device, and the error points to
``binary_cross_entropy_with_logits``.
"""

from __future__ import annotations

import functools

from . import torch_lists as lists
from .policy import BANNED_REASONS, Category, Entry, Policy

__all__ = ["builtin", "BUILTIN_TABLES"]

_GROUPS = {
    "cuda": (lists.CUDA_LOWER, lists.CUDA_FP32, lists.CUDA_PROMOTE),
    "xpu": (lists.XPU_LOWER, lists.XPU_FP32, lists.XPU_PROMOTE),
    "cpu": (lists.CPU_LOWER, lists.CPU_FP32, lists.CPU_PROMOTE),
}
BUILTIN_TABLES: tuple[str, ...] = tuple(_GROUPS)


@functools.lru_cache(maxsize=None)
def builtin(table: str) -> Policy:
    """The built-in policy ``table`` (``"cuda"``, ``"cpu"`` or ``"xpu"``); ValueError naming the valid ones."""
    if table not in _GROUPS:
        valid = ", ".join(repr(t) for t in BUILTIN_TABLES)
        raise ValueError(f"unknown built-in policy table {table!r}; valid tables are {valid}")
    lower, fp32, promote = _GROUPS[table]
    entries: dict[str, Entry] = {}
    for category, names in ((Category.LOWER, lower), (Category.FP32, fp32), (Category.PROMOTE, promote)):
        for torch_name in names:
            source = f"torch {table} list"
            op = lists.TORCH_ALIASES.get(torch_name, torch_name)
            if op != torch_name:
                source += f" (as {torch_name})"
            previous = entries.get(op)
            if previous is not None and previous.category is not category:
                raise AssertionError(f"torch {table} lists put {op!r} in both {previous.category.value} "
                                     f"and {category.value}")
            entries[op] = Entry(category, source)
    for op in BANNED_REASONS:
        entries[op] = Entry(Category.BANNED, "ampcore: unsafe to autocast on any device")
    return Policy(table, entries)
