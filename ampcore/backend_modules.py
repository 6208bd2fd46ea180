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
    set_device(device)        make ``"name"`` (no index) mean this device        (torch.cuda.set_device)
    memory_allocated(device), max_memory_allocated(device)
                              bytes held by arrays now / at most since the last reset_peak_memory_stats,
                              0 where the backend cannot tell (Backend.memory_allocated, .max_memory_allocated)
    reset_peak_memory_stats(device), empty_cache()
                              the backend's own, a no-op where it has none
    manual_seed(seed), manual_seed_all(seed)
                              seed ampcore's generator (one for every device)
    OutOfMemoryError          Python's MemoryError, which NumPy and CuPy raise when an allocation fails
    amp                       torch.cuda.amp's deprecated names bound to this backend: ``autocast(...)`` is
                              ``ampcore.autocast(name, ...)``, ``GradScaler(...)`` ``ampcore.GradScaler(name, ...)``
                              (each warns FutureWarning, as torch's do), ``custom_fwd``, ``custom_bwd``

``device`` is None (the current device), an index, ``"name:N"`` or a Device.
The built-in names' modules (and their ``amp``) are in ``sys.modules`` from
``import ampcore`` on, so ``from ampcore.cuda.amp import GradScaler`` works.
"""

from __future__ import annotations

import functools
import sys
import types
import warnings
from typing import Any

from . import dtypes as dt
from .amp import GradScaler, autocast, custom_bwd, custom_fwd
from .backend import Backend, BackendUnavailableError
from .creation import manual_seed as _manual_seed
from .device import parse_device
from .names import close_matches, missing_torch_name
from .plugins import get_default_device
from .plugins.registry import PluginLoadError, UnknownBackendError, registry

__all__ = ["BUILTIN", "TORCH_DEVICE_MODULES", "BackendModule", "module_for"]

BUILTIN = ("cpu", "opencl", "cuda")
# torch's other device modules (torch.mps, torch.xpu, ...): asked for on ampcore, they are backends not installed.
TORCH_DEVICE_MODULES = ("mps", "xpu", "mtia", "npu", "hpu", "xla", "ipu", "vulkan", "maia")
_DISTRIBUTION = {"cpu": "ampcore-cpu", "opencl": "ampcore-opencl", "cuda": "ampcore-cuda"}
_modules: dict[str, BackendModule] = {}


class BackendModule(types.ModuleType):
    """``ampcore.<backend>``: torch.cuda's device functions for one backend."""

    OutOfMemoryError = MemoryError

    def __init__(self, backend_name: str) -> None:
        super().__init__(f"ampcore.{backend_name}", f"Device functions of the {backend_name!r} backend (torch.cuda's).")
        self.backend_name = backend_name
        self.amp = _amp_module(backend_name)

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
        """The index ampcore uses for this backend by default: :meth:`set_device`'s, else the default device's,
        else its first usable one."""
        chosen = registry.current_index(self.backend_name)
        if chosen is not None:
            return chosen
        default = get_default_device()
        if default.type == self.backend_name:
            return default.index
        return registry.first_usable_index(self._backend())

    def set_device(self, device: Any) -> None:
        """Make ``"<name>"`` without an index mean ``device`` (torch.cuda.set_device); a default device of this
        backend moves there too.  ValueError for an index the backend does not have."""
        index = self._index(device)
        registry.set_current_index(self.backend_name, index)
        default = get_default_device()
        if default.type == self.backend_name and default.index != index:
            registry.set_default(f"{self.backend_name}:{index}")

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

    def max_memory_allocated(self, device: Any = None) -> int:
        """The most bytes the device's arrays held since the last :meth:`reset_peak_memory_stats`; 0 where the
        backend cannot tell (``Backend.max_memory_allocated``)."""
        return int(self._backend().max_memory_allocated(self._index(device)) or 0)

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        """Start :meth:`max_memory_allocated` again from the bytes held now."""
        self._backend().reset_peak_memory_stats(self._index(device))

    def empty_cache(self) -> None:
        """Give the memory the backend caches (freed blocks kept for reuse) back to the device; a no-op when the
        backend is unavailable or keeps none."""
        if self.is_available():
            self._backend().empty_cache(self.current_device())

    def manual_seed(self, seed: int) -> None:
        """Seed ampcore's generator, which every device draws from (so it also seeds the others)."""
        _manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        """As :meth:`manual_seed`: ampcore has one generator for all devices."""
        _manual_seed(seed)

    def __repr__(self) -> str:
        return f"<ampcore device module {self.__name__!r}>"


def _deprecated(what: str, name: str, replacement: str) -> None:
    warnings.warn(
        f"`ampcore.{name}.amp.{what}(args...)` is deprecated. Please use `{replacement}` instead.",
        FutureWarning,
        stacklevel=3,
    )


def _amp_module(name: str) -> types.ModuleType:
    """``ampcore.<name>.amp``: torch.cuda.amp's names with the device type bound to ``name``."""
    module = types.ModuleType(f"ampcore.{name}.amp", f"torch.cuda.amp's deprecated names for the {name!r} backend.")

    class DeviceAutocast(autocast):
        __doc__ = f"``autocast({name!r}, ...)`` under torch.cuda.amp's deprecated name."

        def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True, **kwargs: Any):
            _deprecated("autocast", name, f"ampcore.amp.autocast({name!r}, args...)")
            super().__init__(name, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled, **kwargs)

    class DeviceGradScaler(GradScaler):
        __doc__ = f"``GradScaler({name!r}, ...)`` under torch.cuda.amp's deprecated name."

        def __init__(self, *args: Any, **kwargs: Any):
            _deprecated("GradScaler", name, f"ampcore.amp.GradScaler({name!r}, args...)")
            super().__init__(name, *args, **kwargs)

    for cls, short in ((DeviceAutocast, "autocast"), (DeviceGradScaler, "GradScaler")):
        cls.__name__ = cls.__qualname__ = short
        cls.__module__ = module.__name__
        setattr(module, short, cls)
    module.custom_fwd = functools.partial(custom_fwd, device_type=name)  # type: ignore[attr-defined]
    module.custom_bwd = functools.partial(custom_bwd, device_type=name)  # type: ignore[attr-defined]
    return module


