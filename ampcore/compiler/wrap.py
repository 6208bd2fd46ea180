"""``ampcore.compile``: torch.compile's name and signature over the capture engine (:mod:`ampcore.capture`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..capture import CompiledFunction
from ..nn.module import Module, structure_version

__all__ = ["compile", "OptimizedModule", "MODES", "BACKENDS"]

MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""torch's modes; each captures the same way here (a backend's runner already replays with the least overhead
it has: a CUDA graph where the backend offers one)."""
BACKENDS = (None, "ampcore", "inductor", "eager")
"""``"eager"`` runs the function as it is (torch's debugging backend); the others capture."""
_OPTIONS = {"warmup": int, "fusion": bool, "relaxed": bool}


def _check(mode: Any, backend: Any, options: Any) -> dict[str, Any]:
    if mode not in MODES:
        raise ValueError(f"unknown compile mode {mode!r}; the modes are {', '.join(repr(m) for m in MODES[1:])}")
    if backend not in BACKENDS and not callable(backend):
        raise ValueError(f"unknown compile backend {backend!r}; use one of {', '.join(repr(b) for b in BACKENDS[1:])}")
    options = dict(options or {})
    for name, value in options.items():
        want = _OPTIONS.get(name)
        if want is None:
            raise ValueError(f"unknown compile option {name!r}; the options are {', '.join(map(repr, _OPTIONS))}")
        if not isinstance(value, want) or isinstance(value, bool) is not (want is bool):
            raise TypeError(f"compile option {name!r} must be {want.__name__}, got {value!r}")
    if options.get("warmup", 1) < 0:
        raise ValueError(f"compile option 'warmup' must be >= 0, got {options['warmup']!r}")
    return options


def compile(  # noqa: A001 - torch's name
    model: Any = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = False,
    backend: Any = None,
    mode: str | None = None,
    options: Mapping[str, Any] | None = None,
    disable: bool = False,
) -> Any:
    """Capture ``model`` (a module or a function) the way ``torch.compile`` does, as a recorded program of
    kernels replayed without the op layer (see ``docs/compile.md``).

    A module comes back as an :class:`OptimizedModule`, which behaves as the module (its attributes,
    ``state_dict``, ``train``/``eval``) and keeps it as ``_orig_mod``; calling it captures the forward and,
    when the output requires grad, the backward too.  A function comes back as a callable that captures
    everything it does: a whole training step (forward, ``scaler.scale(loss).backward()``, ``scaler.step``,
    ``scaler.update``, ``zero_grad``) replays as one program with no host read.  Without ``model`` it returns
    a decorator.

    ``fullgraph=True``: a call that cannot be captured whole (a host read such as ``.item()``) raises
    :class:`ampcore.capture.CaptureBreakError` naming the line, instead of running eagerly.  ``dynamic``:
    accepted; shapes are always specialised (a new shape records a new program, counted as a recompile).
    ``backend="eager"`` or ``disable=True``: no capture.  ``mode``: torch's names, accepted.  ``options``:
    ``warmup`` (eager calls before recording, default 1), ``fusion`` (fuse elementwise chains, default True),
    ``relaxed`` (fuse without eager's intermediate roundings: faster, not bit-identical; default False).
    """
    opts = _check(mode, backend, options)
    if model is None:
        return functools.partial(
            compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
        )
    if disable or backend == "eager":
        return model
    if isinstance(model, OptimizedModule):
        model = model._orig_mod
    if isinstance(model, Module):
        return OptimizedModule(model, fullgraph=fullgraph, options=opts)
    if not callable(model):
        raise TypeError(f"ampcore.compile needs a Module or a callable, got {type(model).__name__}")
    compiled = CompiledFunction(model, fullgraph=fullgraph, warmup=opts.get("warmup", 1), options=opts)

    run: Any = functools.wraps(model)(_runner(compiled))
    run._compiled = compiled
    run._torchdynamo_orig_callable = model  # torch's attribute for the original
    return run


def _runner(compiled: CompiledFunction) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        return compiled(*args, **kwargs)

    return run


class OptimizedModule(Module):
    """A compiled module (torch's ``OptimizedModule``): calling it replays its captured forward (and backward);
    everything else is the original module's, reached through ``_orig_mod``.

    ``state_dict()`` and ``named_parameters()`` are the original's, with its own names (torch's prefix them
    with ``_orig_mod.``); ``load_state_dict`` takes either form.
    """

    def __init__(self, mod: Module, *, fullgraph: bool = False, options: Mapping[str, Any] | None = None) -> None:
        object.__setattr__(self, "_orig_mod", mod)
        opts = dict(options or {})
        compiled = CompiledFunction(
            mod.__call__,
            fullgraph=fullgraph,
            module=mod,
            warmup=opts.get("warmup", 1),
            structure_version=structure_version,
            name=type(mod).__name__,
            options=opts,
        )
        object.__setattr__(self, "_compiled", compiled)

    # --- calling
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled(*args, **kwargs)

    # --- the original module's everything else
    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_orig_mod"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._orig_mod, name)

    @property
    def training(self) -> bool:  # type: ignore[override]
        return self._orig_mod.training

    def train(self, mode: bool = True) -> OptimizedModule:
        self._orig_mod.train(mode)
        return self

    def eval(self) -> OptimizedModule:
        return self.train(False)

    def named_modules(self, memo: Any = None, prefix: str = "", remove_duplicate: bool = True) -> Iterator[Any]:
        return self._orig_mod.named_modules(memo, prefix, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        return self._orig_mod.modules()

    def children(self) -> Iterator[Module]:
        return self._orig_mod.children()

    def named_children(self) -> Iterator[tuple[str, Module]]:
        return self._orig_mod.named_children()

    def parameters(self, recurse: bool = True) -> Iterator[Any]:
        return self._orig_mod.parameters(recurse)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        return self._orig_mod.named_parameters(*args, **kwargs)

    def buffers(self, recurse: bool = True) -> Iterator[Any]:
        return self._orig_mod.buffers(recurse)

    def named_buffers(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        return self._orig_mod.named_buffers(*args, **kwargs)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> Any:
        prefix = "_orig_mod."
        if state_dict and all(isinstance(k, str) and k.startswith(prefix) for k in state_dict):
            state_dict = {k[len(prefix) :]: v for k, v in state_dict.items()}
        return self._orig_mod.load_state_dict(state_dict, strict)

    def to(self, *args: Any, **kwargs: Any) -> OptimizedModule:
        self._orig_mod.to(*args, **kwargs)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._orig_mod.zero_grad(set_to_none)

    def apply(self, fn: Callable[[Module], None]) -> OptimizedModule:
        self._orig_mod.apply(fn)
        return self

    def requires_grad_(self, requires_grad: bool = True) -> OptimizedModule:
        self._orig_mod.requires_grad_(requires_grad)
        return self

    # a container module's own protocol (a compiled nn.Sequential indexes like one)
    def __getitem__(self, index: Any) -> Any:
        return self._orig_mod[index]

    def __len__(self) -> int:
        return len(self._orig_mod)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._orig_mod)

    def __repr__(self) -> str:
        return f"OptimizedModule(\n  (_orig_mod): {self._orig_mod!r}\n)"

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._orig_mod)) | {"_orig_mod"})
