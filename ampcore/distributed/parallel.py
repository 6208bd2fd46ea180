"""``ampcore.nn.parallel``: torch.nn.parallel's names, DistributedDataParallel among them.

DistributedDataParallel needs the process group, which sits in a layer above
``ampcore.nn`` (docs/architecture.md), so torch's path is made here: this
module is installed as ``ampcore.nn.parallel`` (and :mod:`.ddp` as
``ampcore.nn.parallel.distributed``) when ``ampcore.distributed`` is
imported, which ``import ampcore`` does.  ``from ampcore.nn.parallel import
DistributedDataParallel`` and ``ampcore.nn.parallel.DistributedDataParallel``
then work as in torch.
"""

from __future__ import annotations

import sys

from .. import nn
from ..nn.modules.data_parallel import DataParallel, data_parallel
from . import ddp as distributed
from .ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel", "DataParallel", "data_parallel", "distributed"]


def _install() -> None:
    this = sys.modules[__name__]
    sys.modules.setdefault("ampcore.nn.parallel", this)
    sys.modules.setdefault("ampcore.nn.parallel.distributed", distributed)
    nn.parallel = this  # type: ignore[attr-defined]  # torch's attribute path, made at import


_install()
