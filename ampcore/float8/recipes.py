"""Float8 training recipes: how each tensor of a linear layer is scaled into float8.

Four recipes, as small frozen dataclasses (jmp's ``Policy`` is the model),
named and defaulted after torchao's float8 training and NVIDIA Transformer
Engine's ``recipe`` module:

- :class:`TensorwiseScaling` -- torchao's ``"tensorwise"`` recipe, TE's
  ``Float8CurrentScaling``: one scale per tensor from the tensor's own amax.
- :class:`RowwiseScaling` -- torchao's ``"rowwise"`` recipe: one scale per row
  along the reduction dimension (torchao's ``ScalingGranularity.AXISWISE``);
  powers of two by default, as torchao's recipe.
- :class:`DelayedScaling` -- TE's ``DelayedScaling``: one scale per tensor from
  an amax history of earlier steps (``amax_history_len``, ``amax_compute_algo``
  ``"max"`` or ``"most_recent"``, ``margin``).
- :class:`MXFP8BlockScaling` -- TE's ``MXFP8BlockScaling`` (OCP MX): one
  power-of-two (e8m0) scale per 32 elements along the reduction dimension.

``fp8_format`` is TE's ``Format``: ``HYBRID`` (forward tensors in e4m3,
gradients in e5m2) or ``E4M3`` throughout.

Every recipe has a string form: ``parse_recipe("delayed,amax_history_len=16")``
gives ``DelayedScaling(amax_history_len=16)`` and ``str()`` prints it back
(the recipe's name, then the fields that differ from the defaults).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

__all__ = [
    "Format",
    "Recipe",
    "TensorwiseScaling",
    "RowwiseScaling",
    "DelayedScaling",
    "MXFP8BlockScaling",
    "RECIPES",
    "parse_recipe",
]


class Format(enum.Enum):
    """Which float8 format each tensor is cast to (Transformer Engine's ``recipe.Format``)."""

    E4M3 = "e4m3"  # e4m3 for every tensor, gradients included
    HYBRID = "hybrid"  # e4m3 forward (input, weight), e5m2 backward (grad_output)

    def dtype_name(self, role: str) -> str:
        """The ampcore dtype name ``role`` (``"input"``, ``"weight"`` or ``"grad_output"``) is cast to."""
        if role == "grad_output" and self is Format.HYBRID:
            return "float8_e5m2"
        return "float8_e4m3fn"


def _format(value: Any) -> Format:
    if isinstance(value, Format):
        return value
    try:
        return Format(str(value).lower())
    except ValueError:
        raise ValueError(f"fp8_format {value!r} is not a float8 format; use 'hybrid' or 'e4m3'") from None


@dataclass(frozen=True)
class Recipe:
    """What every recipe has: the format, and whether scales are rounded down to powers of two.

    A power-of-two scale multiplies exactly (it only moves the exponent), so
    the scaled value's mantissa is the input's; torchao rounds row-wise
    scales this way by default.
    """

    name: ClassVar[str] = ""
    granularity: ClassVar[Literal["tensorwise", "rowwise", "block"]] = "tensorwise"
    fp8_format: Format = Format.HYBRID
    round_scales_to_power_of_2: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "fp8_format", _format(self.fp8_format))
        if not isinstance(self.round_scales_to_power_of_2, bool):
            raise TypeError(
                f"round_scales_to_power_of_2 must be True or False, got {self.round_scales_to_power_of_2!r}"
            )

    @property
    def delayed(self) -> bool:
        """True where scales come from earlier steps' amaxes (an amax history), not the tensor being cast."""
        return False

    def __str__(self) -> str:
        parts = [self.name]
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                parts.append(f"{f.name}={_text(value)}")
        return ",".join(parts)


def _text(value: Any) -> str:
    if isinstance(value, Format):
        return value.value
    return str(value)


@dataclass(frozen=True)
class TensorwiseScaling(Recipe):
    """Current (just-in-time) scaling, one scale per tensor: ``scale = fp8_max / amax(tensor)``.

    torchao's default ``"tensorwise"`` recipe; Transformer Engine's
    ``Float8CurrentScaling``.
    """

    name: ClassVar[str] = "tensorwise"