def _known() -> list[str]:
    registry.ensure_loaded()
    return sorted(set(BUILTIN) | set(registry.records) | {b.name for b in registry.broken})


def module_for(name: str) -> BackendModule:
    """``ampcore.<name>``: the module of backend ``name``.

    AttributeError otherwise: naming the known backends when ``name`` looks like a backend (one of torch's
    device modules, or close to an installed backend's name), else naming torch's ``torch.<name>`` as not in
    ampcore yet, with the porting guide.
    """
    module = _modules.get(name)
    if module is not None:
        return module
    if name.startswith("_"):  # dunder probes (copy, pickle, inspect) never load plugins
        raise AttributeError(f"module 'ampcore' has no attribute {name!r}")
    known = _known()
    if name not in known:
        if name in TORCH_DEVICE_MODULES or close_matches(name, known):
            listed = ", ".join(repr(k) for k in known)
            raise AttributeError(f"module 'ampcore' has no attribute {name!r}; the backends' modules are {listed}")
        raise missing_torch_name("ampcore", name, getattr(sys.modules.get("ampcore"), "__all__", ()))
    return _install(name)


def _install(name: str) -> BackendModule:
    module = _modules[name] = BackendModule(name)
    sys.modules.setdefault(module.__name__, module)  # `import ampcore.<name>` works after the first access
    sys.modules.setdefault(module.amp.__name__, module.amp)
    return module


for _name in BUILTIN:  # torch's import paths (``from ampcore.cuda.amp import GradScaler``) work from the start
    _install(_name)
