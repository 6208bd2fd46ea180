"""torch.distributions' names: :class:`Categorical` (sampling actions and their log-probabilities, as
reinforcement-learning and sampling code uses it), over ampcore's ops."""

from typing import TYPE_CHECKING

from ..names import missing_names_getattr as _missing_names_getattr
from .categorical import Categorical
from .distribution import Distribution

__all__ = ["Distribution", "Categorical"]


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
