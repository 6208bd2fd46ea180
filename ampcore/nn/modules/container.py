"""Sequential and ModuleList."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any, overload

from ..module import Module

__all__ = ["Sequential", "ModuleList"]


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
