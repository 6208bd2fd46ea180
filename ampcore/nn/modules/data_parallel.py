"""DataParallel and data_parallel, as torch.nn.parallel's: here they run the module on the one device it is on.

torch's DataParallel splits each batch over several GPUs of one process.
An ampcore process uses one device, so the wrapper calls the module as it
is (torch does the same when it finds one device); several ``device_ids``
raise, naming the way to use more devices: one process per device with
DistributedDataParallel under ``mpiexec`` (docs/distributed.md).  The
wrapper's ``state_dict`` keys start with ``module.``, as torch's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..module import Module

__all__ = ["DataParallel", "data_parallel"]


def _check_one_device(device_ids: Sequence[Any] | None) -> None:
    if device_ids is not None and len(device_ids) > 1:
        raise NotImplementedError(
            f"DataParallel over several devices {list(device_ids)!r} is not supported: an ampcore process uses one "
            "device; run one process per device with DistributedDataParallel under mpiexec (docs/distributed.md)"
        )


class DataParallel(Module):
    """``DataParallel(module, device_ids=None, output_device=None, dim=0)``: calls ``module`` on its own device."""

    def __init__(
        self, module: Module, device_ids: Sequence[Any] | None = None, output_device: Any = None, dim: int = 0
    ) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel wraps an ampcore.nn.Module, got {type(module).__name__}")
        _check_one_device(device_ids)
        super().__init__()
        self.module = module
        self.device_ids = None if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


def data_parallel(
    module: Module,
    inputs: Any,
    device_ids: Sequence[Any] | None = None,
    output_device: Any = None,
    dim: int = 0,
    module_kwargs: dict[str, Any] | None = None,
) -> Any:
    """The functional form of :class:`DataParallel`: ``module(*inputs, **module_kwargs)`` on its device."""
    _check_one_device(device_ids)
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    return module(*args, **(module_kwargs or {}))
