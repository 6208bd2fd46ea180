"""Per-backend device modules, as torch has ``torch.cuda``: ``ampcore.cuda``, ``ampcore.opencl``, ``ampcore.cpu``.

One module object per backend name, made on first access of ``ampcore.<name>``
(the package's ``__getattr__``) from the plugin registry, so a third-party
backend registered as ``"mydev"`` gets ``ampcore.mydev`` too.  The built-in
names resolve even where their distribution is not installed, so
``ampcore.cuda.is_available()`` is simply False there, as in torch.  Each
module has::

    is_available()            the backend is installed and has a usable device   (Backend.availability)
    device_count()            its devices, 0 when unavailable                    (Backend.device_count)
    current_device()          the index ampcore uses for it by default
    get_device_name(device)   Capabilities.device_name
    is_bf16_supported(including_emulation=True)
                              bfloat16 among the native (or emulated) dtypes     (Backend.capabilities)
    synchronize(device)       wait for queued work                               (Backend.synchronize)
    memory_allocated(device)  bytes held by arrays, 0 where the backend cannot tell (Backend.memory_allocated)
    manual_seed(seed), manual_seed_all(seed)
                              seed ampcore's generator (one for every device)

``device`` is None (the current device), an index, ``"name:N"`` or a Device.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from . import dtypes as dt
from .backend import Backend, BackendUnavailableError
from .creation import manual_seed as _manual_seed
from .device import parse_device
from .plugins import get_default_device
from .plugins.registry import PluginLoadError, UnknownBackendError, registry

__all__ = ["BUILTIN", "BackendModule", "module_for"]

BUILTIN = ("cpu", "opencl", "cuda")
_DISTRIBUTION = {"cpu": "ampcore-cpu", "opencl": "ampcore-opencl", "cuda": "ampcore-cuda"}
_modules: dict[str, BackendModule] = {}


class BackendModule(types.ModuleType):
    """``ampcore.<backend>``: torch.cuda's device functions for one backend."""

    def __init__(self, backend_name: str) -> None:
        super().__init__(f"ampcore.{backend_name}", f"Device functions of the {backend_name!r} backend (torch.cuda's).")
        self.backend_name = backend_name

    # ---------------------------------------------------------------- lookup
    def _backend(self, *, available: bool = True) -> Backend:
        try:
            return registry.get_backend(self.backend_name, require_available=available)
        except UnknownBackendError as err:
            hint = f": pip install {_DISTRIBUTION[self.backend_name]}" if self.backend_name in _DISTRIBUTION else ""
            raise RuntimeError(f"backend {self.backend_name!r} is not installed{hint}") from err

    def _index(self, device: Any) -> int:
        if device is None:
            return self.current_device()
        if isinstance(device, int) and not isinstance(device, bool):
            index = device
        else:
            dev = parse_device(device)
            if dev.type != self.backend_name:
                raise ValueError(f"ampcore.{self.backend_name} got device {str(dev)!r} of another backend")
            index = dev.index
        count = self.device_count()
        if not 0 <= index < count:
            raise ValueError(
                f"invalid device index {index} for {self.backend_name!r}: it has {count} device(s) (0..{count - 1})"
            )
        return index

    # ---------------------------------------------------------------- torch.cuda's functions
    def is_available(self) -> bool:
        """True if the backend is installed and has a usable device; never raises."""
        try:
            self._backend()
        except (RuntimeError, BackendUnavailableError, PluginLoadError):
            return False
        return True

    def device_count(self) -> int:
        """Its devices (``name:0`` .. ``name:N-1``); 0 when it is not installed or unavailable."""
        if not self.is_available():
            return 0
        return int(self._backend().device_count())

    def current_device(self) -> int:
        """The index ampcore uses for this backend by default (the default device's, or its first usable one)."""
        default = get_default_device()
        if default.type == self.backend_name:
            return default.index
        return registry.first_usable_index(self._backend())

    def get_device_name(self, device: Any = None) -> str:
        """The device's name (``Capabilities.device_name``)."""
        return self._backend().capabilities(self._index(device)).device_name

    def is_bf16_supported(self, including_emulation: bool = True) -> bool:
        """bfloat16 computes natively on the current device (or, by default, is emulated exactly); False when
        the backend is unavailable."""
        if not self.is_available():
            return False
        caps = self._backend().capabilities(self.current_device())
        return dt.bfloat16 in caps.native or (including_emulation and dt.bfloat16 in caps.emulated)

    def synchronize(self, device: Any = None) -> None:
        """Wait for the work queued on the device."""
        self._backend().synchronize(self._index(device))

    def memory_allocated(self, device: Any = None) -> int:
        """Bytes the device's arrays hold now; 0 where the backend cannot tell (``Backend.memory_allocated``)."""
        return int(self._backend().memory_allocated(self._index(device)) or 0)

    def manual_seed(self, seed: int) -> None:
        """Seed ampcore's generator, which every device draws from (so it also seeds the others)."""
        _manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        """As :meth:`manual_seed`: ampcore has one generator for all devices."""
        _manual_seed(seed)

    def __repr__(self) -> str:
        return f"<ampcore device module {self.__name__!r}>"


def _known() -> list[str]:
    registry.ensure_loaded()
    return sorted(set(BUILTIN) | set(registry.records) | {b.name for b in registry.broken})


def module_for(name: str) -> BackendModule:
    """``ampcore.<name>``: the module of backend ``name``; AttributeError naming the known backends otherwise."""
    module = _modules.get(name)
    if module is not None:
        return module
    if name.startswith("_"):  # dunder probes (copy, pickle, inspect) never load plugins
        raise AttributeError(f"module 'ampcore' has no attribute {name!r}")
    known = _known()
    if name not in known:
        listed = ", ".join(repr(k) for k in known)
        raise AttributeError(f"module 'ampcore' has no attribute {name!r}; the backends' modules are {listed}")
    module = _modules[name] = BackendModule(name)
    sys.modules.setdefault(module.__name__, module)  # `import ampcore.<name>` works after the first access
    return module
