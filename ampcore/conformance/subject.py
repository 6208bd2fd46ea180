"""The backend a conformance run checks: one device of it, and the helpers every check needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..backend import Backend, Capabilities
from ..kernels import KernelTable

__all__ = ["BackendUnderTest", "NOT_SUPPORTED"]

# The reason prefix of a check skipped because the backend's capabilities say no;
# the report shows those as "not supported" rather than as skipped.
NOT_SUPPORTED = "not supported"


@dataclass(frozen=True)
class BackendUnderTest:
    """What the ``backend`` fixture gives every check: the Backend object and a device index.

    ``put``/``get`` move NumPy arrays to and from the device; ``require_compute``
    and ``require_storage`` skip a check as "not supported" when the
    backend's capabilities exclude the dtype (so claims, not luck, decide
    what is checked).
    """

    backend: Backend
    index: int = 0
    _caps: list = field(default_factory=list, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def device(self) -> str:
        """The device string for ampcore calls, e.g. ``"cuda:1"``."""
        return f"{self.backend.name}:{self.index}"

    @property
    def kernels(self) -> KernelTable:
        return self.backend.kernels

    @property
    def capabilities(self) -> Capabilities:
        if not self._caps:
            self._caps.append(self.backend.capabilities(self.index))
        return self._caps[0]

    def stores(self, dtype: dt.DType | str) -> bool:
        return dt.as_dtype(dtype) in self.capabilities.storable

    def computes(self, dtype: dt.DType | str) -> bool:
        """Whether kernels run on ``dtype`` (native or emulated); bool always counts."""
        d = dt.as_dtype(dtype)
        caps = self.capabilities
        return d is dt.bool_ or d in caps.native or d in caps.emulated

    def require_storage(self, *dtypes: dt.DType | str) -> None:
        """Skip the calling check as not supported unless every dtype is storable."""
        for d in dtypes:
            if not self.stores(d):
                _skip(f"{NOT_SUPPORTED}: {self.name!r} does not claim to store {dt.as_dtype(d).name}")

    def require_compute(self, *dtypes: dt.DType | str) -> None:
        """Skip the calling check as not supported unless kernels run on every dtype."""
        for d in dtypes:
            if not self.computes(d):
                _skip(f"{NOT_SUPPORTED}: {self.name!r} does not claim to compute in {dt.as_dtype(d).name}")

    def put(self, array: Any, dtype: dt.DType | str) -> Any:
        """A device array holding ``array`` converted to ``dtype``."""
        return self.backend.from_numpy(np.asarray(array), dt.as_dtype(dtype), self.index)

    def get(self, array: Any) -> np.ndarray:
        """A host copy of a device array."""
        return self.backend.to_numpy(array)

    def tensor(self, array: Any, dtype: dt.DType | str, requires_grad: bool = False) -> Any:
        """An ampcore Tensor on this device."""
        from ..creation import tensor

        return tensor(np.asarray(array), dtype=dt.as_dtype(dtype), device=self.device, requires_grad=requires_grad)


def _skip(reason: str) -> None:
    import pytest

    pytest.skip(reason)
