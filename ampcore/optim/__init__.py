"""Optimizers with torch.optim's names and update rules; state is float32 even for
float16/bfloat16 parameters."""

from typing import TYPE_CHECKING

from ..names import missing_names_getattr as _missing_names_getattr
from . import lr_scheduler
from .adam import Adam, AdamW
from .adaptive import Adadelta, Adagrad, RMSprop
from .optimizer import Optimizer, StateDictError
from .sgd import SGD

__all__ = [
    "Optimizer",
    "StateDictError",
    "SGD",
    "Adam",
    "AdamW",
    "Adagrad",
    "RMSprop",
    "Adadelta",
    "lr_scheduler",
]


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
