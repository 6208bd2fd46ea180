"""The built-in policies, built from torch's lists (:mod:`.torch_lists`).

``builtin("cuda")`` is torch's CUDA float16 table, ``builtin("cpu")`` its CPU
table (bfloat16; float16 shares it), ``builtin("xpu")`` its XPU table.  A
backend names the one it starts from in ``Capabilities.policy``: cpu -> the
CPU lists, cuda and opencl (a GPU-style float16 device) -> the CUDA lists.

The CPU table follows what torch 2.13 *runs* where its docs page and its
AutocastCPU registrations disagree (:mod:`.torch_cpu_audit`): an op torch
registers but does not document (``smooth_l1_loss``: float32), or one that
takes the category of a registered op it is composed of (``tensordot``:
lower), gets the registration's category, and its source says so.

``binary_cross_entropy`` follows torch per device type: BANNED in the CUDA and
XPU tables (the error points to ``binary_cross_entropy_with_logits``), float32
in the CPU table, where torch lists and registers it as float32.

Over torch's layer lies ampcore's own (:data:`AMPCORE_LAYER`): the category an
op's declaration gives (:mod:`ampcore.ops.declare`), for every op torch's lists
leave unlisted; a declaration that contradicts a category torch gives its op is
refused (AssertionError naming both).  Plugins and users layer over both
(:mod:`.resolve`).
"""

from __future__ import annotations

import functools

from ..ops import declare
from . import torch_lists as lists
from .policy import BANNED_REASONS, Category, Entry, Policy
from .torch_cpu_audit import REGISTRATION_SOURCE, audit_rows

__all__ = ["builtin", "BUILTIN_TABLES", "AMPCORE_LAYER"]

AMPCORE_LAYER = "ampcore's own decision"
"""How an entry of ampcore's layer names its source (followed by the declaring module)."""

_GROUPS = {
    "cuda": (lists.CUDA_LOWER, lists.CUDA_FP32, lists.CUDA_PROMOTE),
    "xpu": (lists.XPU_LOWER, lists.XPU_FP32, lists.XPU_PROMOTE),
    "cpu": (lists.CPU_LOWER, lists.CPU_FP32, lists.CPU_PROMOTE),
}
BUILTIN_TABLES: tuple[str, ...] = tuple(_GROUPS)
# The tables where torch bans the BANNED_REASONS ops (its CPU autocast runs binary_cross_entropy in float32).
_BANNING_TABLES = frozenset({"cuda", "xpu"})


def builtin(table: str) -> Policy:
    """The built-in policy ``table`` (``"cuda"``, ``"cpu"`` or ``"xpu"``): torch's lists, then ampcore's layer
    of declared categories; ValueError naming the valid tables."""
    return _builtin(table, declare.generation())


@functools.cache
def _builtin(table: str, generation: int) -> Policy:
    if table not in _GROUPS:
        valid = ", ".join(repr(t) for t in BUILTIN_TABLES)
        raise ValueError(f"unknown built-in policy table {table!r}; valid tables are {valid}")
    lower, fp32, promote = _GROUPS[table]
    entries: dict[str, Entry] = {}
    for category, names in ((Category.LOWER, lower), (Category.FP32, fp32), (Category.PROMOTE, promote)):
        for torch_name in names:
            source = f"torch docs {table} list"
            op = lists.TORCH_ALIASES.get(torch_name, torch_name)
            if op != torch_name:
                source += f" (as {torch_name})"
            previous = entries.get(op)
            if previous is not None and previous.category is not category:
                raise AssertionError(
                    f"torch {table} lists put {op!r} in both {previous.category.value} and {category.value}"
                )
            entries[op] = Entry(category, source)
    if table == "cpu":
        _follow_registrations(entries)
    if table in _BANNING_TABLES:
        for op in BANNED_REASONS:
            entries[op] = Entry(Category.BANNED, f"torch {table}: banned, unsafe to autocast")
    _ampcore_layer(table, entries)
    return Policy(table, entries)


def _ampcore_layer(table: str, entries: dict[str, Entry]) -> None:
    """Each declared category where torch's lists leave the op unlisted; a contradiction is refused."""
    for op, (name, module) in declare.categories().items():
        category, torch_entry = Category(name), entries.get(op)
        if torch_entry is not None and torch_entry.category is not Category.UNLISTED:
            if torch_entry.category is not category:
                raise AssertionError(
                    f"op {op!r} is declared {category.value} in {module}, but {torch_entry.source} makes it "
                    f"{torch_entry.category.value}: torch's lists decide the ops they name"
                )
            continue
        entries[op] = Entry(category, f"{AMPCORE_LAYER} (declared in {module})")


def _follow_registrations(entries: dict[str, Entry]) -> None:
    """Lay torch 2.13's AutocastCPU registrations (the audit) over the documented CPU list, citing both."""
    declared = declare.categories()
    for op, (category_name, aten, registered) in audit_rows().items():
        category, documented = Category(category_name), entries.get(op)
        if not registered and documented is None and op in declared and category is Category.UNLISTED:
            continue  # the row is the op's own declaration (torch registers nothing): the ampcore layer cites it
        if registered and documented is not None and documented.category is category:
            entries[op] = Entry(category, f"{documented.source}; {REGISTRATION_SOURCE}")
        elif registered:
            said = (
                f"{documented.source} says {documented.category.value}" if documented else "not on the torch docs page"
            )
            entries[op] = Entry(category, f"{REGISTRATION_SOURCE} of aten::{aten}; {said}")
        elif category is not Category.UNLISTED:
            entries[op] = Entry(
                category,
                f"torch 2.13 CPU autocast at run time: aten::{aten} has no AutocastCPU "
                "kernel but runs registered ops inside (autocast_mode.cpp); "
                "not on the torch docs page",
            )
        elif documented is not None:
            raise AssertionError(f"torch cpu list has {op!r} but torch 2.13 registers no AutocastCPU kernel for it")
