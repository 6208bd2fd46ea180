"""Optimizers with torch.optim's names and update rules; state is float32 even for
float16/bfloat16 parameters."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer, StateDictError
from .sgd import SGD

__all__ = ["Optimizer", "StateDictError", "SGD", "Adam", "AdamW", "lr_scheduler"]
