"""torch.utils's counterparts: :mod:`ampcore.utils.data` (data sets, samplers, DataLoader) and
:mod:`ampcore.utils.tensorboard` (SummaryWriter)."""

from typing import TYPE_CHECKING

from ..names import missing_names_getattr as _missing_names_getattr
from . import data, tensorboard

__all__ = ["data", "tensorboard"]


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
