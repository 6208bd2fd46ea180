"""torch's legacy tensor types as constructors: ``ampcore.LongTensor([1, 2])``, ``ampcore.FloatTensor(3, 4)``.

Each is a class whose call makes a tensor of its dtype, as torch's does:
separate ints are a size (values are zeros here: ampcore has no
uninitialised allocation), anything else is data (nested lists, NumPy
arrays; a tensor of the same dtype is returned detached).  ``device=`` is
accepted; without it the tensor goes to the default device, like every
ampcore tensor (docs/porting-from-torch.md).  ``isinstance(t,
ampcore.FloatTensor)`` checks the dtype, as torch's check does on the CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as dt
from .creation import tensor, zeros
from .tensor import Tensor

__all__ = [
    "LEGACY_TYPES",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "LongTensor",
    "IntTensor",
    "BoolTensor",
]


class _LegacyTensorType(type):
    dtype: dt.DType

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:
        if args and all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            return zeros(*args, dtype=cls.dtype, device=device)
        if not args:
            return zeros(0, dtype=cls.dtype, device=device)
        if len(args) > 1:
            raise TypeError(f"{cls.__name__}() takes sizes as separate ints or one sequence of data, got {args!r}")
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype != cls.dtype:
                raise TypeError(f"{cls.__name__}(): expected a {cls.dtype.name} tensor, got {data.dtype.name}")
            return data.detach() if device is None else data.detach().to(device)
        return tensor(data, dtype=cls.dtype, device=device)

    def __repr__(cls) -> str:
        return f"<class 'ampcore.{cls.__name__}'>"


def _legacy(name: str, dtype: dt.DType) -> _LegacyTensorType:
    doc = f"torch.{name}: makes a {dtype.name} tensor (sizes or data); ``isinstance`` checks for {dtype.name}."
    return _LegacyTensorType(name, (), {"dtype": dtype, "__doc__": doc, "__module__": "ampcore"})


DoubleTensor = _legacy("DoubleTensor", dt.float64)
FloatTensor = _legacy("FloatTensor", dt.float32)
HalfTensor = _legacy("HalfTensor", dt.float16)
BFloat16Tensor = _legacy("BFloat16Tensor", dt.bfloat16)
LongTensor = _legacy("LongTensor", dt.int64)
IntTensor = _legacy("IntTensor", dt.int32)
BoolTensor = _legacy("BoolTensor", dt.bool_)

LEGACY_TYPES = {
    t.__name__: t for t in (DoubleTensor, FloatTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, BoolTensor)
}
"""Each legacy type by its torch name."""
