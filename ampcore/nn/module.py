"""Module: the base class of layers, with torch.nn.Module's registration and state rules."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from .. import dtypes as dt
from ..autograd import no_grad, zero_grads
from ..device import Device
from ..dtypes import DType
from ..tensor import Tensor
from .parameter import Parameter, private_copy, rebind

__all__ = ["Module", "StateDictError", "IncompatibleKeys"]


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` skipped."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class StateDictError(RuntimeError):
    """A state dict does not fit a module; nothing was loaded.

    Carries ``missing_keys``, ``unexpected_keys`` and ``mismatches`` (one
    message per key whose value has the wrong type, shape or dtype).
    """

    def __init__(self, module_name: str, missing: list[str], unexpected: list[str], mismatches: list[str]):
        self.missing_keys = missing
        self.unexpected_keys = unexpected
        self.mismatches = mismatches
        lines = []
        if missing:
            lines.append("missing key(s): " + ", ".join(repr(k) for k in missing))
        if unexpected:
            lines.append("unexpected key(s): " + ", ".join(repr(k) for k in unexpected))
        lines.extend(mismatches)
        super().__init__(
            f"error(s) loading state_dict for {module_name} (nothing was loaded):\n\t" + "\n\t".join(lines)
        )


def _parse_to_args(args: tuple[Any, ...], device: Any, dtype: Any) -> tuple[Any, DType | None]:
    """``(device)``, ``(dtype)``, ``(device, dtype)`` or ``(tensor)`` -> (device, dtype)."""
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, DType):
            dtype = a
        elif isinstance(a, str):
            try:
                dtype = dt.as_dtype(a)
            except ValueError:
                device = a
        elif isinstance(a, Device):
            device = a
        else:
            raise TypeError(f"to() takes a device, a dtype or a tensor, got {a!r}")
    return device, (dt.as_dtype(dtype) if dtype is not None else None)


# Bumped whenever any module's parameters, buffers, children or training flags change: a compiled module
# (ampcore.compile) guards on it, so a replay never runs a program recorded for other parameters or modes.
_STRUCTURE = [0]


def structure_version() -> int:
    """A number that changes whenever a module's parameters, buffers, child modules or training mode change."""
    return _STRUCTURE[0]


