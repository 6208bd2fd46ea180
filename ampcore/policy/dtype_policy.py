"""jmp-style dtype policies: what parameters are stored in, computed in, and returned as.

``DtypePolicy.parse("params=float32,compute=bfloat16,output=float32")`` (or
the short ``"p=f32,c=bf16,o=f32"``, or one dtype for all three) describes a
mixed-precision recipe in one string, e.g. from a config file.  Its
``cast_to_*`` helpers cast the floating tensors of a nested structure;
``autocast(device_type)`` opens an autocast region computing in
``compute_dtype``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import dtypes as dt
from ..dtypes import DType
from ..tensor import Tensor

__all__ = ["DtypePolicy", "cast_tree", "set_autocast"]

# ampcore.amp's autocast, installed by ampcore.amp (which sits above the policy tables) when it is imported.
_autocast: list[Callable[..., Any] | None] = [None]


def set_autocast(autocast: Callable[..., Any]) -> None:
    """Give :meth:`DtypePolicy.autocast` the region it opens (``ampcore.amp.autocast``)."""
    _autocast[0] = autocast


_KEYS = {
    "p": "param_dtype",
    "params": "param_dtype",
    "param": "param_dtype",
    "c": "compute_dtype",
    "compute": "compute_dtype",
    "o": "output_dtype",
    "output": "output_dtype",
}
_SHORT = {
    "f32": dt.float32,
    "f16": dt.float16,
    "bf16": dt.bfloat16,
    "f64": dt.float64,
    "full": dt.float32,
    "half": dt.float16,
}


def _dtype(text: str, spec: str) -> DType:
    text = text.strip().lower()
    try:
        found = _SHORT[text] if text in _SHORT else dt.as_dtype(text)
    except (TypeError, ValueError):
        found = None
    if found is None or not found.is_floating_point:
        raise ValueError(
            f"dtype policy {spec!r}: {text!r} is not a floating dtype; use float32/f32, "
            "float16/f16/half, bfloat16/bf16 or float64/f64"
        )
    return found


@dataclass(frozen=True)
class DtypePolicy:
    """Parameter, compute and output dtypes of a mixed-precision recipe."""

    param_dtype: DType = dt.float32
    compute_dtype: DType = dt.float32
    output_dtype: DType = dt.float32

    @classmethod
    def parse(cls, spec: str) -> DtypePolicy:
        """From ``"params=float32,compute=bfloat16,output=float32"``, its short form, or one dtype for all."""
        if not isinstance(spec, str):
            raise TypeError(f"a dtype policy string is needed, got {spec!r}")
        if "=" not in spec:
            one = _dtype(spec, spec)
            return cls(one, one, one)
        fields: dict[str, DType] = {}
        for part in spec.split(","):
            key, sep, value = part.partition("=")
            name = _KEYS.get(key.strip().lower())
            if not sep or name is None:
                raise ValueError(
                    f"dtype policy {spec!r}: cannot read {part.strip()!r}; expected "
                    "'params=...', 'compute=...' or 'output=...' (or p=/c=/o=)"
                )
            if name in fields:
                raise ValueError(f"dtype policy {spec!r} sets {name} twice")
            fields[name] = _dtype(value, spec)
        return cls(**fields)

    def __str__(self) -> str:
        return f"params={self.param_dtype.name},compute={self.compute_dtype.name},output={self.output_dtype.name}"

    def cast_to_param(self, tree: Any) -> Any:
        return cast_tree(tree, self.param_dtype)

    def cast_to_compute(self, tree: Any) -> Any:
        return cast_tree(tree, self.compute_dtype)

    def cast_to_output(self, tree: Any) -> Any:
        return cast_tree(tree, self.output_dtype)

    def autocast(self, device_type: str, **kwargs: Any) -> Any:
        """An autocast region on ``device_type`` computing in ``compute_dtype``."""
        if _autocast[0] is None:
            raise RuntimeError("DtypePolicy.autocast() needs ampcore.amp, which installs autocast when imported")
        return _autocast[0](device_type, dtype=self.compute_dtype, **kwargs)


def cast_tree(tree: Any, dtype: DType, eligible: Callable[[Any], bool] | None = None) -> Any:
    """Floating tensors in nested lists/tuples/dicts cast to ``dtype`` (only those ``eligible`` accepts,
    if given); everything else as is."""
    if isinstance(tree, Tensor):
        cast = tree.dtype.is_floating_point and (eligible is None or eligible(tree))
        return tree.to(dtype) if cast else tree
    if isinstance(tree, dict):
        return {k: cast_tree(v, dtype, eligible) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        items = [cast_tree(v, dtype, eligible) for v in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    return tree
