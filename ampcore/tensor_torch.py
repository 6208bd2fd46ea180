"""torch's Tensor attributes that are not ops: ``.data``, ``.type()``, ``.is_cuda``, ``new_zeros`` and kin, ``detach_``,
``resize_``.

:class:`ampcore.Tensor` inherits them from :class:`TorchTensorMethods`, kept
here so that the op methods in :mod:`ampcore.tensor` stay the ops.  ``t.data``
is an alias tensor whose array, dtype and shape are ``t``'s own (reading and
rebinding them), so ``p.data.mul_(0.5)`` changes ``p`` and records nothing, as
in torch.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any, SupportsIndex

from . import dtypes as dt
from .autograd import is_grad_enabled
from .creation import full, ones, tensor, zeros
from .ops import shape as _shape
from .tensor_base import TENSOR_CLASS, TensorBase

__all__ = ["TorchTensorMethods", "LEGACY_NAMES"]

LEGACY_NAMES = {
    dt.float64: "DoubleTensor",
    dt.float32: "FloatTensor",
    dt.float16: "HalfTensor",
    dt.bfloat16: "BFloat16Tensor",
    dt.int64: "LongTensor",
    dt.int32: "IntTensor",
    dt.bool_: "BoolTensor",
}
"""torch's legacy type name of each dtype (``t.type()``)."""


