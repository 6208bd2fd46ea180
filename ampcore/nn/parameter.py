"""Parameter: a Tensor a :class:`~ampcore.nn.Module` registers as learnable."""

from __future__ import annotations

from ..creation import empty
from ..tensor import Tensor

__all__ = ["Parameter", "rebind", "private_copy"]


class Parameter(Tensor):
    """A leaf tensor that modules register in ``parameters()``.

    ``Parameter(t)`` shares ``t``'s array (as torch does) and cuts it from any
    autograd graph; ``requires_grad`` defaults to True.  Raises TypeError for
    a non-Tensor, or for ``requires_grad=True`` on a non-floating tensor.
    """

    # No __slots__: a subclass with a __dict__ is fine, and lets users tag parameters.

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(
                f"Parameter needs an ampcore.Tensor, got {type(data).__name__}; "
                "wrap data with ampcore.tensor(...) first"
            )
        if requires_grad and not data.dtype.is_floating_point:
            raise TypeError(
                f"only floating tensors can require gradients, got {data.dtype.name}; "
                "pass requires_grad=False for an integer parameter"
            )
        return cls._wrap(data._data, data.device, data._backend, requires_grad=requires_grad)

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        # Tensor.__init__ refuses direct construction; __new__ did the work.
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


def rebind(t: Tensor, src: Tensor) -> None:
    """Make ``t`` hold ``src``'s array, device and dtype (torch's ``t.data = src``).

    ``t`` keeps its identity, ``requires_grad`` and ``grad``; used by
    ``Module.to`` and ``load_state_dict``.  ``src`` should own its array.
    """
    t._data = src._data
    t._backend = src._backend
    t.device = src.device
    t.dtype = src.dtype
    t.shape = src.shape


def private_copy(t: Tensor) -> Tensor:
    """A detached copy of ``t`` with its own array (never shared with ``t``)."""
    from ..autograd import no_grad

    with no_grad():
        return t.detach().clone()
