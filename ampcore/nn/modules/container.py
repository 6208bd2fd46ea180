"""Sequential, ModuleList and ModuleDict."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from ..module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


def _index(idx: int, n: int, what: str) -> int:
    if isinstance(idx, bool) or not isinstance(idx, int):
        raise TypeError(f"{what} indices must be ints or slices, got {type(idx).__name__}")
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a {what} of length {n}")
    return idx % n


class Sequential(Module):
    """Modules applied in order: ``Sequential(a, b)(x) == b(a(x))``.

    Built from modules or from one OrderedDict of name -> module; indexable
    (an int gives the module, a slice a new Sequential), ``len()`` and iterable.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    @overload
    def __getitem__(self, idx: int) -> Module: ...

    @overload
    def __getitem__(self, idx: slice) -> Sequential: ...

    def __getitem__(self, idx: int | slice) -> Any:
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        return items[_index(idx, len(items), "Sequential")][1]

    def __setitem__(self, idx: int, module: Module) -> None:
        name = list(self._modules)[_index(idx, len(self._modules), "Sequential")]
        self.add_module(name, module)

    def __delitem__(self, idx: int | slice) -> None:
        """Remove the module(s) at ``idx``; the rest are renumbered ``"0"``, ``"1"``, ... as in torch
        (names from an OrderedDict are replaced too), so ``append`` never overwrites one."""
        names = list(self._modules)
        doomed = set(names[idx] if isinstance(idx, slice) else [names[_index(idx, len(names), "Sequential")]])
        kept = [module for name, module in self._modules.items() if name not in doomed]
        self._modules.clear()
        self._modules.update((str(i), module) for i, module in enumerate(kept))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's argument name
        x = input
        for module in self._modules.values():
            x = module(x)
        return x


class ModuleList(Module):
    """A list of modules that registers them (no forward of its own)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx: int | slice) -> Any:
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])
        return mods[_index(idx, len(mods), "ModuleList")]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx: int | slice) -> None:
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[_index(idx, len(mods), "ModuleList")]
        self._modules.clear()
        self.extend(mods)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Append each of ``modules``; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index``."""
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        self.extend(mods)


class ModuleDict(Module):
    """An ordered dict of name -> module that registers each one (torch.nn.ModuleDict): ``parameters()``,
    ``state_dict()`` and ``.to()`` see them, under ``"<name>."`` prefixes.

    Built from a mapping or an iterable of ``(name, module)`` pairs; keeps insertion order (a plain dict
    keeps it too); supports ``d[name]``, ``d[name] = m``, ``del d[name]``, ``len``, iteration over the
    names, ``in``, ``keys``/``values``/``items``, ``update``, ``pop`` and ``clear``.  No forward of its own.
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        try:
            return self._modules[key]
        except KeyError:
            raise KeyError(f"no module named {key!r} in this ModuleDict; it has {list(self._modules)}") from None

    def __setitem__(self, key: str, module: Module) -> None:
        if key in self._modules and isinstance(module, Module):
            self._modules[key] = module  # a replaced module keeps its place, as in a dict
        else:
            self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        self.pop(key)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        """The names, in insertion order."""
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        """The modules, in insertion order."""
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        """``(name, module)`` pairs, in insertion order."""
        return self._modules.items()

    def pop(self, key: str) -> Module:
        """Remove the module named ``key`` and return it."""
        module = self[key]
        del self._modules[key]
        return module

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add (or replace) modules from a mapping, a ModuleDict or an iterable of ``(name, module)`` pairs."""
        if isinstance(modules, (Mapping, ModuleDict)):
            pairs: Iterable[Any] = modules.items()
        elif isinstance(modules, Iterable) and not isinstance(modules, (str, Module)):
            pairs = modules
        else:
            got = type(modules).__name__
            raise TypeError(f"ModuleDict.update takes a mapping or an iterable of (name, module) pairs, got {got}")
        for i, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"ModuleDict.update: element {i} must be a (name, module) pair, got {pair!r}")
            self[pair[0]] = pair[1]
