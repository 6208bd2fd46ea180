"""Wrappers with their target's exact parameters, for the op and kernel hot paths.

A wrapper written ``def kernel(*args, **kwargs): return fn(*args, **kwargs)``
packs a tuple and a dict on every call and reaches ``fn`` through CPython's
slow call path: about 140 ns a level on a 2-core Xeon (Python 3.11), against
25 ns for ``def kernel(a, b): return fn(a, b)``.  An op call passes through
two or three such levels (the kernel gate, a backend's floating-point guard),
so :func:`exact_wrapper` writes the wrapper with ``fn``'s own parameter list,
the way :mod:`dataclasses` writes ``__init__``.  What it cannot read (a
NumPy ufunc, a builtin) gets the ``*args, **kwargs`` form, which behaves the
same.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["exact_wrapper"]

_GENERIC = ("*args, **kwargs", "*args, **kwargs")
# (parameter list, body, names the body reads) -> the compiled factory of such wrappers.
_factories: dict[tuple[str, str, tuple[str, ...]], Callable[..., Callable[..., Any]]] = {}


def exact_wrapper(fn: Callable[..., Any], body: str, env: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """A function taking exactly ``fn``'s parameters whose body is ``body``.

    ``body`` is Python source, indented by four spaces per level from column
    zero, in which ``{call}`` stands for ``fn`` called with the parameters as
    they came (``fn(a, b, *, lr=lr)`` passed on as ``fn(a, b, lr=lr)``).  It
    may read the names in ``env``, which must start with an underscore (so a
    parameter cannot shadow them).  The result carries ``fn``'s name and
    ``__wrapped__``.
    """
    env = dict(env or {})
    bad = [name for name in env if not name.startswith("_")]
    if bad:
        raise ValueError(f"exact_wrapper env names must start with '_' (a parameter could shadow them), got {bad}")
    params, args, defaults = _parameters(fn, env)
    key = (params, body, tuple(sorted(env)) + tuple(defaults))
    factory = _factories.get(key)
    if factory is None:
        factory = _factories[key] = _compile(params, body.format(call=f"_fn({args})"), key[2])
    wrapper = factory(fn, **env, **defaults)
    wrapper.__name__ = wrapper.__qualname__ = getattr(fn, "__name__", "kernel")
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def _parameters(fn: Callable[..., Any], env: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``fn``'s parameter list, the call that passes them on, and the defaults it names (``_d0``...)."""
    if not inspect.isfunction(fn):  # a ufunc's signature lists out=, where=, casting=...: never spell those out
        return (*_GENERIC, {})
    try:
        signature = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):
        return (*_GENERIC, {})
    params: list[str] = []
    args: list[str] = []
    defaults: dict[str, Any] = {}
    star_done = False
    for p in signature.parameters.values():
        if p.name.startswith("_") or p.name in env:
            return (*_GENERIC, {})  # could shadow the body's names
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            args.append(f"*{p.name}")
            star_done = True
            continue
        if p.kind is p.VAR_KEYWORD:
            params.append(f"**{p.name}")
            args.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            params.append("*")
            star_done = True
        text = p.name
        if p.default is not p.empty:
            default = f"_d{len(defaults)}"
            defaults[default] = p.default
            text += f"={default}"
        params.append(text)
        args.append(f"{p.name}={p.name}" if p.kind is p.KEYWORD_ONLY else p.name)
        if p.kind is p.POSITIONAL_ONLY and _last_positional_only(signature, p):
            params.append("/")
    return ", ".join(params), ", ".join(args), defaults


def _last_positional_only(signature: inspect.Signature, p: inspect.Parameter) -> bool:
    kinds = [q.kind for q in signature.parameters.values()]
    index = list(signature.parameters).index(p.name)
    return index == len(kinds) - 1 or kinds[index + 1] is not p.POSITIONAL_ONLY


def _compile(params: str, body: str, names: tuple[str, ...]) -> Callable[..., Callable[..., Any]]:
    inner = "".join(f"        {line}\n" for line in body.splitlines())
    source = f"def _factory(_fn, {', '.join(names)}):\n    def wrapper({params}):\n{inner}    return wrapper\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, "<ampcore.forwarding>", "exec"), namespace)  # our own template, filled with parameter names
    factory: Callable[..., Callable[..., Any]] = namespace["_factory"]
    return factory