@dataclass(frozen=True)
class RowwiseScaling(Recipe):
    """Current scaling with one scale per row along the reduction dimension: ``scale[i] = fp8_max / amax(row i)``.

    torchao's ``"rowwise"`` recipe (``ScalingGranularity.AXISWISE``), which
    rounds its scales to powers of two by default.  An outlier then costs
    only its own row's precision.
    """

    name: ClassVar[str] = "rowwise"
    granularity: ClassVar[Literal["tensorwise", "rowwise", "block"]] = "rowwise"
    round_scales_to_power_of_2: bool = True


@dataclass(frozen=True)
class DelayedScaling(Recipe):
    """Transformer Engine's ``DelayedScaling``: the scale comes from earlier steps' amaxes.

    Each tensor keeps the amaxes of its last ``amax_history_len`` casts.  A cast uses::

        amax  = max(history) if amax_compute_algo == "max" else history[-1]
        scale = (fp8_max / amax) / 2 ** margin     # kept unchanged while amax is 0, inf or NaN

    and then appends its own amax.  The first cast of a tensor, with an empty
    history, scales by its own amax (torchao's ``enable_amax_init``).  A value
    that outgrew the history saturates to ±fp8_max (counted in
    ``float8_stats``).
    """

    name: ClassVar[str] = "delayed"
    margin: int = 0
    amax_history_len: int = 1024
    amax_compute_algo: Literal["max", "most_recent"] = "max"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "margin", _int("margin", self.margin, 0))
        object.__setattr__(self, "amax_history_len", _int("amax_history_len", self.amax_history_len, 1))
        if self.amax_compute_algo not in ("max", "most_recent"):
            raise ValueError(f"amax_compute_algo {self.amax_compute_algo!r} is not known; use 'max' or 'most_recent'")

    @property
    def delayed(self) -> bool:
        return True


@dataclass(frozen=True)
class MXFP8BlockScaling(Recipe):
    """Transformer Engine's ``MXFP8BlockScaling`` (OCP Microscaling): one e8m0 scale per 32-element block.

    Blocks run along the reduction dimension of each GEMM.  A block's scale is
    the power of two ``2 ** (floor(log2(amax(block))) - emax)`` (``emax`` = 8
    for e4m3, 15 for e5m2), stored as ``float8_e8m0fnu``; the largest element
    lands in [2**emax, 2**(emax+1)) and saturates if that exceeds fp8_max.
    Scales are powers of two by construction; TE's default format here is e4m3.
    """

    name: ClassVar[str] = "mxfp8"
    granularity: ClassVar[Literal["tensorwise", "rowwise", "block"]] = "block"
    fp8_format: Format = Format.E4M3
    round_scales_to_power_of_2: bool = True
    block_size: ClassVar[int] = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.round_scales_to_power_of_2:
            raise ValueError(
                "MXFP8BlockScaling's e8m0 scales are powers of two; round_scales_to_power_of_2 must be True"
            )


def _int(field: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{field} must be an int >= {low}, got {value!r}")
    return value


RECIPES: dict[str, type[Recipe]] = {
    cls.name: cls for cls in (TensorwiseScaling, RowwiseScaling, DelayedScaling, MXFP8BlockScaling)
}


def _value(cls: type[Recipe], key: str, text: str, spec: str) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if key not in fields:
        raise ValueError(f"float8 recipe {spec!r}: {cls.name!r} has no field {key!r}; its fields are {sorted(fields)}")
    default = fields[key].default
    if isinstance(default, bool):
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"float8 recipe {spec!r}: {key}={text!r} must be true or false")
        return text.lower() in ("true", "1")
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"float8 recipe {spec!r}: {key}={text!r} must be an int") from None
    return text


def parse_recipe(spec: str | Recipe) -> Recipe:
    """The recipe a string names: ``"tensorwise"``, ``"rowwise"``, ``"delayed"`` or ``"mxfp8"``, then ``,key=value``.

    ``parse_recipe(str(recipe)) == recipe`` for every recipe.  A recipe passes through.
    """
    if isinstance(spec, Recipe):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a float8 recipe is a Recipe or a string such as 'tensorwise', got {type(spec).__name__}")
    name, *items = [part.strip() for part in spec.split(",")]
    cls = RECIPES.get(name.lower())
    if cls is None:
        raise ValueError(f"float8 recipe {spec!r}: unknown recipe {name!r}; the recipes are {sorted(RECIPES)}")
    kwargs: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"float8 recipe {spec!r}: {item!r} is not key=value")
        kwargs[key.strip()] = _value(cls, key.strip(), text.strip(), spec)
    return cls(**kwargs)
