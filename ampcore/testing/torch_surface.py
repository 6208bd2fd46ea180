"""Does a torch name exist in ampcore after the rename?  The resolver behind the coverage test and benchmark.

The names come from ``tests/data/torch_api_usage.csv``: every torch name 38
files of public torch training code use, with how many files use it (copied
from the measured table, issue 37).  A name resolves when a script that says
``torch.X`` would find ``ampcore.X`` after ``import ampcore``:

- ``torch.a.b.c``: ``ampcore.a.b.c`` by attribute access from the package
  (no extra import: a submodule ampcore does not import eagerly fails, as the
  script would);
- ``Tensor.x`` / ``Module.x``: an attribute of a float32 tensor / of an
  ``nn.Linear``;
- ``obj.x`` with owners ``A/B``: an attribute of a small instance of every
  owner (``Optimizer``, ``DataLoader``, ``DistributedSampler``, ...).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["UsedName", "read_usage", "resolves", "coverage"]


@dataclass(frozen=True)
class UsedName:
    """One torch name, its table category, how many files use it, and (for ``obj.x``) the classes that own it."""

    name: str
    category: str
    files: int
    owners: tuple[str, ...] = ()


def read_usage(path: str | Path) -> list[UsedName]:
    """The rows of a usage table (CSV: name, category, files, owners separated by ``/``)."""
    with open(path, newline="", encoding="utf-8") as f:
        return [
            UsedName(r["name"], r["category"], int(r["files"]), tuple(o for o in r["owners"].split("/") if o))
            for r in csv.DictReader(f)
        ]


def _owner_factories() -> dict[str, Callable[[], Any]]:
    import ampcore
    from ampcore import nn, optim
    from ampcore.utils import data

    def optimizer() -> Any:
        return optim.SGD(nn.Linear(1, 1, device="cpu").parameters(), lr=0.1)

    def distribution() -> Any:
        return ampcore.distributions.Categorical(probs=ampcore.tensor([0.5, 0.5], device="cpu"))

    return {
        "Optimizer": optimizer,
        "LRScheduler": lambda: optim.lr_scheduler.StepLR(optimizer(), 1),
        "GradScaler": lambda: ampcore.amp.GradScaler("cpu"),
        "DataLoader": lambda: data.DataLoader(data.TensorDataset(ampcore.zeros(2, device="cpu"))),
        "DistributedSampler": lambda: data.DistributedSampler(range(4), num_replicas=1, rank=0),
        "Distribution": distribution,
    }


def _attribute_path(root: Any, dotted: str) -> bool:
    obj = root
    for part in dotted.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return False
    return True


def resolves(used: UsedName) -> bool:
    """True when ``used.name`` exists in ampcore after the rename (see the module docstring for the rules)."""
    import ampcore

    head, _, rest = used.name.partition(".")
    if head == "torch":
        return _attribute_path(ampcore, rest)
    if head == "Tensor":
        return _attribute_path(ampcore.zeros(2, 2, device="cpu"), rest)
    if head == "Module":
        return _attribute_path(ampcore.nn.Linear(1, 1, device="cpu"), rest)
    if head == "obj":
        factories = _owner_factories()
        for owner in used.owners:
            try:
                instance = factories[owner]()
            except AttributeError:  # the owner class itself is missing
                return False
            if not _attribute_path(instance, rest):
                return False
        return bool(used.owners)
    raise ValueError(f"cannot resolve {used.name!r}: names start with torch., Tensor., Module. or obj.")


def coverage(names: Iterable[UsedName]) -> tuple[int, int, list[UsedName]]:
    """(file-uses present, file-uses in all, the names missing), over ``names``."""
    present = total = 0
    missing = []
    for used in names:
        total += used.files
        if resolves(used):
            present += used.files
        else:
            missing.append(used)
    return present, total, missing