class Module:
    """Base class of layers: assign Parameters, Modules and buffers as attributes and
    they are registered, found by ``parameters()``, saved by ``state_dict()`` and
    moved by ``to()``.  Subclasses call ``super().__init__()`` first and define
    ``forward``; calling the module calls ``forward``.
    """

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; every subclass defines it."""
        raise NotImplementedError(f"module {type(self).__name__} has no forward(); define forward(self, ...)")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------------ registration
    def _store(self, name: str) -> dict[str, Any]:
        store = self.__dict__.get(name)
        if store is None:
            raise AttributeError(
                f"cannot assign to {type(self).__name__} before Module.__init__() is called; "
                "call super().__init__() first in your __init__"
            )
        return store

    def _check_name(self, name: Any, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name must be a str, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f"{kind} name {name!r} must be non-empty and contain no '.'")

    def _check_free(self, name: str, store: str) -> None:
        """KeyError unless ``name`` is unused or already an entry of ``store`` (torch's rule: registering
        never silently replaces a parameter, buffer, child module or plain attribute of another kind)."""
        d = self.__dict__
        if name in d[store]:
            return
        if hasattr(type(self), name):
            raise KeyError(
                f"attribute {name!r} already exists on {type(self).__name__} (a class attribute); choose another name"
            )
        if name in d or any(name in d[other] for other in ("_parameters", "_buffers", "_modules")):
            raise KeyError(
                f"attribute {name!r} already exists on {type(self).__name__}; choose another name "
                f"or remove it first with delattr(module, {name!r})"
            )

    def _forget(self, name: str) -> None:
        """Drop ``name`` from every registry and the instance dict."""
        _STRUCTURE[0] += 1
        self.__dict__.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            self.__dict__[store].pop(name, None)
        self.__dict__["_non_persistent_buffers"].discard(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` (a Parameter or None) under ``name``; TypeError for anything else,
        KeyError if ``name`` is already a buffer, child module or other attribute."""
        store = self._store("_parameters")
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot register {type(param).__name__} as parameter {name!r}; "
                "wrap it in ampcore.nn.Parameter (or pass None)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"parameter {name!r} must be a leaf tensor, got one computed by {param.grad_fn!r}; "
                "create it from .detach()"
            )
        self._check_free(name, "_parameters")
        self._forget(name)
        store[name] = param
        _STRUCTURE[0] += 1

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register a non-learnable tensor (running statistics, masks) under ``name``.

        Persistent buffers are part of ``state_dict()``; all buffers are moved by ``to()``.
        KeyError if ``name`` is already a parameter, child module or other attribute.
        """
        store = self._store("_buffers")
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot register {type(tensor).__name__} as buffer {name!r}; expected a Tensor or None")
        self._check_free(name, "_buffers")
        self._forget(name)
        store[name] = tensor
        _STRUCTURE[0] += 1
        if not persistent:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register a child module (or None) under ``name``, replacing a child of that name;
        KeyError if ``name`` is already a parameter, buffer or other attribute."""
        store = self._store("_modules")
        self._check_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_free(name, "_modules")
        if name not in store:  # a child replaced keeps its place (torch's rule; a Sequential's order)
            self._forget(name)
        store[name] = module
        _STRUCTURE[0] += 1

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params, modules, buffers = d.get("_parameters"), d.get("_modules"), d.get("_buffers")
        if isinstance(value, (Parameter, Module)) or any(name in (store or ()) for store in (params, modules, buffers)):
            _STRUCTURE[0] += 1
        if isinstance(value, Parameter):
            params = self._store("_parameters")
            if name in params:  # replaced where it stands, as torch does: parameters() keeps its order
                params[name] = value
                return
            self._forget(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign {type(value).__name__} as parameter {name!r}; "
                    "expected an ampcore.nn.Parameter or None"
                )
            params[name] = None
        elif isinstance(value, Module):
            modules = self._store("_modules")
            if name not in modules:  # a child replaced keeps its place (a Sequential's order)
                self._forget(name)
            self._modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign {type(value).__name__} as child module {name!r}; expected a Module or None"
                )
            modules[name] = None
        elif buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r}; expected a Tensor or None")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: parameters, buffers and children live in their dicts.
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        _STRUCTURE[0] += 1
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, ()):
                del d[store][name]
                d["_non_persistent_buffers"].discard(name)
                return
        object.__delattr__(self, name)

    # ------------------------------------------------------------------ traversal
    def named_modules(
        self, memo: set[int] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for this module and every descendant, each once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        """This module and every descendant, each once."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) of the direct children, each once."""
        seen: set[int] = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, child in self.named_children():
            yield child

    def _named_members(
        self, store: str, prefix: str, recurse: bool, remove_duplicate: bool
    ) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, value in getattr(mod, store).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), value

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs; a parameter shared by two modules is listed once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter once, in registration order."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) pairs, each buffer once."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        """The descendant at dotted path ``target`` (``""`` is this module); AttributeError names the gap."""
        mod: Module = self
        for part in target.split(".") if target else []:
            child = mod._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r} (looking up {target!r})")
            mod = child
        return mod

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every child (recursively) and then on this module; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ modes and gradients
    def train(self, mode: bool = True) -> Module:
        """Set training mode on this module and every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError(f"training mode must be a bool, got {mode!r}")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        _STRUCTURE[0] += 1
        return self

    def eval(self) -> Module:
        """Same as ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set ``requires_grad`` on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``.grad``: to None (default) or to zeros."""
        zero_grads(self.parameters(), set_to_none)

    # ------------------------------------------------------------------ device and dtype
    def to(self, *args: Any, dtype: Any = None, device: Any = None) -> Module:
        """Move (``to(device)``) and/or cast (``to(dtype)``) parameters, their grads and buffers in place.

        Only floating tensors are cast; a non-floating ``dtype`` raises TypeError.
        Everything is converted before anything is rebound, so a failure changes nothing.
        """
        device, dtype = _parse_to_args(args, device, dtype)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"Module.to() only casts to floating dtypes, got {dtype.name}")

        def convert(t: Tensor) -> Tensor:
            out = t.detach()
            if device is not None:
                out = out.to(device=device)
            if dtype is not None and out.dtype.is_floating_point:
                out = out.to(dtype=dtype)
            return private_copy(out) if out._data is t._data else out

        targets: list[Tensor] = []
        for p in self.parameters():
            targets.append(p)
            if p.grad is not None:
                targets.append(p.grad)
        targets.extend(self.buffers())
        with no_grad():
            converted = [convert(t) for t in targets]
        for t, new in zip(targets, converted):
            rebind(t, new)
        return self

    def float(self) -> Module:
        return self.to(dt.float32)

    def double(self) -> Module:
        return self.to(dt.float64)

    def half(self) -> Module:
        return self.to(dt.float16)

    def bfloat16(self) -> Module:
        return self.to(dt.bfloat16)

    def cpu(self) -> Module:
        return self.to("cpu")

    # ------------------------------------------------------------------ state
    def _state_entries(self, prefix: str = "") -> OrderedDict[str, Tensor]:
        """Key -> live tensor for every parameter and persistent buffer (tied tensors under each name)."""
        out: OrderedDict[str, Tensor] = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                out[prefix + name] = b
        for name, child in self._modules.items():
            if child is not None:
                out.update(child._state_entries(f"{prefix}{name}."))
        return out

    def state_dict(self, *, prefix: str = "", keep_vars: bool = False) -> OrderedDict[str, Tensor]:
        """Dotted name -> tensor for every parameter and persistent buffer.

        Values are detached copies (later training does not change them); with
        ``keep_vars=True`` the live tensors themselves.
        """
        entries = self._state_entries(prefix)
        if keep_vars:
            return entries
        return OrderedDict((k, private_copy(v)) for k, v in entries.items())

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values from ``state_dict`` into this module's parameters and buffers.

        Every value is checked first (a Tensor or NumPy array of the same shape
        and dtype); with ``strict`` every key must match.  On any problem a
        :class:`StateDictError` lists all of them and nothing is changed.
        Returns the missing and unexpected keys (empty lists when strict).
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict expects a mapping of name -> tensor, got {type(state_dict).__name__}")
        entries = self._state_entries()
        missing = [k for k in entries if k not in state_dict]
        unexpected = [k for k in state_dict if k not in entries]
        mismatches = [
            msg for k, t in entries.items() if k in state_dict for msg in [_mismatch(k, t, state_dict[k])] if msg
        ]
        if mismatches or (strict and (missing or unexpected)):
            raise StateDictError(
                type(self).__name__, missing if strict else [], unexpected if strict else [], mismatches
            )
        fresh = {}
        with no_grad():
            for k, t in entries.items():
                if k in state_dict:
                    fresh[k] = _fresh_copy(state_dict[k], t)
        for k, new in fresh.items():
            rebind(entries[k], new)
        return IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        """The text inside ``Name(...)``; layers override it to show their settings."""
        return ""

    def __repr__(self) -> str:
        lines = [line for line in self.extra_repr().split("\n") if line]
        for name, child in self._modules.items():
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        if not lines:
            return f"{type(self).__name__}()"
        if len(lines) == 1 and not self._modules:
            return f"{type(self).__name__}({lines[0]})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))


def _mismatch(key: str, current: Tensor, value: Any) -> str:
    """Why ``value`` cannot be loaded into ``current`` ('' if it can)."""
    if isinstance(value, np.ndarray):
        shape, dtype_name = tuple(value.shape), _numpy_dtype_name(value.dtype)
    elif isinstance(value, Tensor):
        shape, dtype_name = value.shape, value.dtype.name
    else:
        return f"{key!r}: expected a Tensor, got {type(value).__name__}"
    if shape != current.shape:
        return f"{key!r}: shape {shape} in the state dict, but {current.shape} in the module"
    if dtype_name != current.dtype.name:
        return (
            f"{key!r}: dtype {dtype_name} in the state dict, but {current.dtype.name} in the module; "
            "cast one of them with .to(dtype) first"
        )
    return ""


def _numpy_dtype_name(dtype: np.dtype) -> str:
    try:
        return dt.as_dtype(dtype).name
    except ValueError:
        return str(dtype)


def _fresh_copy(value: Any, like: Tensor) -> Tensor:
    """``value`` on ``like``'s device, in an array of its own."""
    from ..creation import tensor

    if isinstance(value, np.ndarray):
        return tensor(value, dtype=like.dtype, device=like.device)
    moved = value.detach().to(device=like.device)
    return private_copy(moved) if moved._data is value._data else moved
