"""Finding plugins, loading backends and choosing a device.

Plugins are loaded lazily, on first use, under a lock (safe when first used
from several threads).  Each entry point is loaded and each hook called on its
own, so one broken plugin is recorded and the rest keep working; set
``AMPCORE_STRICT_PLUGINS=1`` to make any plugin failure fatal.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from ..backend import Availability, Backend, BackendUnavailableError
from ..device import Device, DeviceLike, device_of, parse_device
from ..kernels import KernelTable, MissingKernelsError
from ..names import did_you_mean
from . import hookspecs, threads
from .capabilities import forget_capabilities

ENTRY_POINT_GROUP = "ampcore.backends"


class UnknownBackendError(ValueError):
    """No backend of that name is installed."""

    def __init__(self, name: str, known: Iterable[str]):
        self.name = name
        self.known = sorted(known)
        listed = ", ".join(repr(k) for k in self.known) or "none"
        super().__init__(f"unknown backend {name!r}{did_you_mean(name, self.known)}; installed backends are {listed}")


class PluginLoadError(RuntimeError):
    """A plugin failed while loading (raised only in strict mode or when asked for by name)."""


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that could not be loaded, and why."""

    name: str
    error: str
    where: str  # "import", "ampcore_backends", "ampcore_kernels", "validate"
    exception: BaseException | None = field(default=None, compare=False, repr=False)


@dataclass
class BackendRecord:
    """A loaded backend with where it came from, for ``ampcore info``."""

    backend: Backend
    plugin: str
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None
    _availability: Any = None

    def availability(self) -> Any:
        """The backend's availability, probed once (probing a driver can be slow)."""
        if self._availability is None:
            try:
                self._availability = self.backend.availability()
            except Exception as exc:  # noqa: BLE001 - availability() must not raise; report it instead
                self._availability = Availability(False, f"availability() raised {type(exc).__name__}: {exc}")
        return self._availability


def device_status(backend: Backend, index: int) -> Any:
    """``backend.device_status(index)``, with a raising implementation reported as an unusable device."""
    try:
        return backend.device_status(index)
    except Exception as exc:  # noqa: BLE001 - device_status() must not raise; report it instead
        return Availability(False, f"device_status() raised {type(exc).__name__}: {exc}")


def _strict() -> bool:
    return os.environ.get("AMPCORE_STRICT_PLUGINS", "").strip().lower() in {"1", "true", "yes", "on"}


def _call_impl(impl: Any, **kwargs: Any) -> Any:
    """Call one hook implementation with just the arguments it declares."""
    return impl.function(*[kwargs[name] for name in impl.argnames])