class TorchTensorMethods:
    """Mixed into :class:`ampcore.Tensor`; every method works on the tensor's own fields."""

    __slots__ = ()

    def type(self: Any, dtype: Any = None, non_blocking: bool = False) -> Any:
        """torch's legacy form: no argument gives the type's name (``'ampcore.FloatTensor'``, with the backend
        for other devices: ``'ampcore.opencl.FloatTensor'``); a dtype, a legacy type (``ampcore.LongTensor``) or
        its name converts, as ``.to(dtype)``."""
        if dtype is None:
            where = "" if self.device.type == "cpu" else f"{self.device.type}."
            return f"ampcore.{where}{LEGACY_NAMES.get(self.dtype, self.dtype.name)}"
        if isinstance(dtype, str) and dtype.endswith("Tensor"):
            name = dtype.rsplit(".", 1)[-1]
            found = [d for d, legacy in LEGACY_NAMES.items() if legacy == name]
            if not found:
                raise ValueError(f"unknown tensor type {dtype!r}; use one of {sorted(LEGACY_NAMES.values())}")
            dtype = found[0]
        return self.to(dtype=dt.as_dtype(getattr(dtype, "dtype", dtype)))  # a legacy type carries its dtype

    # torch's device-type flags
    is_cuda = property(lambda self: self.device.type == "cuda", doc="On the cuda backend.")
    is_cpu = property(lambda self: self.device.type == "cpu", doc="On the cpu backend.")
    is_xpu = property(lambda self: self.device.type == "xpu", doc="On a backend called 'xpu' (none ships).")
    is_mps = property(lambda self: self.device.type == "mps", doc="On a backend called 'mps' (none ships).")

    # ------------------------------------------------------------------ new tensors like this one
    def new_full(
        self: Any, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Any:
        """A tensor of ``size`` filled with ``fill_value``, of this tensor's dtype and device unless given."""
        return full(
            size, fill_value, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
        )

    def new_zeros(self: Any, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Any:
        """Zeros of ``size`` (ints or one sequence), of this tensor's dtype and device unless given."""
        return zeros(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    def new_ones(self: Any, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Any:
        """Ones of ``size``, of this tensor's dtype and device unless given."""
        return ones(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    new_empty = new_zeros  # ampcore has no uninitialised allocation (see ampcore.empty)

    def new_tensor(self: Any, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Any:
        """``ampcore.tensor(data)`` on this tensor's device, in its dtype unless given."""
        return tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    # ------------------------------------------------------------------ .data
    @property
    def data(self: Any) -> Any:
        """torch's ``t.data``: the same values without autograd history.  Changing it in place changes ``t``
        (``p.data.mul_(0.5)``, ``p.data.copy_(w)``) without recording anything, as in torch."""
        return _alias_class()._of(self)

    @data.setter
    def data(self: Any, value: Any) -> None:
        if not isinstance(value, TensorBase):
            raise TypeError(f"t.data must be set to a tensor, got {type(value).__name__}")
        if value.device != self.device:
            raise ValueError(f"t.data = value: value is on {str(value.device)!r}, the tensor on {str(self.device)!r}")
        self._data, self.dtype, self.shape = value._data, value.dtype, value.shape

    # ------------------------------------------------------------------ resizing
    def resize_(self: Any, *sizes: Any) -> Any:
        """torch's ``t.resize_(*sizes)``: ``t`` takes the shape ``sizes`` in place, keeping its leading elements in
        row-major order; new elements are 0 (torch leaves them uninitialised).  Records nothing; RuntimeError for
        a tensor that requires grad, as in torch."""
        if is_grad_enabled() and self.requires_grad:
            raise RuntimeError("cannot resize a tensor that requires grad; resize t.detach() or under no_grad()")
        target = _resize_shape(sizes)
        count = 1
        for n in target:
            count *= n
        flat = _shape.reshape(self.detach(), (-1,))
        if count < flat.shape[0]:
            flat = _shape.getitem(flat, slice(0, count))
        elif count > flat.shape[0]:
            flat = _shape.pad(flat, (0, count - flat.shape[0]))
        out = _shape.reshape(flat, target)
        self._data, self.shape = out._data, out.shape
        return self

    def resize_as_(self: Any, other: Any) -> Any:
        """``t.resize_(other.shape)``."""
        return self.resize_(other.shape)

    def resize(self: Any, *sizes: Any) -> Any:
        """torch's deprecated non-in-place resize: ``t`` in the shape ``sizes`` of the same number of elements
        (differentiable; it warns, as torch does).  RuntimeError for another number of elements."""
        warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
        target = _resize_shape(sizes)
        count = 1
        for n in target:
            count *= n
        if count != self.numel():
            raise RuntimeError(
                f"resize to {target} ({count} elements) of a tensor of shape {self.shape} ({self.numel()} elements): "
                "the non-in-place resize keeps the number of elements; use resize_ or reshape"
            )
        return _shape.reshape(self, target)

    def detach_(self: Any) -> Any:
        """Cut this tensor from the graph in place (it becomes a leaf that does not require grad)."""
        self.grad_fn = None
        self.requires_grad = False
        return self


def _resize_shape(sizes: tuple[Any, ...]) -> tuple[int, ...]:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in sizes):
        raise ValueError(f"resize takes non-negative int sizes, got {sizes!r}")
    return tuple(sizes)


_ALIAS_CLASSES: dict[type, type] = {}


def _alias_class() -> Any:
    """The alias class for ``t.data``: a subclass of the installed Tensor class (made once)."""
    base = TENSOR_CLASS[0]
    alias = _ALIAS_CLASSES.get(base)
    if alias is None:
        alias = _ALIAS_CLASSES[base] = type("DataAlias", (_DataAliasMixin, base), {"__slots__": ("_owner",)})
    return alias


class _DataAliasMixin:
    """``t.data``: reads and rebinds ``t``'s array, dtype and shape; its own autograd fields stay empty."""

    __slots__ = ()  # the class made from it adds the slot ``_owner`` (two slotted bases cannot be combined)
    _owner: Any

    @classmethod
    def _of(cls, owner: Any) -> Any:
        alias: Any = object.__new__(cls)
        alias._owner = owner
        alias._backend, alias.device = owner._backend, owner.device
        alias.requires_grad, alias.grad, alias.grad_fn = False, None, None
        return alias

    _data = property(lambda self: self._owner._data, lambda self, v: setattr(self._owner, "_data", v))
    dtype = property(lambda self: self._owner.dtype, lambda self, v: setattr(self._owner, "dtype", v))
    shape = property(lambda self: self._owner.shape, lambda self, v: setattr(self._owner, "shape", v))

    def __deepcopy__(self, memo: dict) -> Any:
        return copy.deepcopy(self._owner.detach(), memo)

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return self._owner.detach().__reduce_ex__(protocol)
