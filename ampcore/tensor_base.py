"""What a tensor is to the layers below :class:`ampcore.Tensor`: a backend array with its dtype, shape,
device and backend, plus the autograd fields.

Autograd and dispatch work on :class:`TensorBase` and never import Tensor:
Tensor (in :mod:`ampcore.tensor`, on top of the ops) subclasses it and
installs itself with :func:`set_tensor_class`, so every tensor the lower
layers make is a full Tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from .device import Device
from .dtypes import DType

if TYPE_CHECKING:
    import numpy as np

__all__ = ["TENSOR_CLASS", "TensorBase", "set_tensor_class", "tensor_class", "wrap"]


class TensorBase:
    """The data of a tensor: ``_data`` (the backend array), ``_backend``, ``device``, ``dtype``, ``shape``,
    and ``requires_grad`` / ``grad`` / ``grad_fn``."""

    __slots__ = ("_data", "_backend", "device", "dtype", "shape", "requires_grad", "grad", "grad_fn", "__weakref__")

    _data: Any
    _backend: Any
    device: Device
    dtype: DType
    shape: tuple[int, ...]
    requires_grad: bool
    grad: Any
    grad_fn: Any

    if TYPE_CHECKING:
        # Tensor's, which every tensor the layers below it see is (set_tensor_class installs it on import).
        def _new_tensor(self, data: Any, dtype: DType | None = None) -> TensorBase: ...
        def numpy(self) -> np.ndarray: ...

    @classmethod
    def _wrap(cls, data: Any, device: Device, backend: Any, grad_fn: Any = None, requires_grad: bool = False) -> Self:
        """A tensor of this class holding ``data`` (a ``backend`` array on ``device``)."""
        t = object.__new__(cls)
        t._data = data
        t._backend = backend
        t.device = device
        t.dtype = backend.dtype_of(data)
        t.shape = backend.shape_of(data)
        t.requires_grad = bool(requires_grad or grad_fn is not None)
        t.grad = None
        t.grad_fn = grad_fn
        return t


# The class the layers below Tensor make, as its one element (ampcore.tensor installs Tensor on import): the
# op path reads ``TENSOR_CLASS[0]`` rather than call :func:`tensor_class`.
TENSOR_CLASS: list[type[TensorBase]] = [TensorBase]


def set_tensor_class(cls: type) -> None:
    """Make :func:`wrap` (and so every op) return instances of ``cls``, a subclass of TensorBase."""
    if not issubclass(cls, TensorBase):
        raise TypeError(f"the tensor class must subclass TensorBase, got {cls!r}")
    TENSOR_CLASS[0] = cls


def tensor_class() -> Any:
    """The class ops make (``ampcore.Tensor`` once it is imported)."""
    return TENSOR_CLASS[0]


def wrap(data: Any, device: Device, backend: Any, grad_fn: Any = None, requires_grad: bool = False) -> Any:
    """A tensor (of the installed class) holding the backend array ``data``."""
    return TENSOR_CLASS[0]._wrap(data, device, backend, grad_fn, requires_grad)