class Registry:
    """Backends and plugins of this process."""

    def __init__(self, *, load_entry_points: bool = True):
        self._lock = threading.RLock()
        self._loaded = False
        self._strict_error: PluginLoadError | None = None
        self._load_entry_points = load_entry_points
        self.pm = pluggy.PluginManager("ampcore")
        self.pm.add_hookspecs(hookspecs)
        self.records: dict[str, BackendRecord] = {}
        self.broken: list[BrokenPlugin] = []
        self._default: Device | None = None
        self._current: dict[str, int] = {}  # torch.cuda.set_device's choice, per backend
        self._remembered_default: tuple[Any, Device] | None = None
        self._ep_info: dict[str, tuple[str | None, str | None, str]] = {}
        # Bumped whenever plugins or backends change, so derived caches (cast policies) rebuild.
        self.generation = 0

    def entry_points(self) -> dict[str, tuple[str | None, str | None, str]]:
        """Entry-point name -> (distribution, version, module) of every ``ampcore.backends`` entry point loaded."""
        self.ensure_loaded()
        return dict(self._ep_info)

    # --- loading -------------------------------------------------------
    def ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            if self._strict_error is not None:
                # Loading again would re-register the plugins loaded before the failure
                # and blame them ("already registered"); keep reporting the real culprit.
                raise self._strict_error
            if self._load_entry_points:
                try:
                    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
                        self._load_entry_point(ep)
                except PluginLoadError as exc:
                    self._strict_error = exc
                    raise
            self._loaded = True

    def _record_broken(self, name: str, where: str, exc: BaseException, backend: str | None = None) -> None:
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if backend is not None:
            message = f"for backend {backend!r}: {message}"
        self.broken.append(BrokenPlugin(name, message, where, exc))
        if _strict():
            raise PluginLoadError(
                f"plugin {name!r} failed in {where}: {message} (AMPCORE_STRICT_PLUGINS is set)"
            ) from exc

    def _load_entry_point(self, ep: metadata.EntryPoint) -> None:
        dist = getattr(ep, "dist", None)
        self._ep_info[ep.name] = (dist.metadata["Name"] if dist else None, dist.version if dist else None, ep.value)
        try:
            plugin = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the others down
            self._record_broken(ep.name, "import", exc)
            return
        self.register_plugin(plugin, name=ep.name)

    def register_plugin(self, plugin: Any, name: str | None = None) -> None:
        """Register a plugin object or module and take in its backends and kernels."""
        with self._lock:
            name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
            self.generation += 1
            try:
                self.pm.register(plugin, name=name)
            except Exception as exc:  # noqa: BLE001 - a plugin pluggy refuses is recorded as broken, the rest load
                self._record_broken(name, "register", exc)
                return
            for impl in self.pm.hook.ampcore_backends.get_hookimpls():
                if impl.plugin is plugin:
                    self._collect_backends(impl, name)
            # Kernel hooks of this plugin apply to every backend known so far;
            # kernel hooks of earlier plugins apply to this plugin's backends.
            for record in self.records.values():
                for impl in self.pm.hook.ampcore_kernels.get_hookimpls():
                    if impl.plugin is plugin or record.plugin == name:
                        self._apply_kernels(impl, record.backend)

    def _collect_backends(self, impl: Any, plugin_name: str) -> None:
        try:
            result = _call_impl(impl)
        except Exception as exc:  # noqa: BLE001 - a failing hook is recorded against its plugin, the rest load
            self._record_broken(plugin_name, "ampcore_backends", exc)
            return
        if result is None:
            return
        for backend in result if isinstance(result, (list, tuple)) else [result]:
            try:
                self._add_backend(backend, plugin_name)
            except Exception as exc:  # noqa: BLE001 - an invalid backend is recorded against its plugin, the rest load
                self._record_broken(plugin_name, "validate", exc)

    def _add_backend(self, backend: Backend, plugin_name: str) -> None:
        if not isinstance(backend, Backend):
            raise TypeError(f"plugin {plugin_name!r} returned {backend!r}, which is not an ampcore.Backend")
        if not backend.name or ":" in backend.name:
            raise ValueError(f"backend {backend!r} needs a non-empty name without ':'")
        if backend.name in self.records:
            raise ValueError(
                f"backend name {backend.name!r} from plugin {plugin_name!r} is already taken by plugin "
                f"{self.records[backend.name].plugin!r}"
            )
        backend.device_type = backend.device_type or backend.name
        table = KernelTable(backend.name, backend.kernel_functions(), provider=backend.name)
        missing = table.missing_primitives()
        if missing:
            raise MissingKernelsError(backend.name, missing)
        table.bind_array_info(backend.shape_of, backend.dtype_of)
        backend.kernels = table
        dist, version, ep_value = self._ep_info.get(plugin_name, (None, None, None))
        backend.set_num_threads(threads.current().n)  # the thread setting holds from the start
        self.records[backend.name] = BackendRecord(backend, plugin_name, dist, version, ep_value)

    def _apply_kernels(self, impl: Any, backend: Backend) -> None:
        try:
            result = _call_impl(impl, backend=backend)
            if result:
                backend.kernels.register(result, provider=impl.plugin_name)
        except Exception as exc:  # noqa: BLE001 - once per backend the hook failed for, the backend named in the message
            self._record_broken(impl.plugin_name, "ampcore_kernels", exc, backend=backend.name)

    def register_backend(self, backend: Backend, plugin_name: str | None = None) -> Backend:
        """Register a backend object from code (tests, notebooks); errors are raised, not recorded."""
        self.ensure_loaded()
        with self._lock:
            name = plugin_name or f"<code:{getattr(backend, 'name', '?')}>"
            self.generation += 1
            self._add_backend(backend, name)
            for impl in self.pm.hook.ampcore_kernels.get_hookimpls():
                self._apply_kernels(impl, backend)
        return backend

    def unregister_backend(self, name: str) -> None:
        """Forget a backend registered from code (tests)."""
        with self._lock:
            self.generation += 1
            self.records.pop(name, None)
            forget_capabilities(name)
            self._current.pop(name, None)
            if self._default is not None and self._default.type == name:
                self._default = None

    def policy_layers(self, device_type: str) -> list[tuple[str, Any]]:
        """(plugin name, op -> category mapping) from every ``ampcore_policy`` hook, first registered first.

        A hook that raises is recorded as broken (fatal in strict mode) and skipped.
        """
        self.ensure_loaded()
        layers = []
        for impl in reversed(self.pm.hook.ampcore_policy.get_hookimpls()):  # pluggy lists the newest first
            try:
                result = _call_impl(impl, device_type=device_type)
            except Exception as exc:  # noqa: BLE001 - a failing policy hook is recorded against its plugin, the other layers apply
                with self._lock:
                    self._record_broken(impl.plugin_name, "ampcore_policy", exc)
                continue
            if result is not None:
                layers.append((impl.plugin_name, result))
        return layers

    # --- selection -----------------------------------------------------
    def get_backend(self, name: str, *, require_available: bool = True) -> Backend:
        """The backend called ``name``; raises if unknown, broken or unavailable."""
        self.ensure_loaded()
        record = self.records.get(name)
        if record is None:
            for broken in self.broken:
                if broken.name == name:
                    raise PluginLoadError(
                        f"backend {name!r} is installed but broken ({broken.where}): {broken.error}"
                    ) from broken.exception
            raise UnknownBackendError(name, self.records)
        if require_available:
            status = record.availability()
            if not status.ok:
                raise BackendUnavailableError(name, status.reason)
        return record.backend

    def resolve(self, device: DeviceLike | None) -> Device:
        """Turn a device name (or None for the default) into a checked Device."""
        if device is None:
            return self.default_device()
        dev = parse_device(device)
        backend = self.get_backend(dev.type)
        if not dev.explicit_index:  # "opencl" means set_current_index's device, else the first usable one
            current = self._current.get(dev.type)
            return device_of(dev.type, self.first_usable_index(backend) if current is None else current)
        count = backend.device_count()
        if not 0 <= dev.index < count:
            raise ValueError(
                f"device {str(dev)!r} does not exist; backend {dev.type!r} has {count} device(s) "
                f"({', '.join(f'{dev.type}:{i}' for i in range(count))})"
            )
        status = device_status(backend, dev.index)
        if not status.ok:
            raise BackendUnavailableError(dev.type, status.reason, device=str(dev))
        return dev

    @staticmethod
    def first_usable_index(backend: Backend) -> int:
        """The lowest index whose device is usable (an available backend has one); 0 if none says so."""
        for index in range(backend.device_count()):
            if device_status(backend, index).ok:
                return index
        return 0

    def default_device(self) -> Device:
        """``set_default_device`` if called, else ``AMPCORE_DEVICE``, else the best available backend.

        The last two are remembered until a backend is registered or removed, the variable changes or
        ``set_current_index`` is called: every tensor made without a device asks, and ranking the backends
        took 15 us of a 20 us ``ampcore.tensor([...])``.
        """
        if self._default is not None:
            return self._default
        env = os.environ.get("AMPCORE_DEVICE", "").strip()
        key = (self.generation, env, tuple(self._current.items()))
        remembered = self._remembered_default
        if remembered is not None and remembered[0] == key:
            return remembered[1]
        if env:
            try:
                found = self.resolve(env)
            except Exception as exc:
                # Amend the message in place: the exception types take structured
                # arguments (UnknownBackendError(name, known)), so re-creating them fails.
                exc.args = (f"{exc} (from AMPCORE_DEVICE={env!r})",)
                raise
        else:
            found = self.best_device()
        self._remembered_default = (key, found)
        return found

    def best_device(self) -> Device:
        """The highest-priority available backend's first device."""
        candidates = self.available()
        if not candidates:
            raise RuntimeError(
                "no available ampcore backend; install one, e.g. pip install ampcore-cpu "
                "(run 'ampcore info' to see why installed ones are unavailable)"
            )
        return self.resolve(candidates[0].name)

    def set_current_index(self, name: str, index: int) -> None:
        """Make the index-less device name ``name`` mean ``name:index`` (``ampcore.cuda.set_device``)."""
        self._current[name] = self.resolve(device_of(name, index, True)).index

    def current_index(self, name: str) -> int | None:
        """The index :meth:`set_current_index` chose for backend ``name``, None if it was not called."""
        return self._current.get(name)

    def set_default(self, device: DeviceLike | None) -> None:
        self._default = None if device is None else self.resolve(device)

    def available(self) -> list[Backend]:
        """Available backends, highest priority first (ties broken by name)."""
        self.ensure_loaded()
        ready = [r.backend for r in list(self.records.values()) if r.availability().ok]
        return sorted(ready, key=lambda b: (-b.priority, b.name))


