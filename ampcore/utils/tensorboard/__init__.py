"""torch.utils.tensorboard: :class:`SummaryWriter` writes TensorBoard event files through the optional
``tensorboard`` package (``pip install 'ampcore[tensorboard]'``); importing this module does not need it."""

from . import summary, writer
from .writer import SummaryWriter, TensorBoardNotInstalledError

__all__ = ["SummaryWriter", "TensorBoardNotInstalledError", "summary", "writer"]