registry = Registry()


def get_backend(name: str) -> Backend:
    """The available backend called ``name`` (UnknownBackendError / BackendUnavailableError otherwise)."""
    return registry.get_backend(name)


def resolve_device(device: DeviceLike | None = None) -> Device:
    """Check a device name against the installed backends; None gives the default device."""
    return registry.resolve(device)


def set_default_device(device: DeviceLike | None) -> None:
    """Make ``device`` the default for new tensors (None restores automatic selection)."""
    registry.set_default(device)


def get_default_device() -> Device:
    """The device new tensors go to when none is given."""
    return registry.default_device()


def best_device() -> Device:
    """The highest-priority available backend, ignoring any default set by the user."""
    return registry.best_device()


def register_backend(backend: Backend) -> Backend:
    """Register a backend object from code; raises MissingKernelsError if it lacks primitives."""
    return registry.register_backend(backend)


def register_plugin(plugin: Any, name: str | None = None) -> None:
    """Register a plugin (an object or module with ``hookimpl`` functions) from code."""
    registry.ensure_loaded()
    registry.register_plugin(plugin, name)


def list_backends() -> list[BackendRecord]:
    """Every loaded backend, available or not, with its provenance."""
    registry.ensure_loaded()
    return list(registry.records.values())


def available_backends() -> list[Backend]:
    """Available backends, highest priority first."""
    return registry.available()


def broken_plugins() -> list[BrokenPlugin]:
    """Plugins that failed to load, with their errors."""
    registry.ensure_loaded()
    return list(registry.broken)


def set_num_threads(n: int | None) -> None:
    """Use ``n`` host threads in every backend that runs on host threads (BLAS, compiled loops), as
    ``torch.set_num_threads`` does; None goes back to ``AMPCORE_NUM_THREADS`` or the default.

    The setting holds for backends loaded later too.  ValueError unless ``n`` is a positive integer (or None).
    See :mod:`ampcore.plugins.threads` for the default.
    """
    threads.request(n)
    registry.ensure_loaded()
    wanted = threads.current().n
    for record in list(registry.records.values()):
        record.backend.set_num_threads(wanted)


def get_num_threads() -> int:
    """The number of host threads ampcore's backends use: ``set_num_threads``'s, else ``AMPCORE_NUM_THREADS``,
    else ``OMP_NUM_THREADS`` (or the BLAS variables), else the CPUs this process may use."""
    return threads.current().n


def thread_info() -> dict[str, Any]:
    """The setting, where it came from, and each loaded backend's libraries' thread counts (for reports):
    ``{"num_threads": 2, "source": "...", "backends": {"cpu": {"blas": 2, "numba": 2}}}``."""
    setting = threads.current()
    counts = {}
    for record in list_backends():
        if record.availability().ok:
            found = record.backend.thread_counts()
            if found:
                counts[record.backend.name] = dict(found)
    return {"num_threads": setting.n, "source": setting.source, "backends": counts}
